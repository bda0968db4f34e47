package logits

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/testkit/benchrows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustConfig(t testing.TB, js string) *genconfig.Config {
	t.Helper()
	c, err := genconfig.Parse([]byte(js))
	require.NoError(t, err)
	return c
}

func mustPipeline(t testing.TB, js string, opts Options) *Pipeline {
	t.Helper()
	p, err := NewPipeline(mustConfig(t, js), opts)
	require.NoError(t, err)
	return p
}

// everything enables every processor of transformers' list.
const everything = `{"do_sample": true, "eos_token_id": [2, 3], "sequence_bias": [[[5], 1.0]],
	"encoder_repetition_penalty": 1.2, "repetition_penalty": 1.3, "no_repeat_ngram_size": 3,
	"encoder_no_repeat_ngram_size": 2, "bad_words_ids": [[7]], "min_length": 5, "min_new_tokens": 2,
	"forced_bos_token_id": 1, "forced_eos_token_id": 2, "remove_invalid_values": true,
	"exponential_decay_length_penalty": [4, 1.1], "suppress_tokens": [8], "begin_suppress_tokens": [9],
	"temperature": 0.7, "top_k": 20, "top_p": 0.9, "min_p": 0.05, "typical_p": 0.95,
	"epsilon_cutoff": 0.001, "eta_cutoff": 0.001, "renormalize_logits": true}`

func TestPipelineOrder(t *testing.T) {
	user := ProcessorFunc("Mine", func(*History, []float32) {})
	p := mustPipeline(t, everything, Options{VocabSize: 32, User: []Processor{user}})
	assert.Equal(t, []string{
		"SequenceBiasLogitsProcessor",
		"EncoderRepetitionPenaltyLogitsProcessor",
		"RepetitionPenaltyLogitsProcessor",
		"NoRepeatNGramLogitsProcessor",
		"EncoderNoRepeatNGramLogitsProcessor",
		"NoBadWordsLogitsProcessor",
		"MinLengthLogitsProcessor",
		"MinNewTokensLengthLogitsProcessor",
		"ForcedBOSTokenLogitsProcessor",
		"ForcedEOSTokenLogitsProcessor",
		"InfNanRemoveLogitsProcessor",
		"ExponentialDecayLengthPenalty",
		"SuppressTokensLogitsProcessor",
		"SuppressTokensAtBeginLogitsProcessor",
		"Mine",
		"TemperatureLogitsWarper",
		"TopKLogitsWarper",
		"TopPLogitsWarper",
		"MinPLogitsWarper",
		"TypicalLogitsWarper",
		"EpsilonLogitsWarper",
		"EtaLogitsWarper",
		"LogitNormalization",
	}, p.Names())
	assert.Equal(t, 23, p.Len())
}

func TestPipelineConditions(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       []string
	}{
		{"greedy default", `{}`, nil},
		{"sampling default has top_k 50", `{"do_sample": true}`, []string{"TopKLogitsWarper"}},
		{"top_k 0 disables it", `{"do_sample": true, "top_k": 0}`, nil},
		{"greedy ignores warpers", `{"temperature": 0.5, "top_k": 3, "top_p": 0.5, "min_p": 0.1}`, nil},
		{"min_p 0 still builds the warper", `{"do_sample": true, "top_k": 0, "min_p": 0.0}`, []string{"MinPLogitsWarper"}},
		{"epsilon outside (0,1) builds nothing", `{"do_sample": true, "top_k": 0, "epsilon_cutoff": 1.0}`, nil},
		{"min_length needs eos", `{"min_length": 5}`, nil},
		{"min_new_tokens gives both", `{"min_new_tokens": 2, "eos_token_id": 1}`,
			[]string{"MinLengthLogitsProcessor", "MinNewTokensLengthLogitsProcessor"}},
		{"empty suppress list still builds", `{"suppress_tokens": []}`, []string{"SuppressTokensLogitsProcessor"}},
		{"penalty 1 builds nothing", `{"repetition_penalty": 1}`, nil},
		{"normalization without sampling", `{"renormalize_logits": true, "temperature": 0.5}`, []string{"LogitNormalization"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPipeline(t, tc.json, Options{VocabSize: 10})
			assert.Equal(t, tc.want, p.Names())
		})
	}
}

func TestPipelineMinTokensToKeepUnderBeams(t *testing.T) {
	// top_k 1 under beam search with two eos ids keeps len(eos)+1 = 3 tokens.
	scores := []float32{5, 4, 3, 2, 1}
	for _, opts := range []struct {
		cfg  string
		beam bool
		keep int
	}{
		{`{"do_sample": true, "top_k": 1, "eos_token_id": [0, 1]}`, false, 1},
		{`{"do_sample": true, "top_k": 1, "eos_token_id": [0, 1]}`, true, 3},
		{`{"do_sample": true, "top_k": 1, "eos_token_id": [0, 1], "num_beams": 2}`, false, 3},
		{`{"do_sample": true, "top_k": 1, "num_beams": 2}`, false, 2},
	} {
		p := mustPipeline(t, opts.cfg, Options{VocabSize: 5, BeamSearch: opts.beam})
		s := slices.Clone(scores)
		p.Process(p.NewHistory([]int32{0}), s)
		finite := 0
		for _, x := range s {
			if x != ninf {
				finite++
			}
		}
		assert.Equal(t, opts.keep, finite, "%s beam=%v", opts.cfg, opts.beam)
	}
}

func TestPipelineUserReplacesSameType(t *testing.T) {
	mine, err := NewRepetitionPenalty(3)
	require.NoError(t, err)
	p := mustPipeline(t, `{"repetition_penalty": 1.5, "suppress_tokens": [1]}`, Options{VocabSize: 4, User: []Processor{mine}})
	assert.Equal(t, []string{"RepetitionPenaltyLogitsProcessor", "SuppressTokensLogitsProcessor"}, p.Names())
	s := []float32{3, 3, 3, 3}
	p.Process(p.NewHistory([]int32{0}), s)
	assert.Equal(t, []float32{1, ninf, 3, 3}, s, "the user's penalty 3 replaced 1.5 in place")
}

func TestPipelineErrors(t *testing.T) {
	_, err := NewPipeline(genconfig.Default(), Options{})
	assert.ErrorContains(t, err, "VocabSize")
	_, err = Chain(0)
	assert.Error(t, err)
	_, err = Chain(3, nil)
	assert.Error(t, err)
}

func TestProcessDoesNotAllocate(t *testing.T) {
	const v = 1000
	p := mustPipeline(t, everything, Options{VocabSize: v})
	rows := benchrows.Rows(3, v)
	row := p.NewHistory(benchHistory(40, v))
	work := make([]float32, v)
	step := 0
	run := func() {
		copy(work, rows[step%3])
		step++
		p.Process(row, work)
		p.Sample(row, work, 0.5)
	}
	run()
	run()
	assert.Zero(t, testing.AllocsPerRun(20, run))

	chat := mustPipeline(t, `{"do_sample": true, "repetition_penalty": 1.1, "temperature": 0.7, "top_k": 50, "top_p": 0.9}`,
		Options{VocabSize: v})
	row = chat.NewHistory(benchHistory(256, v))
	run = func() {
		copy(work, rows[step%3])
		step++
		chat.Process(row, work)
		chat.Sample(row, work, 0.5)
	}
	run()
	assert.Zero(t, testing.AllocsPerRun(20, run))
}

// candidateWarpers make the warpers that may follow top-k, each keeping its candidates.
var candidateWarpers = []func() Processor{
	func() Processor { p, _ := NewTopP(0.8, 1); return p },
	func() Processor { p, _ := NewMinP(0.02, 1); return p },
	func() Processor { p, _ := NewTypical(0.7, 2); return p },
	func() Processor { p, _ := NewEpsilon(0.01, 1); return p },
	func() Processor { p, _ := NewEta(0.01, 3); return p },
	func() Processor { return LogitNormalization{} },
}

// TestCandidatePathsAgree checks that the warpers give the same bits when they work on the
// candidates left by TopK and when they scan the whole row, and that Pipeline.Sample draws what
// SampleIndex draws.
func TestCandidatePathsAgree(t *testing.T) {
	const v = 3000
	rng := rand.New(rand.NewPCG(5, 6))
	warpers := candidateWarpers
	barrier := ProcessorFunc("barrier", func(*History, []float32) {}) // hides the candidates
	for trial := range 30 {
		src := make([]float32, v)
		for i := range src {
			src[i] = float32(rng.NormFloat64() * 3)
			if rng.IntN(50) == 0 {
				src[i] = src[max(i-1, 0)] // ties
			}
		}
		k := 1 + rng.IntN(200)
		topK, err := NewTopK(k, 1)
		require.NoError(t, err)
		for wi, w := range warpers {
			fast, err := Chain(v, topK, w())
			require.NoError(t, err)
			slow, err := Chain(v, topK, barrier, w())
			require.NoError(t, err)
			a, b := slices.Clone(src), slices.Clone(src)
			ra, rb := fast.NewHistory(nil), slow.NewHistory(nil)
			fast.Process(ra, a)
			slow.Process(rb, b)
			require.Equal(t, b, a, "trial %d warper %d k %d", trial, wi, k)
			for _, u := range []float64{0, 0.3, 0.99} {
				i1, ok1 := fast.Sample(ra, a, u)
				i2, ok2 := SampleIndex(b, u)
				require.Equal(t, i2, i1)
				require.Equal(t, ok2, ok1)
			}
		}
	}
}

// ProcessForSample leaves the row stale outside the candidates, and the draw, the NaN check and
// every fallback of Sample come out as after Process: chains of top-k with each warper after it
// (the ones that read the whole row make the row whole first), rows with NaN, +inf and all -inf
// candidates.
func TestProcessForSampleDrawsAsProcess(t *testing.T) {
	const v = 2000
	rng := rand.New(rand.NewPCG(15, 16))
	warpers := append(slices.Clone(candidateWarpers), func() Processor { p, _ := NewTemperature(0.7); return p })
	stale := 0
	for trial := range 300 {
		src := make([]float32, v)
		for i := range src {
			src[i] = float32(rng.NormFloat64() * 3)
		}
		switch trial % 5 {
		case 1:
			src[rng.IntN(v)] = float32(math.NaN())
		case 2:
			src[rng.IntN(v)] = float32(math.Inf(1))
		case 3:
			for i := range src[:v/2] {
				src[i] = float32(math.Inf(-1))
			}
		}
		topK, err := NewTopK(1+rng.IntN(100), 1)
		require.NoError(t, err)
		w := warpers[trial%len(warpers)]()
		p, err := Chain(v, topK, w)
		require.NoError(t, err)
		a, b := slices.Clone(src), slices.Clone(src)
		ra, rb := p.NewHistory(nil), p.NewHistory(nil)
		p.Process(ra, a)
		p.ProcessForSample(rb, b)
		for i, x := range b {
			if math.Float32bits(x) != math.Float32bits(a[i]) && !(x != x && a[i] != a[i]) {
				stale++
				require.Equal(t, float32(math.Inf(-1)), a[i], "trial %d: entry %d differs but Process kept it", trial, i)
			}
		}
		for _, u := range []float64{0, 0.3, 0.99} {
			i1, ok1 := p.Sample(ra, a, u)
			i2, ok2 := p.Sample(rb, b, u)
			require.Equal(t, []any{i1, ok1}, []any{i2, ok2}, "trial %d u %v", trial, u)
		}
		c1, err1 := Multinomial{}.Choose(ra, a, NewSource(uint64(trial)))
		c2, err2 := Multinomial{}.Choose(rb, b, NewSource(uint64(trial)))
		require.Equal(t, c1, c2, "trial %d", trial)
		require.Equal(t, fmt.Sprint(err1), fmt.Sprint(err2), "trial %d", trial)
	}
	require.Positive(t, stale, "no row was left stale: the test checks nothing")
}

// TestTemperatureTopKFusion checks the one-pass Temperature+TopK against the two stages run apart,
// including temperatures whose division makes distinct scores equal.
func TestTemperatureTopKFusion(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 300 {
		v := 2 + rng.IntN(400)
		src := make([]float32, v)
		base := float32(rng.NormFloat64())
		for i := range src {
			switch rng.IntN(4) {
			case 0: // neighbours in float32 that a division can merge
				src[i] = base
				for range rng.IntN(4) {
					src[i] = nextUp(src[i])
				}
			case 1:
				src[i] = ninf
			default:
				src[i] = float32(rng.NormFloat64() * 5)
			}
		}
		if trial%17 == 0 {
			src[rng.IntN(v)] = nan
		}
		temp := []float64{0.7, 3, 1e-3, 1e30, 1.0000001}[trial%5]
		k := 1 + rng.IntN(v)
		tw, _ := NewTemperature(temp)
		kw, _ := NewTopK(k, 1)
		fused, _ := Chain(v, tw, kw)
		apart, _ := Chain(v, tw, ProcessorFunc("barrier", func(*History, []float32) {}), kw)
		a, b := slices.Clone(src), slices.Clone(src)
		fused.Process(fused.NewHistory(nil), a)
		apart.Process(apart.NewHistory(nil), b)
		for i := range a {
			if a[i] != b[i] && !(a[i] != a[i] && b[i] != b[i]) {
				t.Fatalf("trial %d (T=%v, k=%d): index %d fused %v, apart %v", trial, temp, k, i, a[i], b[i])
			}
		}
	}
}

func nextUp(x float32) float32 { return nextAfter(x, inf) }

// TestPipelineConcurrentRows uses one pipeline from several goroutines, one row each (run with -race).
func TestPipelineConcurrentRows(t *testing.T) {
	const v = 500
	p := mustPipeline(t, everything, Options{VocabSize: v})
	rows := benchrows.Rows(4, v)
	want := make([][]float32, 4)
	for g := range want {
		row := p.NewHistory([]int32{1, 2, 3})
		want[g] = slices.Clone(rows[g])
		p.Process(row, want[g])
	}
	done := make(chan []float32, 4)
	for g := range 4 {
		go func() {
			row := p.NewHistory([]int32{1, 2, 3})
			s := slices.Clone(rows[g])
			for range 20 {
				copy(s, rows[g])
				p.Process(row, s)
			}
			done <- s
		}()
	}
	got := map[int]bool{}
	for range 4 {
		s := <-done
		for g := range want {
			if slices.Equal(s, want[g]) {
				got[g] = true
			}
		}
	}
	assert.Len(t, got, 4)
}

// NewPipeline rejects what genconfig's Validate rejects, with the same *genconfig.FieldError, so
// that a caller can name the field whichever of the two it called.
func TestNewPipelineRejectsWhatValidateRejects(t *testing.T) {
	for _, js := range []string{
		`{"do_sample": true, "top_p": -0.1}`,
		`{"do_sample": true, "temperature": 0.0}`,
		`{"do_sample": true, "temperature": 2}`,
		`{"repetition_penalty": 0.0}`,
		`{"do_sample": true, "typical_p": 0.0}`,
		`{"bad_words_ids": [[3, 10]]}`,
		`{"sequence_bias": [[[3], 2]]}`,
		`{"forced_bos_token_id": 10}`,
		`{"num_beams": 2, "num_return_sequences": 3}`,
		`{"guidance_scale": 1.5}`,
	} {
		c := mustConfig(t, js)
		_, verr := c.Validate(10)
		require.Error(t, verr, js)
		_, err := NewPipeline(c, Options{VocabSize: 10})
		require.Error(t, err, js)
		assert.Equal(t, verr.Error(), err.Error(), js)
		var fe *genconfig.FieldError
		assert.ErrorAs(t, err, &fe, js)
	}
	for _, set := range []func(c *genconfig.Config){
		func(c *genconfig.Config) { c.Temperature = math.NaN() },
		func(c *genconfig.Config) { c.RepetitionPenalty = math.NaN() },
		func(c *genconfig.Config) { c.TopP = math.NaN() },
		func(c *genconfig.Config) { c.MinP = ptr(math.NaN()) },
		func(c *genconfig.Config) { c.TypicalP = math.NaN() },
	} {
		c := genconfig.Default()
		c.DoSample = true
		set(c)
		_, err := NewPipeline(c, Options{VocabSize: 10})
		assert.Error(t, err)
	}
}
