package lab

import (
	"math"
	"testing"

	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On the dyadic row (0.5, 0.25, 0.125, 0.125), worked by hand.
func TestComparisonSamplersByHand(t *testing.T) {
	row := logitsOf(dyadic...)
	cases := []struct {
		name string
		f    func(u float64) (int, error)
		u    float64
		want int
	}{
		// top-2: mass 0.75, target 0.525 passes 0.5: token 1.
		{"top-k 2", func(u float64) (int, error) { return SampleTopK(row, 2, u) }, 0.7, 1},
		{"top-k 9", func(u float64) (int, error) { return SampleTopK(row, 9, u) }, 0.99, 3},
		// top-p 0.8 keeps 3 (0.875); target 0.9·0.875 = 0.7875: token 2.
		{"top-p", func(u float64) (int, error) { return SampleTopP(row, 0.8, u) }, 0.9, 2},
		// min-p 0.3: floor 0.15 keeps 2.
		{"min-p", func(u float64) (int, error) { return SampleMinP(row, 0.3, u) }, 0.99, 1},
		// epsilon 0.2 keeps 2; epsilon 0.9 keeps the top token only.
		{"epsilon", func(u float64) (int, error) { return SampleEpsilon(row, 0.2, u) }, 0.7, 1},
		{"epsilon floor", func(u float64) (int, error) { return SampleEpsilon(row, 0.9, u) }, 0.99, 0},
		// Entropy 1.75; |surprise - H| = (0.75, 0.25, 1.25, 1.25): typical
		// order (1, 0, 2, 3); mass 0.5 keeps {1, 0} (0.75). The draw ranks
		// them by probability, (0, 1): u = 0.5, target 0.375, lands on 0,
		// and so does u = 0.2; u = 0.7, target 0.525, passes 0 (0.5) to 1.
		{"typical", func(u float64) (int, error) { return SampleTypical(row, 0.5, u) }, 0.5, 0},
		{"typical low u", func(u float64) (int, error) { return SampleTypical(row, 0.5, u) }, 0.2, 0},
		{"typical high u", func(u float64) (int, error) { return SampleTypical(row, 0.5, u) }, 0.7, 1},
		// top-p 0 keeps the top token alone (transformers' rule).
		{"top-p 0", func(u float64) (int, error) { return SampleTopP(row, 0, u) }, 0.99, 0},
		// T = 0.5 squares the probabilities: (0.727, 0.182, 0.045, 0.045).
		{"temperature", func(u float64) (int, error) { return SampleTemperature(row, 0.5, u) }, 0.75, 1},
		{"temperature low u", func(u float64) (int, error) { return SampleTemperature(row, 0.5, u) }, 0.72, 0},
	}
	for _, c := range cases {
		got, err := c.f(c.u)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got, c.name)
		_, err = c.f(1)
		assert.ErrorIs(t, err, mirostat.ErrInvalidUniform, c.name)
	}

	tok, err := DrawCandidates(dyadic, []int{3, 0}, 0.1) // target 0.0625 < 0.125
	require.NoError(t, err)
	assert.Equal(t, 3, tok)
	tok, err = DrawPrefix(dyadic, []int{0, 1, 2, 3}, 2, 0.7)
	require.NoError(t, err)
	assert.Equal(t, 1, tok)

	for name, f := range map[string]func() (int, error){
		"k 0":         func() (int, error) { return SampleTopK(row, 0, 0.5) },
		"p 1.5":       func() (int, error) { return SampleTopP(row, 1.5, 0.5) },
		"min-p 2":     func() (int, error) { return SampleMinP(row, 2, 0.5) },
		"epsilon 1":   func() (int, error) { return SampleEpsilon(row, 1, 0.5) },
		"typical 1.5": func() (int, error) { return SampleTypical(row, 1.5, 0.5) },
		"T 0":         func() (int, error) { return SampleTemperature(row, 0, 0.5) },
		"T NaN":       func() (int, error) { return SampleTemperature(row, math.NaN(), 0.5) },
	} {
		_, err := f()
		assert.ErrorIs(t, err, mirostat.ErrInvalidParameter, name)
	}
}

// The comparison samplers and the Mirostat sampler share the draw: V2 with
// everything kept is temperature-1 sampling, token for token.
func TestComparisonSharesTheDraw(t *testing.T) {
	row := zipfRow(500, 1.2)
	s := mustNew(t, mirostat.Config{Version: mirostat.V2, Tau: 500, Eta: 0})
	pm := &mirostat.ParkMiller{}
	for range 200 {
		u := pm.Float64()
		st, err := s.SampleLogits(row, u)
		require.NoError(t, err)
		require.Equal(t, 500, st.Kept)
		tok, err := SampleTemperature(row, 1, u)
		require.NoError(t, err)
		require.EqualValues(t, st.Token, tok)
		tok, err = SampleTopK(row, 500, u)
		require.NoError(t, err)
		require.EqualValues(t, st.Token, tok)
	}
}
