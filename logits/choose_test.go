package logits

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Source draws the uniforms its documentation derives, computed here
// from math/rand/v2's PCG directly: PCG(seed, "llamaloo"), the top 53 bits
// of each output. Rand.Float64 over the same PCG keeps the low 53 bits and
// draws other numbers: the mismatch one Source removes.
func TestSourceDrawsTheDocumentedUniforms(t *testing.T) {
	for _, seed := range []uint64{0, 1, 42, math.MaxUint64} {
		src := NewSource(seed)
		pcg := rand.NewPCG(seed, 0x6c6c616d616c6f6f)
		other := rand.New(rand.NewPCG(seed, 0x6c6c616d616c6f6f))
		same := 0
		for i := range 1000 {
			want := float64(pcg.Uint64()>>11) / (1 << 53)
			got := src.Float64()
			require.Equal(t, want, got, "seed %d draw %d", seed, i)
			require.GreaterOrEqual(t, got, 0.0)
			require.Less(t, got, 1.0)
			if other.Float64() == got {
				same++
			}
		}
		assert.Zero(t, same, "Rand.Float64 draws other numbers")
	}
}

func TestSourceSeedAndCopy(t *testing.T) {
	a := NewSource(7)
	first := a.Float64()
	b := *a // a value copy continues from the same state
	assert.Equal(t, a.Float64(), b.Float64())
	a.Seed(7)
	assert.Equal(t, first, a.Float64(), "Seed restarts the stream")
	var zero Source
	assert.NotEqual(t, NewSource(0).Float64(), zero.Float64(), "the zero Source is not NewSource(0)")
}

// ExpFloat64 inverts one uniform: -log(1-u), checked against the uniforms
// of a twin Source and, over many draws, against the mean and variance of
// Exp(1).
func TestSourceExpFloat64(t *testing.T) {
	src, twin := NewSource(3), NewSource(3)
	for range 100 {
		u := twin.Float64()
		assert.Equal(t, -math.Log(1-u), src.ExpFloat64())
	}
	const n = 200000
	sum, sq := 0.0, 0.0
	for range n {
		x := src.ExpFloat64()
		if x < 0 {
			t.Fatalf("negative exponential variate %v", x)
		}
		sum += x
		sq += x * x
	}
	mean := sum / n
	assert.InDelta(t, 1, mean, 4/math.Sqrt(n), "mean of Exp(1)")
	assert.InDelta(t, 1, sq/n-mean*mean, 0.03, "variance of Exp(1)")
}

func TestGreedyChooser(t *testing.T) {
	src := NewSource(1)
	tok, err := Greedy{}.Choose(nil, []float32{1, 3, 2, 3}, src)
	require.NoError(t, err)
	assert.Equal(t, 1, tok, "the lowest index among equal maxima")
	assert.Equal(t, NewSource(1).Float64(), src.Float64(), "greedy draws nothing")

	inf := float32(math.Inf(1))
	tok, err = Greedy{}.Choose(nil, []float32{0, inf, 1}, src)
	require.NoError(t, err)
	assert.Equal(t, 1, tok)

	nan := float32(math.NaN())
	for _, scores := range [][]float32{{0, nan, 1}, {negInf, negInf}, {}} {
		_, err := Greedy{}.Choose(nil, scores, src)
		assert.ErrorIs(t, err, ErrNoChoice, "%v", scores)
	}
}

// Multinomial takes one uniform per token and returns the index that
// SampleIndex gives for it, with or without a pipeline's candidate list.
func TestMultinomialChooser(t *testing.T) {
	pipe := mustPipeline(t, `{"do_sample": true, "top_k": 5, "temperature": 0.8}`, Options{VocabSize: 64})
	require.Equal(t, Multinomial{}, pipe.Chooser())
	row := pipe.NewHistory([]int32{1, 2})
	r := rand.New(rand.NewPCG(5, 6))
	src, twin := NewSource(9), NewSource(9)
	scores := make([]float32, 64)
	seen := map[int]bool{}
	for i := range 500 {
		for j := range scores {
			scores[j] = float32(r.NormFloat64())
		}
		pipe.Process(row, scores)
		tok, err := Multinomial{}.Choose(row, scores, src)
		require.NoError(t, err)
		want, ok := SampleIndex(scores, twin.Float64())
		require.True(t, ok)
		require.Equal(t, want, tok, "draw %d", i)
		require.NotEqual(t, negInf, scores[tok], "top-k removed it")
		seen[tok] = true
		row.Accept(int32(tok))
	}
	assert.Greater(t, len(seen), 5, "it samples")

	tok, err := Multinomial{}.Choose(nil, []float32{negInf, 0, negInf}, src)
	require.NoError(t, err)
	assert.Equal(t, 1, tok)
	for _, bad := range [][]float32{{0, float32(math.NaN())}, {negInf, negInf}} {
		_, err := Multinomial{}.Choose(nil, bad, src)
		assert.ErrorIs(t, err, ErrNoChoice, "%v", bad)
	}
}

// With a candidate list, Multinomial looks for NaN among the candidates
// only; the error must still name the row's first NaN, as a scan of the
// whole row (a chooser given no history) names it.
func TestMultinomialNaNWithCandidates(t *testing.T) {
	nan := float32(math.NaN())
	for _, cfg := range []string{
		`{"do_sample": true, "top_k": 5, "temperature": 0.8}`,
		`{"do_sample": true, "top_k": 5, "top_p": 0.9, "renormalize_logits": true}`,
	} {
		pipe := mustPipeline(t, cfg, Options{VocabSize: 64})
		r := rand.New(rand.NewPCG(7, 8))
		for i := range 300 {
			row := pipe.NewHistory([]int32{1})
			scores := make([]float32, 64)
			for j := range scores {
				scores[j] = float32(r.NormFloat64())
			}
			for range r.IntN(3) { // none, one or two NaN
				scores[r.IntN(64)] = nan
			}
			pipe.Process(row, scores)
			whole := slices.Clone(scores)
			tok, err := Multinomial{}.Choose(row, scores, NewSource(uint64(i)))
			wantTok, wantErr := Multinomial{}.Choose(nil, whole, NewSource(uint64(i)))
			require.Equal(t, wantTok, tok, "%s, row %d", cfg, i)
			if wantErr == nil {
				require.NoError(t, err)
				continue
			}
			require.ErrorIs(t, err, ErrNoChoice)
			require.Equal(t, wantErr.Error(), err.Error(), "%s, row %d", cfg, i)
		}
	}
}

func TestPipelineChooser(t *testing.T) {
	assert.Equal(t, Greedy{}, mustPipeline(t, `{"top_k": 5}`, Options{VocabSize: 8}).Chooser())
	assert.Equal(t, Multinomial{}, mustPipeline(t, `{"do_sample": true}`, Options{VocabSize: 8}).Chooser())
	chain, err := Chain(8, NewSuppressTokens([]int32{1}))
	require.NoError(t, err)
	assert.Equal(t, Greedy{}, chain.Chooser())
}
