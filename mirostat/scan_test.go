package mirostat

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// collectAbove against its definition: the tokens at least lo in index
// order, and false when limit or more are at least floor (its list then
// does not matter), on rows with NaN, -Inf and ties at floor and lo.
func TestCollectAboveDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for trial := range 3000 {
		row := make([]float32, 1+r.IntN(400))
		for i := range row {
			switch r.IntN(10) {
			case 0:
				row[i] = float32(math.Inf(-1))
			case 1:
				row[i] = float32(math.NaN())
			case 2:
				row[i] = float32(r.IntN(4)) // ties with floor and lo
			default:
				row[i] = float32(2 * r.NormFloat64())
			}
		}
		floor := float32(r.IntN(4)) - 1
		lo := floor + float32(r.IntN(3))
		limit := 1 + r.IntN(60)
		var want []cand
		n := 0
		for i, x := range row {
			if x >= floor {
				n++
			}
			if x >= lo {
				want = append(want, cand{v: float64(x), lv: float64(x), id: int32(i)})
			}
		}
		got, ok := collectAbove(nil, row, floor, lo, limit)
		require.Equal(t, n < limit, ok, "trial %d", trial)
		if ok {
			require.Equal(t, want, got, "trial %d", trial)
		}
	}
}
