package beam

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/internal/numeric"
	"github.com/stretchr/testify/require"
)

// topScores against sorting every candidate: the n best float32 sums
// add+score, NaN left out, ties to the lower flat index; on rows of every
// width up to 300 with ties (within and across rows), -inf, +inf, NaN, and
// running scores whose sums round or overflow in float32.
func TestTopScoresAgainstSorting(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var best numeric.Best[float64]
	adds := []float32{0, 1, -2.5, 0x1p-30, 1e30, math.MaxFloat32, float32(math.Inf(-1))}
	for trial := range 3000 {
		k := 1 + rng.IntN(4)
		width := 1 + rng.IntN(300)
		rows := make([]table, k)
		type entry struct {
			key  float32
			flat int
		}
		var all []entry
		for j := range rows {
			s := make([]float32, width)
			for v := range s {
				switch rng.IntN(12) {
				case 0:
					s[v] = float32(math.Inf(-1))
				case 1:
					s[v] = float32(math.NaN())
				case 2:
					s[v] = float32(math.Inf(1))
				case 3, 4, 5:
					s[v] = float32(rng.IntN(4)) // ties
				case 6:
					s[v] = math.MaxFloat32
				default:
					s[v] = float32(rng.NormFloat64())
				}
			}
			add := adds[rng.IntN(len(adds))]
			rows[j] = table{scores: s, add: add}
			for v, x := range s {
				if acc := x + add; acc == acc {
					all = append(all, entry{acc, j*width + v})
				}
			}
		}
		slices.SortFunc(all, func(a, b entry) int {
			if c := cmp.Compare(b.key, a.key); c != 0 {
				return c
			}
			return cmp.Compare(a.flat, b.flat)
		})
		n := 1 + rng.IntN(2*k+1)
		got := topScores(nil, &best, rows, n, nil)
		require.Len(t, got, min(n, len(all)), "trial %d", trial)
		for i, c := range got {
			e := all[i]
			require.Equal(t, []any{e.flat / width, e.flat % width, math.Float32bits(e.key)},
				[]any{int(c.beam), int(c.token), math.Float32bits(c.score)}, "trial %d, rank %d", trial, i)
		}
	}
}
