package beam_test

// The tests of the Narrowing rule over the memory backend, with oracles
// computed independently: by hand, by brute-force enumeration of every
// sequence, by an independent greedy loop, and by teacher-forced rescoring.

import (
	"context"
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A worked example small enough to check by hand: eos = 0, a = 1, b = 2,
// and a prompt token 3 that the model never produces. Two beams find b eos
// (0.4*0.9 = 0.36), which greedy decoding misses (a takes 0.5 first).
const (
	eos = 0
	ta  = 1
	tb  = 2
	bos = 3
)

func handModel() backend.ModelFunc {
	return probModel(4, 1, map[string][]float64{
		"":  {0.1, 0.5, 0.4, 0},
		"1": {0.2, 0.1, 0.7, 0},
		"2": {0.9, 0.05, 0.05, 0},
	}, []float64{0.25, 0.25, 0.5, 0})
}

func handConfig(beams int, lp float64) func(c *genconfig.Config) {
	return func(c *genconfig.Config) {
		c.NumBeams = beams
		c.MaxNewTokens = intp(2)
		c.LengthPenalty = lp
		c.EOSTokenID = []int32{eos}
	}
}

func TestHandExampleBeamBeatsGreedy(t *testing.T) {
	hyps, rec := narrow(t, handModel(), 4, 2, tokens(bos), handConfig(2, 0))
	require.Len(t, hyps, 2)
	assert.Equal(t, tokens(tb, eos), hyps[0].Tokens)
	assert.True(t, hyps[0].Finished)
	assert.InDelta(t, math.Log(0.36), hyps[0].LogProb, 1e-6)
	assert.InDelta(t, math.Log(0.36), hyps[0].Score, 1e-6)
	assert.Equal(t, tokens(ta, tb), hyps[1].Tokens)
	assert.False(t, hyps[1].Finished)
	assert.InDelta(t, math.Log(0.35), hyps[1].LogProb, 1e-6)
	assert.Equal(t, []int{1, 2}, rec.rowsPerEval(), "the model is called with 1, then 2 rows")
}

func TestHandExampleGreedyCommitsToA(t *testing.T) {
	hyps, rec := narrow(t, handModel(), 4, 1, tokens(bos), handConfig(1, 0))
	require.Len(t, hyps, 1)
	assert.Equal(t, tokens(ta, tb), hyps[0].Tokens)
	assert.False(t, hyps[0].Finished)
	assert.InDelta(t, math.Log(0.35), hyps[0].LogProb, 1e-6)
	assert.Equal(t, hyps[0].LogProb, hyps[0].Score, "greedy's score is its log-probability")
	assert.Equal(t, []int{1, 1}, rec.rowsPerEval())
}

func TestHandExampleLengthPenalty(t *testing.T) {
	hyps, _ := narrow(t, handModel(), 4, 2, tokens(bos), handConfig(2, 1))
	require.Len(t, hyps, 2)
	assert.Equal(t, tokens(tb, eos), hyps[0].Tokens)
	assert.InDelta(t, math.Log(0.36)/2, hyps[0].Score, 1e-6, "the length counts eos")
	assert.Equal(t, tokens(ta, tb), hyps[1].Tokens)
	assert.InDelta(t, math.Log(0.35)/2, hyps[1].Score, 1e-6)
}

// greedyLoop is the test's own greedy decoder: argmax (lowest id on ties)
// of the model's logits until eos or maxNew tokens.
func greedyLoop(t *testing.T, model backend.ModelFunc, prompt []int32, eosTok int32, maxNew int) ([]int32, float64) {
	hist := slices.Clone(prompt)
	var out []int32
	sum := 0.0
	for len(out) < maxNew {
		l, err := model(hist)
		require.NoError(t, err)
		best := 0
		for i, v := range l {
			if v > l[best] {
				best = i
			}
		}
		sum += logSoftmax64(l)[best]
		out = append(out, int32(best))
		hist = append(hist, int32(best))
		if int32(best) == eosTok {
			break
		}
	}
	return out, sum
}

func TestBeamOneIsGreedy(t *testing.T) {
	for seed := range uint64(6) {
		model := hashModel(5, seed)
		prompt := tokens(4, int32(seed%4))
		want, wantLP := greedyLoop(t, model, prompt, 0, 8)
		hyps, rec := narrow(t, model, 5, 1, prompt, func(c *genconfig.Config) {
			c.NumBeams = 1
			c.MaxNewTokens = intp(8)
			c.LengthPenalty = 0
			c.EOSTokenID = []int32{0}
		})
		require.Len(t, hyps, 1)
		assert.Equal(t, want, hyps[0].Tokens, "seed %d", seed)
		assert.InDelta(t, wantLP, hyps[0].LogProb, 1e-5, "seed %d", seed)
		assert.Equal(t, 1, rec.maxRows)
	}
}

// enumerate lists every output of at most maxNew tokens: the ones that end
// with eos and the ones of exactly maxNew tokens without eos.
func enumerate(vocab []int32, eosTok int32, maxNew int) [][]int32 {
	var out [][]int32
	var walk func(prefix []int32)
	walk = func(prefix []int32) {
		for _, t := range vocab {
			seq := append(slices.Clone(prefix), t)
			if t == eosTok || len(seq) == maxNew {
				out = append(out, seq)
			} else {
				walk(seq)
			}
		}
	}
	walk(nil)
	return out
}

func TestExhaustiveBeamEqualsBruteForce(t *testing.T) {
	const maxNew = 4
	model := masked(hashModel(4, 7), bos) // V = 3 real tokens; bos is never produced
	prompt := tokens(bos)
	outputs := enumerate([]int32{eos, ta, tb}, eos, maxNew)
	require.Len(t, outputs, 31)
	for _, alpha := range []float64{0, 1} {
		type scored struct {
			tokens  []int32
			logprob float64
			score   float64
		}
		want := make([]scored, len(outputs))
		for i, o := range outputs {
			lp := teacherForced(t, model, prompt, o)
			want[i] = scored{o, lp, lp / math.Pow(float64(len(o)), alpha)}
		}
		sort.SliceStable(want, func(i, j int) bool { return want[i].score > want[j].score })
		for i := 1; i < len(want); i++ {
			require.Greater(t, want[i-1].score-want[i].score, 1e-9, "the model must have no near ties")
		}

		k := 81 // 3^4: nothing is ever pruned
		hyps, _ := narrow(t, model, 4, k, prompt, func(c *genconfig.Config) {
			c.NumBeams = k
			c.MaxNewTokens = intp(maxNew)
			c.LengthPenalty = alpha
			c.EOSTokenID = []int32{eos}
		})
		require.Len(t, hyps, len(want), "alpha %v", alpha)
		for i, w := range want {
			assert.Equal(t, w.tokens, hyps[i].Tokens, "alpha %v rank %d", alpha, i)
			assert.InDelta(t, w.logprob, hyps[i].LogProb, 1e-5)
			assert.InDelta(t, w.score, hyps[i].Score, 1e-5)
			assert.Equal(t, w.tokens[len(w.tokens)-1] == eos, hyps[i].Finished)
		}
	}
}

func TestSmallBeamIsAPrefixOfTheExhaustiveRankingAtStepOne(t *testing.T) {
	model := hashModel(6, 3)
	prompt := tokens(5, 5)
	l, err := model(prompt)
	require.NoError(t, err)
	order := []int32{0, 1, 2, 3, 4, 5}
	sort.SliceStable(order, func(i, j int) bool { return l[order[i]] > l[order[j]] })
	for k := 1; k <= 6; k++ {
		hyps, _ := narrow(t, model, 6, k, prompt, func(c *genconfig.Config) {
			c.NumBeams = k
			c.MaxNewTokens = intp(1)
			c.EOSTokenID = nil
		})
		require.Len(t, hyps, k)
		for i, h := range hyps {
			assert.Equal(t, order[i:i+1], h.Tokens, "beam %d rank %d", k, i)
		}
	}
}

func TestBeamNeverHoldsMoreThanBeamSize(t *testing.T) {
	for _, k := range []int{1, 2, 3, 5} {
		model := hashModel(7, uint64(k))
		b := backend.NewMemoryBackend(7, 16, model)
		rec := &recorder{Backend: b}
		res, err := beam.Search(context.Background(), rec, [][]int32{{6, 1}}, beam.Options{Rule: beam.Narrowing, Config: cfgOf(func(c *genconfig.Config) {
			c.NumBeams = k
			c.MaxNewTokens = intp(10)
			c.EOSTokenID = []int32{0}
		})})
		require.NoError(t, err)
		assert.LessOrEqual(t, rec.maxRows, k)
		assert.LessOrEqual(t, len(res.Hypotheses[0]), k)
		slots := map[int]bool{}
		for _, fs := range rec.feeds {
			for _, f := range fs {
				slots[f.Slot] = true
			}
		}
		assert.LessOrEqual(t, len(slots), k, "a prompt uses at most num_beams slots")
		requireEmpty(t, b)
	}
}

func TestEOSFinishesAndShrinksTheBeam(t *testing.T) {
	// eos is likely, so hypotheses finish at different steps.
	base := hashModel(5, 11)
	model := func(h []int32) ([]float32, error) {
		l, err := base(h)
		l[0] += 2
		return l, err
	}
	prompt := tokens(4)
	hyps, rec := narrow(t, model, 5, 4, prompt, func(c *genconfig.Config) {
		c.NumBeams = 4
		c.MaxNewTokens = intp(6)
		c.EOSTokenID = []int32{0}
	})
	finished := 0
	for _, h := range hyps {
		for i, tok := range h.Tokens {
			if tok == 0 {
				assert.Equal(t, len(h.Tokens)-1, i, "eos only last: %v", h.Tokens)
			}
		}
		assert.Equal(t, h.Tokens[len(h.Tokens)-1] == 0, h.Finished)
		assert.InDelta(t, teacherForced(t, model, prompt, h.Tokens), h.LogProb, 1e-5)
		if h.Finished {
			finished++
		}
	}
	require.Greater(t, finished, 1, "the model must finish some hypotheses")
	rows := rec.rowsPerEval()
	for i := 2; i < len(rows); i++ {
		assert.LessOrEqual(t, rows[i], rows[i-1], "the beam never grows back: %v", rows)
	}
	assert.Less(t, rows[len(rows)-1], 4, "finished hypotheses kept their places: %v", rows)
}

func TestSearchStopsWhenTheLastHypothesisFinishes(t *testing.T) {
	model := probModel(4, 1, map[string][]float64{
		"": {0, 0.5, 0.3, 0.2},
	}, []float64{1, 0, 0, 0})
	hyps, rec := narrow(t, model, 4, 2, tokens(3), func(c *genconfig.Config) {
		c.NumBeams = 2
		c.MaxNewTokens = intp(10)
		c.EOSTokenID = []int32{0}
	})
	assert.Len(t, rec.feeds, 2, "no call with zero rows")
	require.Len(t, hyps, 2)
	assert.Equal(t, tokens(1, 0), hyps[0].Tokens)
	assert.Equal(t, tokens(2, 0), hyps[1].Tokens)
}

func TestMaxLenReturnsUnfinished(t *testing.T) {
	model := masked(hashModel(5, 2), 0)
	const k, maxNew = 3, 4
	hyps, rec := narrow(t, model, 5, k, tokens(1), func(c *genconfig.Config) {
		c.NumBeams = k
		c.MaxNewTokens = intp(maxNew)
		c.EOSTokenID = []int32{0}
	})
	require.Len(t, hyps, k)
	for _, h := range hyps {
		assert.Len(t, h.Tokens, maxNew, "survivors are not finalized one step early")
		assert.False(t, h.Finished)
	}
	assert.Len(t, rec.feeds, maxNew)
}

func TestLengthPenaltyChangesTheWinner(t *testing.T) {
	model := probModel(4, 1, map[string][]float64{
		"":      {0, 0.4, 0.6, 0},
		"1":     {0.75, 0.125, 0.125, 0},
		"2":     {0, 0.3, 0.7, 0},
		"2,2":   {0, 0.3, 0.7, 0},
		"2,2,2": {0.7, 0.15, 0.15, 0},
	}, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3, 0})
	set := func(alpha float64) func(c *genconfig.Config) {
		return func(c *genconfig.Config) {
			c.NumBeams = 2
			c.MaxNewTokens = intp(4)
			c.LengthPenalty = alpha
			c.EOSTokenID = []int32{eos}
		}
	}
	hyps, _ := narrow(t, model, 4, 2, tokens(bos), set(0))
	assert.Equal(t, tokens(ta, eos), hyps[0].Tokens)
	assert.InDelta(t, math.Log(0.3), hyps[0].Score, 1e-6)

	hyps, _ = narrow(t, model, 4, 2, tokens(bos), set(1))
	assert.Equal(t, tokens(tb, tb, tb, eos), hyps[0].Tokens)
	assert.InDelta(t, math.Log(0.6*0.7*0.7*0.7)/4, hyps[0].Score, 1e-6)
	for i := 1; i < len(hyps); i++ {
		assert.GreaterOrEqual(t, hyps[i-1].Score, hyps[i].Score, "ranked by score")
	}
}

func TestTiesGoToTheLowestID(t *testing.T) {
	uniform := func([]int32) ([]float32, error) { return make([]float32, 6), nil }
	hyps, _ := narrow(t, uniform, 6, 2, tokens(5), func(c *genconfig.Config) {
		c.NumBeams = 2
		c.MaxNewTokens = intp(1)
		c.EOSTokenID = []int32{5}
	})
	require.Len(t, hyps, 2)
	assert.Equal(t, tokens(0), hyps[0].Tokens)
	assert.Equal(t, tokens(1), hyps[1].Tokens)

	// Across beams: after 0 and 1, the lower beam's tokens come first.
	hyps, _ = narrow(t, uniform, 6, 3, tokens(5), func(c *genconfig.Config) {
		c.NumBeams = 3
		c.MaxNewTokens = intp(2)
		c.EOSTokenID = []int32{5}
	})
	require.Len(t, hyps, 3)
	assert.Equal(t, [][]int32{{0, 0}, {0, 1}, {0, 2}}, [][]int32{hyps[0].Tokens, hyps[1].Tokens, hyps[2].Tokens})
}

func TestLogitsNeedNotBeNormalized(t *testing.T) {
	base := hashModel(6, 5)
	shifted := func(h []int32) ([]float32, error) {
		l, err := base(h)
		c := float32(len(h)*7%5) * 3.5 // a different constant per row
		for i := range l {
			l[i] += c
		}
		return l, err
	}
	set := func(c *genconfig.Config) {
		c.NumBeams = 3
		c.MaxNewTokens = intp(5)
		c.EOSTokenID = []int32{0}
	}
	want, _ := narrow(t, base, 6, 3, tokens(2, 3), set)
	got, _ := narrow(t, shifted, 6, 3, tokens(2, 3), set)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].Tokens, got[i].Tokens)
		assert.InDelta(t, want[i].LogProb, got[i].LogProb, 1e-5)
	}
}

func TestMaskedTokensAreNeverChosen(t *testing.T) {
	// Only tokens 1 and 2 are ever allowed: the beam of 8 is never full,
	// and no -inf candidate fills it.
	model := masked(hashModel(6, 9), 0, 3, 4, 5)
	hyps, rec := narrow(t, model, 6, 8, tokens(5), func(c *genconfig.Config) {
		c.NumBeams = 8
		c.MaxNewTokens = intp(2)
		c.EOSTokenID = []int32{0}
	})
	require.Len(t, hyps, 4, "2 tokens, 2 steps: 4 outputs")
	for _, h := range hyps {
		for _, tok := range h.Tokens {
			assert.Contains(t, []int32{1, 2}, tok)
		}
		assert.False(t, math.IsInf(h.LogProb, 0))
	}
	assert.Equal(t, []int{1, 2}, rec.rowsPerEval())
}

func TestLogprobIsTheSumAlongThePath(t *testing.T) {
	model := hashModel(8, 21)
	prompt := tokens(7, 3, 1)
	const alpha = 0.7
	hyps, _ := narrow(t, model, 8, 4, prompt, func(c *genconfig.Config) {
		c.NumBeams = 4
		c.MaxNewTokens = intp(7)
		c.LengthPenalty = alpha
		c.EOSTokenID = []int32{2}
	})
	require.NotEmpty(t, hyps)
	for _, h := range hyps {
		lp := teacherForced(t, model, prompt, h.Tokens)
		assert.InDelta(t, lp, h.LogProb, 1e-5)
		assert.InDelta(t, lp/math.Pow(float64(len(h.Tokens)), alpha), h.Score, 1e-5)
	}
}

// checkFollowsParents checks what a prefix-dependent model saw during a
// search: every history extends the prompt, and every history longer than
// the prompt extends a history seen at the previous step (the backend
// scored the prefixes the search kept). It also rescores every returned
// hypothesis by teacher forcing.
func checkFollowsParents(seen [][]int32, prompt []int32, model backend.ModelFunc, hyps []beam.Hypothesis, logprob func(h beam.Hypothesis) float64) []string {
	var errs []string
	known := map[string]bool{}
	for _, h := range seen {
		if len(h) < len(prompt) || !slices.Equal(h[:len(prompt)], prompt) {
			errs = append(errs, "history does not start with the prompt: "+key(h))
			continue
		}
		if len(h) > len(prompt) && !known[key(h[:len(h)-1])] {
			errs = append(errs, "history extends no scored prefix: "+key(h))
		}
		known[key(h)] = true
	}
	for _, h := range hyps {
		hist := slices.Clone(prompt)
		sum := 0.0
		for _, tok := range h.Tokens {
			l, _ := model(hist)
			sum += logSoftmax64(l)[tok]
			hist = append(hist, tok)
		}
		if math.Abs(sum-logprob(h)) > 1e-4 {
			errs = append(errs, "hypothesis log-probability differs from teacher forcing: "+key(h.Tokens))
		}
	}
	return errs
}

func TestStateFollowsParentsInARealSearch(t *testing.T) {
	prompt := tokens(9, 4, 4)
	for _, rule := range []beam.Rule{beam.Narrowing, beam.Transformers} {
		for _, broken := range []bool{false, true} {
			model := hashModel(10, 17)
			seen := &seenModel{model: model}
			b := backend.NewMemoryBackend(10, 4, seen.fn)
			opts := beam.Options{Rule: rule, Config: cfgOf(func(c *genconfig.Config) {
				c.NumBeams = 4
				c.NumReturnSequences = 4
				c.MaxNewTokens = intp(6)
				c.LengthPenalty = 0
				c.EOSTokenID = []int32{0}
			})}
			var on backend.Backend = b
			if broken {
				on = dropCopies{b}
			}
			res, err := beam.Search(context.Background(), on, [][]int32{prompt}, opts)
			require.NoError(t, err)
			errs := checkFollowsParents(seen.seen, prompt, model, res.Hypotheses[0], func(h beam.Hypothesis) float64 { return h.LogProb })
			if broken {
				assert.NotEmpty(t, errs, "%v: a reorder without copies must be detected", rule)
			} else {
				assert.Empty(t, errs, "%v", rule)
			}
			requireEmpty(t, b)
		}
	}
}

// idleHolder checks, before every Eval, that each slot holding a history is
// fed by that Eval: pruned and finished beams free their slots (their KV
// cells on llama.cpp) at once.
type idleHolder struct {
	*backend.MemoryBackend
	idle int
}

func (h *idleHolder) Eval(ctx context.Context, feeds []backend.Feed) error {
	fed := map[int]bool{}
	for _, f := range feeds {
		fed[f.Slot] = true
	}
	for i := range h.Slots() {
		if len(h.History(i)) > 0 && !fed[i] {
			h.idle++
		}
	}
	return h.MemoryBackend.Eval(ctx, feeds)
}

func TestPrunedBeamsFreeTheirSlotsAtOnce(t *testing.T) {
	base := hashModel(6, 13)
	model := func(h []int32) ([]float32, error) {
		l, err := base(h)
		l[0] += 1.5 // eos is likely: hypotheses finish along the way
		return l, err
	}
	for _, rule := range []beam.Rule{beam.Transformers, beam.Narrowing} {
		b := &idleHolder{MemoryBackend: backend.NewMemoryBackend(6, 8, model)}
		res, err := beam.Search(context.Background(), b, [][]int32{{5, 1}, {5, 2}}, beam.Options{Rule: rule, Config: cfgOf(func(c *genconfig.Config) {
			c.NumBeams = 4
			c.MaxNewTokens = intp(8)
			c.EOSTokenID = []int32{0}
		})})
		require.NoError(t, err)
		assert.Zero(t, b.idle, "%v: slots held by no live beam", rule)
		assert.Positive(t, res.Stats.Copies, "%v", rule)
		requireEmpty(t, b.MemoryBackend)
	}
}
