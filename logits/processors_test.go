package logits

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/genconfig"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// apply runs procs on scores for a row with the given prompt and generated tokens.
func apply(t *testing.T, scores []float32, prompt, generated []int32, procs ...Processor) []float32 {
	t.Helper()
	p, err := Chain(len(scores), procs...)
	require.NoError(t, err)
	row := p.NewHistory(prompt)
	for _, tok := range generated {
		row.Accept(tok)
	}
	out := slices.Clone(scores)
	p.Process(row, out)
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestRepetitionPenalty(t *testing.T) {
	p := must(NewRepetitionPenalty(2))
	// Tokens 0, 1, 3 were seen (3 twice: penalised once). Negative scores are multiplied, others
	// divided; 0 stays 0, -inf stays -inf.
	got := apply(t, []float32{4, -3, 5, 0, ninf}, []int32{0, 3}, []int32{1, 3, 4}, p)
	assert.Equal(t, []float32{2, -6, 5, 0, ninf}, got)
	// True float32 division by f32(1.1), not a multiplication by its inverse.
	p = must(NewRepetitionPenalty(1.1))
	got = apply(t, []float32{1.7, -0.3}, []int32{0, 1}, nil, p)
	assert.Equal(t, []float32{float32(1.7) / float32(1.1), float32(-0.3) * float32(1.1)}, got)
	_, err := NewRepetitionPenalty(0)
	assert.Error(t, err)
}

func TestEncoderRepetitionPenalty(t *testing.T) {
	p := must(NewEncoderRepetitionPenalty(2))
	// Only prompt tokens (0, 2) count; a penalty above 1 raises them: s / 0.5 and s * 0.5.
	got := apply(t, []float32{4, 4, -3}, []int32{0, 2}, []int32{1}, p)
	assert.Equal(t, []float32{8, 4, -1.5}, got)
}

func TestNoRepeatNGram(t *testing.T) {
	p := must(NewNoRepeatNGram(2))
	// History 1 2 3 1: bigrams (1,2) (2,3) (3,1); the last token 1 was followed by 2 -> ban 2.
	got := apply(t, []float32{0, 0, 0, 0}, []int32{1, 2}, []int32{3, 1}, p)
	assert.Equal(t, []float32{0, 0, ninf, 0}, got)
	// n = 3: history 1 2 3 1 2 -> the trigram (1,2,3) bans 3.
	p3 := must(NewNoRepeatNGram(3))
	got = apply(t, []float32{0, 0, 0, nan}, []int32{1, 2, 3, 1, 2}, nil, p3)
	assert.Equal(t, ninf, got[3], "assignment overrides NaN")
	// n = 1 bans every token seen.
	p1 := must(NewNoRepeatNGram(1))
	got = apply(t, []float32{0, 0, 0, 0}, []int32{3}, []int32{1}, p1)
	assert.Equal(t, []float32{0, ninf, 0, ninf}, got)
	// Too short: nothing banned.
	got = apply(t, []float32{0, 0, 0, 0}, []int32{1}, nil, p3)
	assert.Equal(t, []float32{0, 0, 0, 0}, got)
}

func TestEncoderNoRepeatNGram(t *testing.T) {
	p := must(NewEncoderNoRepeatNGram(2))
	// Prompt bigrams (1,2) (2,0); the history ends with 2 -> 0 would repeat (2,0).
	got := apply(t, []float32{0, 0, 0, 0}, []int32{1, 2, 0}, []int32{3, 2}, p)
	assert.Equal(t, []float32{ninf, 0, 0, 0}, got)
}

func TestSequenceBias(t *testing.T) {
	p := must(NewSequenceBias([]genconfig.SequenceBias{
		{Tokens: []int32{1}, Bias: 0.5},
		{Tokens: []int32{2, 1}, Bias: 0.25}, // applies: the history ends with 2
		{Tokens: []int32{3, 1}, Bias: 100},  // does not apply
		{Tokens: []int32{3}, Bias: -1},
		{Tokens: []int32{1, 2, 3, 3}, Bias: 7}, // longer than the history + 1: skipped
		{Tokens: []int32{3}, Bias: -2},         // repeated key: the last bias wins
	}, 4))
	got := apply(t, []float32{1, 1, 1, 1}, []int32{0, 2}, nil, p)
	assert.Equal(t, []float32{1, 1.75, 1, -1}, got)
	got = apply(t, []float32{1, 1, 1, 1}, []int32{2}, nil, p)
	assert.Equal(t, []float32{1, 1.5, 1, -1}, got, "a 2-token sequence needs cur_len >= 2")

	// Per token, the biases are summed in float32 before the one addition to the score.
	p = must(NewSequenceBias([]genconfig.SequenceBias{{Tokens: []int32{1}, Bias: 1e-8}, {Tokens: []int32{2, 1}, Bias: 1e-8}}, 3))
	got = apply(t, []float32{0, 1, 0}, []int32{2, 2}, nil, p)
	assert.Equal(t, float32(1)+(float32(1e-8)+float32(1e-8)), got[1])

	_, err := NewSequenceBias(nil, 4)
	assert.Error(t, err)
	_, err = NewSequenceBias([]genconfig.SequenceBias{{Tokens: []int32{4}, Bias: 1}}, 4)
	assert.ErrorContains(t, err, "sequence_bias")
}

func TestNoBadWords(t *testing.T) {
	p := must(NewNoBadWords([][]int32{{3}, {1, 2}, {0}, {2, 0}}, []int32{0}, 4))
	// One-token word 3 always banned; [0] equals eos and is dropped; [1 2] bans 2 after 1; [2 0] bans
	// eos 0 after 2.
	got := apply(t, []float32{1, 1, 1, 1}, []int32{0, 1}, nil, p)
	assert.Equal(t, []float32{1, 1, ninf, ninf}, got)
	got = apply(t, []float32{1, 1, 1, 1}, []int32{1, 2}, nil, p)
	assert.Equal(t, []float32{ninf, 1, 1, ninf}, got)
	got = apply(t, []float32{1, 1, 1, 1}, []int32{2}, nil, p)
	assert.Equal(t, []float32{1, 1, 1, ninf}, got, "a word longer than the history is skipped (k > cur_len)")
	// The mask is added: +inf becomes NaN.
	got = apply(t, []float32{1, 1, 1, inf}, []int32{0}, nil, p)
	assert.True(t, math.IsNaN(float64(got[3])))
	_, err := NewNoBadWords(nil, nil, 4)
	assert.Error(t, err)
}

func TestMinLengthAndMinNewTokens(t *testing.T) {
	minLen := must(NewMinLength(4, []int32{0, 9}))
	// cur_len 3 < 4: eos banned (9 is outside the row and ignored).
	assert.Equal(t, []float32{ninf, 1}, apply(t, []float32{nan, 1}, []int32{5, 5}, []int32{1}, minLen))
	assert.Equal(t, []float32{2, 1}, apply(t, []float32{2, 1}, []int32{5, 5, 5}, []int32{1}, minLen))
	minNew := must(NewMinNewTokensLength(2, []int32{0}))
	assert.Equal(t, []float32{ninf, 1}, apply(t, []float32{2, 1}, []int32{5, 5, 5}, []int32{1}, minNew))
	assert.Equal(t, []float32{2, 1}, apply(t, []float32{2, 1}, []int32{5}, []int32{1, 1}, minNew))
}

func TestForcedTokens(t *testing.T) {
	bos := must(NewForcedBOS(2, 4))
	assert.Equal(t, []float32{ninf, ninf, 0, ninf}, apply(t, []float32{1, 2, 3, 4}, []int32{7}, nil, bos))
	assert.Equal(t, []float32{1, 2, 3, 4}, apply(t, []float32{1, 2, 3, 4}, []int32{7, 7}, nil, bos))
	eos := must(NewForcedEOS(5, []int32{1, 3}, 4))
	assert.Equal(t, []float32{ninf, 0, ninf, 0}, apply(t, []float32{1, 2, 3, 4}, []int32{7, 7}, []int32{1, 1}, eos))
	assert.Equal(t, []float32{1, 2, 3, 4}, apply(t, []float32{1, 2, 3, 4}, []int32{7, 7}, []int32{1}, eos))

	// In a pipeline, max_new_tokens makes max_length per row: prompt length + 3.
	p := mustPipeline(t, `{"forced_eos_token_id": 0, "max_new_tokens": 3}`, Options{VocabSize: 2})
	for _, prompt := range [][]int32{{1}, {1, 1, 1, 1}} {
		row := p.NewHistory(prompt)
		row.Accept(1)
		s := []float32{1, 2}
		p.Process(row, s)
		assert.Equal(t, []float32{1, 2}, s)
		row.Accept(1)
		p.Process(row, s)
		assert.Equal(t, []float32{0, ninf}, s, "prompt %v", prompt)
	}
}

func TestInfNanRemove(t *testing.T) {
	got := apply(t, []float32{nan, inf, ninf, 2}, nil, nil, InfNanRemove{})
	assert.Equal(t, []float32{0, math.MaxFloat32, -math.MaxFloat32, 2}, got)
}

func TestExponentialDecayLengthPenalty(t *testing.T) {
	p := must(NewExponentialDecayLengthPenalty(1, 1.5, []int32{0, 1, 1}))
	// Prompt 2, start 1: regulation starts after 3 tokens. cur_len 5 -> k = 2, factor^2-1 = 1.25.
	got := apply(t, []float32{-2, 4, 1}, []int32{7, 7}, []int32{7, 7, 7}, p)
	assert.Equal(t, []float32{-2 + 2*1.25, 4 + 4*1.25, 1}, got, "a duplicate eos is penalised once")
	got = apply(t, []float32{-2, 4, 1}, []int32{7, 7}, []int32{7}, p)
	assert.Equal(t, []float32{-2, 4, 1}, got, "not before the start")
	got = apply(t, []float32{ninf, 4, 1}, []int32{7, 7}, []int32{7, 7, 7}, p)
	assert.True(t, math.IsNaN(float64(got[0])), "transformers turns -inf into NaN")
}

func TestSuppressTokens(t *testing.T) {
	s := NewSuppressTokens([]int32{1, 99, -1})
	assert.Equal(t, []float32{1, ninf, 3}, apply(t, []float32{1, 2, 3}, []int32{0}, nil, s))
	b := NewSuppressTokensAtBegin([]int32{2}, false)
	assert.Equal(t, []float32{1, 2, ninf}, apply(t, []float32{1, 2, 3}, []int32{0, 0}, nil, b), "at cur_len == P")
	assert.Equal(t, []float32{1, 2, 3}, apply(t, []float32{1, 2, 3}, []int32{0, 0}, []int32{1}, b))
	// With a forced BOS and a one-token prompt, the beginning is the step after it.
	b = NewSuppressTokensAtBegin([]int32{2}, true)
	assert.Equal(t, []float32{1, 2, 3}, apply(t, []float32{1, 2, 3}, []int32{0}, nil, b))
	assert.Equal(t, []float32{1, 2, ninf}, apply(t, []float32{1, 2, 3}, []int32{0}, []int32{1}, b))
}

func TestTemperature(t *testing.T) {
	p := must(NewTemperature(0.7))
	in := []float32{1, -2.5, 0, ninf, 3.3}
	got := apply(t, in, nil, nil, p)
	for i, x := range in {
		assert.Equal(t, x/float32(0.7), got[i], "true float32 division by f32(T)")
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		_, err := NewTemperature(bad)
		assert.Error(t, err, "%v", bad)
	}
}

func TestTopK(t *testing.T) {
	p := must(NewTopK(2, 1))
	// The 2nd largest is 3; both 3s survive (ties with the k-th are kept).
	got := apply(t, []float32{1, 3, 5, 3, 2}, nil, nil, p)
	assert.Equal(t, []float32{ninf, 3, 5, 3, ninf}, got)
	// NaN ranks first and is never removed: with k = 2 the threshold is the largest number.
	got = apply(t, []float32{1, nan, 5, 3}, nil, nil, p)
	assert.True(t, got[1] != got[1])
	assert.Equal(t, []float32{ninf, 5, ninf}, []float32{got[0], got[2], got[3]})
	// k >= V changes nothing.
	p = must(NewTopK(10, 1))
	assert.Equal(t, []float32{1, 2}, apply(t, []float32{1, 2}, nil, nil, p))
	// min_tokens_to_keep raises k.
	p = must(NewTopK(1, 3))
	assert.Equal(t, []float32{ninf, 2, 3, 4}, apply(t, []float32{1, 2, 3, 4}, nil, nil, p))
	_, err := NewTopK(0, 1)
	assert.Error(t, err)
}

func TestTopP(t *testing.T) {
	// Probabilities 0.1, 0.2, 0.3, 0.4 (as log-probs). Ascending cumulative sums: 0.1, 0.3, 0.6, 1.
	logp := func(ps ...float64) []float32 {
		out := make([]float32, len(ps))
		for i, p := range ps {
			out[i] = float32(math.Log(p))
		}
		return out
	}
	in := logp(0.1, 0.2, 0.3, 0.4)
	for _, tc := range []struct {
		topP    float64
		minKeep int
		kept    []bool
	}{
		{0.75, 1, []bool{false, true, true, true}},  // remove cum <= 0.25: only 0.1
		{0.65, 1, []bool{false, false, true, true}}, // remove cum <= 0.35: 0.1, 0.3
		{0.5, 1, []bool{false, false, true, true}},
		{0.3, 1, []bool{false, false, false, true}},
		{0.0, 1, []bool{false, false, false, true}}, // top_p 0 keeps min_tokens_to_keep
		{0.0, 3, []bool{false, true, true, true}},
		{0.95, 1, []bool{true, true, true, true}},
	} {
		got := apply(t, in, nil, nil, must(NewTopP(tc.topP, tc.minKeep)))
		for i, k := range tc.kept {
			if k {
				assert.Equal(t, in[i], got[i], "top_p %v keeps %d", tc.topP, i)
			} else {
				assert.Equal(t, ninf, got[i], "top_p %v removes %d", tc.topP, i)
			}
		}
	}
	// Large row without TopK: the widening selection finds the nucleus.
	big := make([]float32, 5000)
	for i := range big {
		big[i] = float32(i%100) * 0.01
	}
	got := apply(t, big, nil, nil, must(NewTopP(0.9, 1)))
	kept := 0
	for _, x := range got {
		if x != ninf {
			kept++
		}
	}
	assert.Greater(t, kept, 4000)
	assert.Less(t, kept, 5000)
	_, err := NewTopP(-0.1, 1)
	assert.Error(t, err)
}

func TestMinP(t *testing.T) {
	// p = 0.5, 0.3, 0.15, 0.05; min_p 0.2 -> threshold 0.1: 0.05 removed.
	in := []float32{float32(math.Log(0.5)), float32(math.Log(0.3)), float32(math.Log(0.15)), float32(math.Log(0.05))}
	got := apply(t, in, nil, nil, must(NewMinP(0.2, 1)))
	assert.Equal(t, []float32{in[0], in[1], in[2], ninf}, got)
	// min_p 1 keeps only the max, unless min_tokens_to_keep asks for more.
	got = apply(t, in, nil, nil, must(NewMinP(1, 2)))
	assert.Equal(t, []float32{in[0], in[1], ninf, ninf}, got)
	got = apply(t, in, nil, nil, must(NewMinP(0, 1)))
	assert.Equal(t, in, got, "min_p 0 keeps everything")
}

func TestTypical(t *testing.T) {
	// p = 0.4, 0.3, 0.2, 0.1: H = 1.2799; |-log p - H| = 0.364, 0.076, 0.330, 1.023. Sorted by
	// typicality: 1 (0.3), 2 (0.2), 0 (0.4), 3 (0.1); cumulative 0.3, 0.5, 0.9, 1.0.
	in := []float32{float32(math.Log(0.4)), float32(math.Log(0.3)), float32(math.Log(0.2)), float32(math.Log(0.1))}
	got := apply(t, in, nil, nil, must(NewTypical(0.45, 1)))
	assert.Equal(t, []float32{ninf, in[1], in[2], ninf}, got, "0.5 reaches 0.45 at the second token")
	got = apply(t, in, nil, nil, must(NewTypical(0.2, 1)))
	assert.Equal(t, []float32{ninf, in[1], ninf, ninf}, got)
	got = apply(t, in, nil, nil, must(NewTypical(0.2, 3)))
	assert.Equal(t, []float32{in[0], in[1], in[2], ninf}, got, "min_tokens_to_keep counts the most typical")
}

func TestEpsilonAndEta(t *testing.T) {
	in := []float32{float32(math.Log(0.6)), float32(math.Log(0.3)), float32(math.Log(0.08)), float32(math.Log(0.02))}
	got := apply(t, in, nil, nil, must(NewEpsilon(0.05, 1)))
	assert.Equal(t, []float32{in[0], in[1], in[2], ninf}, got)
	got = apply(t, in, nil, nil, must(NewEpsilon(0.5, 3)))
	assert.Equal(t, []float32{in[0], in[1], in[2], ninf}, got, "the 3 highest are protected")
	// Eta: H = 0.948 nats, e^-H = 0.3875; eta = min(0.1, sqrt(0.1)·e^-H) = min(0.1, 0.1225) = 0.1.
	got = apply(t, in, nil, nil, must(NewEta(0.1, 1)))
	assert.Equal(t, []float32{in[0], in[1], ninf, ninf}, got)
	// eta 0.5: sqrt(0.5)·e^-H = 0.274, so 0.3 survives, 0.08 does not.
	got = apply(t, in, nil, nil, must(NewEta(0.5, 1)))
	assert.Equal(t, []float32{in[0], in[1], ninf, ninf}, got)
	got = apply(t, in, nil, nil, must(NewEta(0.9, 1)))
	assert.Equal(t, []float32{in[0], ninf, ninf, ninf}, got, "eta = sqrt(0.9)·e^-H = 0.368 > 0.3")
	_, err := NewEpsilon(1, 1)
	assert.Error(t, err)
}

func TestLogitNormalization(t *testing.T) {
	got := apply(t, []float32{0, float32(math.Log(3)), ninf}, nil, nil, LogitNormalization{})
	assert.InDelta(t, math.Log(0.25), got[0], 1e-6)
	assert.InDelta(t, math.Log(0.75), got[1], 1e-6)
	assert.Equal(t, ninf, got[2])
}

func TestWarpersLeaveInvalidRowsAlone(t *testing.T) {
	for _, w := range []Processor{must(NewTopP(0.5, 1)), must(NewMinP(0.5, 1)), must(NewTypical(0.5, 1)),
		must(NewEpsilon(0.5, 1)), must(NewEta(0.5, 1))} {
		for _, row := range [][]float32{{ninf, ninf}, {1, nan, 2}, {1, inf}} {
			got := apply(t, row, nil, nil, w)
			for i := range row {
				assert.True(t, got[i] == row[i] || (got[i] != got[i] && row[i] != row[i]), "%s %v", w.Name(), row)
			}
		}
	}
}

// TestQuotientIsDivision checks the multiply-by-reciprocal of Temperature against float32 division
// over random bit patterns (all classes: subnormal, huge, infinite, NaN) and awkward temperatures.
func TestQuotientIsDivision(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	temps := []float32{0.7, 0.3, 1.1, 3, 1e-3, 1e-30, 1e30, 1e-40, 0.99999994, 1.0000001, math.MaxFloat32, 1.4e-45}
	for range 20 {
		temps = append(temps, math.Float32frombits(rng.Uint32()&0x7fffffff))
	}
	for _, tt := range temps {
		if !(tt > 0) || math.IsInf(float64(tt), 0) {
			continue
		}
		r := 1 / float64(tt)
		for range 100000 {
			x := math.Float32frombits(rng.Uint32())
			want, got := x/tt, quotient(x, r)
			if math.Float32bits(want) != math.Float32bits(got) && !(want != want && got != got) {
				t.Fatalf("%g / %g: division %g, quotient %g", x, tt, want, got)
			}
		}
	}
}
