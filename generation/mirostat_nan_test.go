package generation

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/stretchr/testify/require"
)

// The Mirostat chooser looks for a NaN only once Mirostat has failed. That
// is the old behaviour (a NaN scan first) only if Mirostat fails on every
// row with a NaN and keeps its state: checked on rows with NaN anywhere
// (first, last, beside the maximum, several), among -inf and +inf, and the
// error names the row's first NaN, as the scan did.
func TestMirostatChooserNaN(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for trial := range 3000 {
		v := 1 + rng.IntN(300)
		row := make([]float32, v)
		for i := range row {
			switch rng.IntN(8) {
			case 0:
				row[i] = -inf
			default:
				row[i] = float32(rng.NormFloat64() * 4)
			}
		}
		first := -1
		for range 1 + rng.IntN(3) {
			i := []int{0, v - 1, rng.IntN(v)}[rng.IntN(3)]
			row[i] = nan
			if first < 0 || i < first {
				first = i
			}
		}
		if trial%5 == 0 {
			row[rng.IntN(v)] = inf
			for i, x := range row { // the first NaN may have been overwritten
				if x != x {
					first = i
					break
				}
				first = -1
			}
		}
		s, err := mirostat.New(mirostat.Config{Version: []mirostat.Version{mirostat.V1, mirostat.V2}[trial%2], Tau: 5, Eta: 0.1})
		require.NoError(t, err)
		before := s.State()
		_, err = mirostatChooser{s}.Choose(nil, row, logits.NewSource(uint64(trial)))
		require.Error(t, err, "trial %d", trial)
		require.ErrorIs(t, err, logits.ErrNoChoice)
		require.Equal(t, before, s.State(), "trial %d: a failed step keeps the state", trial)
		if first >= 0 {
			require.Equal(t, fmt.Sprintf("%v: NaN score at %d", logits.ErrNoChoice, first), err.Error(), "trial %d", trial)
		}
	}
}
