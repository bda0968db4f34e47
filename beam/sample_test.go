package beam_test

import (
	"context"
	"math"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oneStep is a model whose first token has probabilities .5, .3, .2 (token
// 3 is the prompt, never produced).
func oneStep() backend.ModelFunc {
	return probModel(4, 1, nil, []float64{.5, .3, .2, 0})
}

// sampleFreq runs n seeded searches of one new token and counts the first
// returned hypothesis's token.
func sampleFreq(t *testing.T, k, n int) []float64 {
	b := backend.NewMemoryBackend(4, k, oneStep())
	cfg := cfgOf(func(c *genconfig.Config) {
		c.NumBeams = k
		c.DoSample = true
		c.MaxNewTokens = intp(1)
	})
	freq := make([]float64, 4)
	for seed := range uint64(n) {
		res, err := beam.Search(context.Background(), b, [][]int32{{3}}, beam.Options{Config: cfg, Seed: seed})
		require.NoError(t, err)
		freq[res.Hypotheses[0][0].Tokens[0]] += 1 / float64(n)
	}
	return freq
}

// within3Sigma checks a frequency against a probability over n draws.
func within3Sigma(t *testing.T, p, freq float64, n int, msg string) {
	sigma := math.Sqrt(p * (1 - p) / float64(n))
	assert.InDelta(t, p, freq, 3*sigma+1e-12, msg)
}

func TestSamplingDistribution(t *testing.T) {
	const n = 4000
	// One beam: transformers' multinomial draw from softmax.
	freq := sampleFreq(t, 1, n)
	for i, p := range []float64{.5, .3, .2, 0} {
		within3Sigma(t, p, freq[i], n, "greedy sampling")
	}

	// Two beams, one step: the first two draws without replacement both
	// finish, and the better of them is returned. Token 0 loses only when
	// the draws are {1, 2}: p = .3*.2/.7 + .2*.3/.8.
	lose := .3*.2/.7 + .2*.3/.8
	freq = sampleFreq(t, 2, n)
	within3Sigma(t, 1-lose, freq[0], n, "beam sampling, token 0")
	within3Sigma(t, lose, freq[1], n, "beam sampling, token 1")
	assert.Zero(t, freq[2], "token 2 never beats both others")
}

func TestSamplingIsSeeded(t *testing.T) {
	model := hashModel(8, 6)
	cfg := cfgOf(func(c *genconfig.Config) {
		c.NumBeams = 3
		c.DoSample = true
		c.MaxNewTokens = intp(8)
		c.EOSTokenID = []int32{0}
		c.NumReturnSequences = 3
	})
	run := func(seed uint64) *beam.Result {
		b := backend.NewMemoryBackend(8, 3, model)
		res, err := beam.Search(context.Background(), b, [][]int32{{7}}, beam.Options{Config: cfg, Seed: seed})
		require.NoError(t, err)
		return res
	}
	a := run(1)
	assert.Equal(t, a.Sequences, run(1).Sequences)
	differs := false
	for seed := uint64(2); seed < 10 && !differs; seed++ {
		differs = !assert.ObjectsAreEqual(a.Sequences, run(seed).Sequences)
	}
	assert.True(t, differs, "other seeds draw other sequences")
	// Beam sampling keeps transformers' bookkeeping: each row's transition
	// scores sum to its score's numerator.
	for i, row := range a.TransitionScores {
		sum, n := float32(0), 0
		for j, s := range row {
			if a.BeamIndices[i][j] >= 0 {
				sum += s
				n++
			}
		}
		assert.InDelta(t, sum/float32(n), a.SequencesScores[i], 1e-5)
	}
}

func TestProgress(t *testing.T) {
	for _, rule := range []beam.Rule{beam.Transformers, beam.Narrowing} {
		model := hashModel(7, 8)
		b := backend.NewMemoryBackend(7, 6, model)
		var got []beam.Progress
		res, err := beam.Search(context.Background(), b, [][]int32{{6, 1}, {6, 2}}, beam.Options{
			Rule:   rule,
			Config: beamCfg(3),
			Progress: func(p beam.Progress) {
				p.Tokens = append([]int32(nil), p.Tokens...)
				got = append(got, p)
			},
		})
		require.NoError(t, err)
		for prompt := range 2 {
			var last *beam.Progress
			step := 0
			for i := range got {
				if got[i].Prompt == prompt {
					step++
					assert.Equal(t, step, got[i].Step, "%v", rule)
					assert.LessOrEqual(t, len(got[i].Tokens), got[i].Step)
					last = &got[i]
				}
			}
			require.NotNil(t, last)
			best := res.Hypotheses[prompt][0]
			assert.Equal(t, best.Tokens, last.Tokens, "%v: the last report is the result", rule)
			assert.InDelta(t, best.Score, last.Score, 1e-9)
			assert.Equal(t, best.Finished, last.Finished)
		}
	}
}

// One request, one seed, the same tokens whichever entry point runs it: the
// decoding loop (generation.Stream) and beam search with one beam end their
// chains in the same chooser and draw from the same logits.Source. Greedy
// configs must agree too, and the sampled ones must depend on the seed (so
// that agreement is not an accident of a deterministic model).
func TestSameTokensAsTheDecodingLoop(t *testing.T) {
	const vocab, seeds = 24, 200
	model := hashModel(vocab, 3)
	prompt := []int32{7, 9, 11}
	for name, set := range map[string]func(c *genconfig.Config){
		"greedy":   func(c *genconfig.Config) {},
		"sampling": func(c *genconfig.Config) { c.DoSample = true; c.TopK = 0 },
		"warped": func(c *genconfig.Config) {
			c.DoSample, c.Temperature, c.TopK, c.TopP, c.RepetitionPenalty = true, 0.7, 10, 0.9, 1.3
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := cfgOf(func(c *genconfig.Config) {
				c.MaxNewTokens = intp(16)
				c.EOSTokenID = []int32{0, 1}
				set(c)
			})
			distinct := map[string]bool{}
			loop := generation.NewGenerator(backend.NewMemoryBackend(vocab, 1, model), nil)
			searched := backend.NewMemoryBackend(vocab, 1, model)
			for seed := range uint64(seeds) {
				var streamed []int32
				for ev, err := range loop.Stream(context.Background(), []generation.Request{{Prompt: prompt, Config: cfg, Seed: seed}}) {
					require.NoError(t, err)
					if ev.Token >= 0 {
						streamed = append(streamed, ev.Token)
					}
				}
				res, err := beam.Search(context.Background(), searched, [][]int32{prompt}, beam.Options{Config: cfg, Seed: seed})
				require.NoError(t, err)
				require.Equal(t, streamed, res.Hypotheses[0][0].Tokens, "seed %d", seed)
				distinct[key(streamed)] = true
			}
			if cfg.DoSample {
				assert.Greater(t, len(distinct), seeds/2, "seeds draw different sequences")
			} else {
				assert.Len(t, distinct, 1)
			}
		})
	}
}
