package zipf

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Exact Zipf log-probabilities -s·ln(i+1) make every log-ratio b_i = s·t_i, so the fit returns s.
func TestExponentRecoversS(t *testing.T) {
	for _, s := range []float64{0.7, 1, 1.3, 2} {
		for _, n := range []int{2, 100, 1500} {
			lv := make([]float64, n)
			for i := range lv {
				lv[i] = -s * math.Log(float64(i+1))
			}
			assert.InDelta(t, s, Exponent(lv), 1e-12, "s=%v n=%d", s, n)
		}
	}
	assert.Zero(t, Exponent([]float64{-1}), "fewer than two tokens")
	assert.Equal(t, MinExponent, Exponent([]float64{-1, -1, -1}), "a flat top hits the floor")
}

func TestK(t *testing.T) {
	// At s = 1 the limit applies: k = 2^mu / ln n; mu = 10, n = 50000: 1024 / 10.8198 = 94.64 -> 95.
	k, ok := K(10, 1, 50000)
	assert.True(t, ok)
	assert.Equal(t, 95, k)
	// Away from s = 1, the formula by hand: s = 2, mu = 4, n = 100: ε = 1,
	// k = (16 / (1 - 1/100))^(1/2) = 4.02 -> 4.
	k, _ = K(4, 2, 100)
	assert.Equal(t, 4, k)
	k, _ = K(1e6, 1.1, 32000)
	assert.Equal(t, 32000, k, "saturates at the vocabulary")
	k, _ = K(-1e6, 1.1, 32000)
	assert.Equal(t, 1, k)
	k, _ = K(3, 1.2, 1)
	assert.Equal(t, 1, k)
	_, ok = K(math.NaN(), 1.2, 10)
	assert.False(t, ok)
}
