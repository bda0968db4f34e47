package beam

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/llamaloop/llamaloop/internal/numeric"
	"github.com/stretchr/testify/require"
)

// Rows ranked on their own cores and merged give the candidates that one
// scan of every row gives, in the same order: rows with many ties (also
// across rows, where the lower flat index wins), NaN, -inf, and steps of 2
// to 8 rows of a width above the parallel threshold.
func TestTopScoresParallelEqualsSequential(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	rng := rand.New(rand.NewPCG(3, 4))
	var job rowTops
	var best numeric.Best[float64]
	for trial := range 60 {
		k := 2 + rng.IntN(7)
		width := parallelEntries/k + 1 + rng.IntN(5000)
		rows := make([]table, k)
		for j := range rows {
			s := make([]float32, width)
			for v := range s {
				switch rng.IntN(10) {
				case 0:
					s[v] = float32(math.Inf(-1))
				case 1, 2, 3:
					s[v] = float32(rng.IntN(4)) // ties within and across rows
				default:
					s[v] = float32(rng.NormFloat64())
				}
			}
			if trial%5 == 0 {
				s[rng.IntN(width)] = float32(math.NaN())
			}
			add := float32(rng.IntN(3))
			if trial%7 == 0 && j > 0 {
				add = neg // the first step's rows
			}
			rows[j] = table{scores: s, add: add}
		}
		n := 2 * k
		want := topScores(nil, &best, rows, n, nil)
		got := topScores(nil, &best, rows, n, &job)
		require.Equal(t, want, got, "trial %d: %d rows of %d", trial, k, width)
		require.Len(t, got, n)
	}
}
