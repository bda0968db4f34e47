package mirostat

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// A V2 step that sums first and collects its candidates in a light pass
// draws what the histogram's step draws, with the same step record and the
// same state after it, bit for bit: rows peaked and flat (many candidates,
// which take the histogram's way), wide (logits far below the clamps of
// the bands and of the exponential), masked, tied, of one token; mu from
// small to large; steps chained so that mu moves.
func TestDrawLogitsV2EqualsHistogram(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	ninf := float32(math.Inf(-1))
	for trial := range 400 {
		n := 1 + rng.IntN(3000)
		if trial%10 == 0 {
			n = 1 + rng.IntN(3)
		}
		scale := []float64{0.01, 0.5, 2, 8, 60, 400}[trial%6]
		row := make([]float32, n)
		for i := range row {
			switch rng.IntN(12) {
			case 0:
				row[i] = ninf
			case 1:
				row[i] = float32(rng.IntN(3)) // ties
			default:
				row[i] = float32(rng.NormFloat64() * scale)
			}
		}
		row[rng.IntN(n)] = float32(rng.IntN(5)) // at least one unmasked
		cfg := Config{Version: V2, Tau: []float64{0.5, 3, 5, 9, 20}[trial%5], Eta: 0.1 + 0.2*rng.Float64()}
		fast, err := New(cfg)
		require.NoError(t, err)
		slow, err := New(cfg)
		require.NoError(t, err)
		for step := range 12 {
			u := rng.Float64()
			want, wantErr := slow.drawLogitsHistogram(row, u)
			got, gotErr := fast.drawLogits(row, u)
			require.Equal(t, wantErr, gotErr, "trial %d step %d", trial, step)
			require.Equal(t, want, got, "trial %d step %d (n %d, scale %g)", trial, step, n, scale)
			require.Equal(t, slow.State(), fast.State())
		}
	}
}
