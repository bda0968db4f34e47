package lab

import (
	"math"
	"testing"

	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDiagnosticsByHand(t *testing.T) {
	h, err := Entropy(dyadic)
	require.NoError(t, err)
	assert.InDelta(t, 1.75, h, 1e-15)

	order, err := Rank([]float64{0.125, 0.5, 0.125, 0.25})
	require.NoError(t, err)
	assert.Equal(t, []int{1, 3, 0, 2}, order)
	top, err := TopIndices([]float64{0.125, 0.5, 0.125, 0.25}, 3)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 3, 0}, top)

	ord := []int{0, 1, 2, 3}
	// Prefix of 2: mass 0.75; renormalized (2/3, 1/3).
	mass, err := PrefixMass(dyadic, ord, 2)
	require.NoError(t, err)
	assert.InDelta(t, 0.75, mass, 1e-15)
	ph, err := PrefixEntropy(dyadic, ord, 2)
	require.NoError(t, err)
	assert.InDelta(t, -(2.0/3)*math.Log2(2.0/3)-(1.0/3)*math.Log2(1.0/3), ph, 1e-15) // 0.918296
	kl, err := PrefixKL(dyadic, ord, 2)
	require.NoError(t, err)
	assert.InDelta(t, math.Log2(4.0/3), kl, 1e-15)
	kl, err = PrefixKL(dyadic, ord, 4)
	require.NoError(t, err)
	assert.Zero(t, kl)
	// Expected surprise: (2/3)·1 + (1/3)·2 = 4/3; variance (2/3)(1/3)² + (1/3)(2/3)² = 2/9.
	es, err := ExpectedPrefixSurprise(dyadic, ord, 2)
	require.NoError(t, err)
	assert.InDelta(t, 4.0/3, es, 1e-15)
	v, err := PrefixSurpriseVariance(dyadic, ord, 2)
	require.NoError(t, err)
	assert.InDelta(t, 2.0/9, v, 1e-15)
	es, err = ExpectedPrefixSurprise(dyadic, ord, 4)
	require.NoError(t, err)
	assert.InDelta(t, h, es, 1e-15, "the whole row's expected surprise is its entropy")

	n, err := V2PrefixSize(dyadic, ord, 2.5)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	n, err = V2PrefixSize(dyadic, ord, 0.5)
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	px, err := Perplexity(1.75)
	require.NoError(t, err)
	assert.InDelta(t, math.Pow(2, 1.75), px, 1e-12)
	sp, err := Surprise(0.125)
	require.NoError(t, err)
	assert.Equal(t, 3.0, sp)
}

// Exact Zipf probabilities p_i ∝ i^-s make every log-ratio b_i = s·t_i, so
// the least-squares fit returns s itself.
func TestZipfExponentRecoversS(t *testing.T) {
	for _, s := range []float64{0.7, 1, 1.3, 2} {
		p := make([]float64, 500)
		var z float64
		for i := range p {
			p[i] = math.Pow(float64(i+1), -s)
			z += p[i]
		}
		order := make([]int, len(p))
		for i := range p {
			p[i] /= z
			order[i] = i
		}
		got, err := ZipfExponent(p, order, 100)
		require.NoError(t, err)
		assert.InDelta(t, s, got, 1e-12)
	}
	// A flat top hits the floor.
	got, err := ZipfExponent([]float64{0.25, 0.25, 0.25, 0.25}, []int{0, 1, 2, 3}, 100)
	require.NoError(t, err)
	assert.Equal(t, 1e-3, got)
}

func TestAdaptiveK(t *testing.T) {
	// The hand case of TestV1ThreeTokensByHand.
	k, err := AdaptiveK(1, 0.8040246577056734, 3)
	require.NoError(t, err)
	assert.Equal(t, 2, k)
	// At s = 1 exactly the limit applies: k = 2^mu / ln n.
	// mu = 10, n = 50000: 1024 / 10.8198 = 94.64 -> 95.
	k, err = AdaptiveK(10, 1, 50000)
	require.NoError(t, err)
	assert.Equal(t, 95, k)
	// Just off s = 1 the formula agrees with the limit.
	k2, err := AdaptiveK(10, 1+1e-12, 50000)
	require.NoError(t, err)
	assert.Equal(t, k, k2)
	// Large mu saturates at the vocabulary, very negative mu at 1.
	k, err = AdaptiveK(1e6, 1.1, 32000)
	require.NoError(t, err)
	assert.Equal(t, 32000, k)
	k, err = AdaptiveK(-1e6, 1.1, 32000)
	require.NoError(t, err)
	assert.Equal(t, 1, k)
	_, err = AdaptiveK(1, 0, 10)
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
}

func TestDiagnosticsRejectBadInput(t *testing.T) {
	_, err := Entropy(nil)
	assert.ErrorIs(t, err, mirostat.ErrEmptyRow)
	_, err = Entropy([]float64{0.5, math.NaN()})
	var ie *mirostat.IndexError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, 1, ie.Index)
	_, err = Entropy([]float64{0.5, 0.4})
	assert.ErrorIs(t, err, mirostat.ErrInvalidProbability)
	_, err = PrefixMass(dyadic, []int{0, 0}, 1)
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
	_, err = PrefixMass(dyadic, []int{0, 9}, 1)
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
	_, err = PrefixMass(dyadic, []int{0, 1}, 3)
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
	_, err = PrefixKL([]float64{1, 0}, []int{1}, 1)
	assert.ErrorIs(t, err, mirostat.ErrAllMasked)
	_, err = Perplexity(-1)
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
	_, err = Surprise(0)
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
	_, err = Normalize([]float64{1, -1})
	assert.ErrorIs(t, err, mirostat.ErrInvalidProbability)
	_, err = Normalize([]float64{math.MaxFloat64, math.MaxFloat64})
	assert.ErrorIs(t, err, mirostat.ErrNumerical)
	p, err := Normalize([]float64{3, 1})
	require.NoError(t, err)
	assert.Equal(t, []float64{0.75, 0.25}, p)
}
