package beam_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// narrowLogits cuts every logits row short by one entry.
type narrowLogits struct{ backend.Backend }

func (n narrowLogits) Logits(i int) []float32 {
	l := n.Backend.Logits(i)
	return l[:len(l)-1]
}

func beamCfg(k int) *genconfig.Config {
	return cfgOf(func(c *genconfig.Config) {
		c.NumBeams = k
		c.MaxNewTokens = intp(5)
		c.EOSTokenID = []int32{0}
	})
}

func TestValidation(t *testing.T) {
	model := hashModel(6, 1)
	prompt := [][]int32{{5, 1}}
	cases := []struct {
		name    string
		slots   int
		prompts [][]int32
		opts    beam.Options
		want    error
	}{
		{"zero beams", 4, prompt, beam.Options{Config: beamCfg(0)}, beam.ErrInvalid},
		{"negative beams narrowing", 4, prompt, beam.Options{Rule: beam.Narrowing, Config: beamCfg(-1)}, beam.ErrInvalid},
		{"return more than beams", 4, prompt, beam.Options{Config: cfgOf(func(c *genconfig.Config) {
			c.NumBeams = 2
			c.NumReturnSequences = 3
		})}, beam.ErrInvalid},
		{"more beams than slots", 3, prompt, beam.Options{Config: beamCfg(4)}, beam.ErrTooFewSlots},
		{"more beams than slots narrowing", 1, prompt, beam.Options{Rule: beam.Narrowing, Config: beamCfg(2)}, beam.ErrTooFewSlots},
		{"no prompts", 4, nil, beam.Options{Config: beamCfg(2)}, beam.ErrInvalid},
		{"empty prompt", 4, [][]int32{{1}, {}}, beam.Options{Config: beamCfg(2)}, beam.ErrInvalid},
		{"token out of range", 4, [][]int32{{1, 6}}, beam.Options{Config: beamCfg(2)}, beam.ErrInvalid},
		{"negative token", 4, [][]int32{{-1}}, beam.Options{Config: beamCfg(2)}, beam.ErrInvalid},
		{"eos out of range", 4, prompt, beam.Options{Config: cfgOf(func(c *genconfig.Config) {
			c.NumBeams = 2
			c.EOSTokenID = []int32{9}
		})}, beam.ErrInvalid},
		{"prompt fills max_length", 4, [][]int32{{1, 2, 3}}, beam.Options{Config: cfgOf(func(c *genconfig.Config) {
			c.NumBeams = 2
			c.MaxLength = 3
		})}, beam.ErrInvalid},
		{"negative length penalty narrowing", 4, prompt, beam.Options{Rule: beam.Narrowing, Config: cfgOf(func(c *genconfig.Config) {
			c.NumBeams = 2
			c.LengthPenalty = -1
		})}, beam.ErrInvalid},
		{"NaN length penalty", 4, prompt, beam.Options{Config: cfgOf(func(c *genconfig.Config) {
			c.NumBeams = 2
			c.LengthPenalty = math.NaN()
		})}, beam.ErrInvalid},
		{"sampling narrowing", 4, prompt, beam.Options{Rule: beam.Narrowing, Config: cfgOf(func(c *genconfig.Config) {
			c.NumBeams = 2
			c.DoSample = true
		})}, beam.ErrInvalid},
		{"unknown rule", 4, prompt, beam.Options{Rule: 7, Config: beamCfg(2)}, beam.ErrInvalid},
		{"more candidates than the vocabulary holds", 4, prompt, beam.Options{Config: cfgOf(func(c *genconfig.Config) {
			c.NumBeams = 2
			c.EOSTokenID = []int32{0, 1, 2, 3, 4, 5}
		})}, beam.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := backend.NewMemoryBackend(6, tc.slots, model)
			res, err := beam.Search(context.Background(), b, tc.prompts, tc.opts)
			assert.ErrorIs(t, err, tc.want)
			assert.Nil(t, res)
			requireEmpty(t, b)
		})
	}
}

// TestBadStepsLeaveTheBackendUsable feeds searches steps they cannot use:
// each fails with a clear error, clears every slot it used, and the same
// backend then serves a good search.
func TestBadStepsLeaveTheBackendUsable(t *testing.T) {
	inf := float32(math.Inf(-1))
	good := masked(hashModel(6, 3), 0) // no eos: every search reaches the bad step
	// The model turns bad on the third step of the search.
	badAt := func(bad func([]float32)) backend.ModelFunc {
		return func(h []int32) ([]float32, error) {
			l, err := good(h)
			if len(h) >= 4 {
				bad(l)
			}
			return l, err
		}
	}
	models := map[string]struct {
		model backend.ModelFunc
		want  error
	}{
		"all -inf": {badAt(func(l []float32) {
			for i := range l {
				l[i] = inf
			}
		}), beam.ErrNoFiniteScore},
		"NaN": {badAt(func(l []float32) {
			for i := range l {
				l[i] = float32(math.NaN())
			}
		}), beam.ErrNoFiniteScore},
		"model error": {func(h []int32) ([]float32, error) {
			if len(h) >= 4 {
				return nil, errors.New("model failed")
			}
			return good(h)
		}, nil},
	}
	for _, rule := range []beam.Rule{beam.Transformers, beam.Narrowing} {
		for _, k := range []int{1, 3} {
			for name, m := range models {
				var current backend.ModelFunc = m.model
				b := backend.NewMemoryBackend(6, 4, func(h []int32) ([]float32, error) { return current(h) })
				cfg := beamCfg(k)
				res, err := beam.Search(context.Background(), b, [][]int32{{5, 1}}, beam.Options{Rule: rule, Config: cfg})
				require.Error(t, err, "%v %d %s", rule, k, name)
				if m.want != nil {
					assert.ErrorIs(t, err, m.want, "%v %d %s", rule, k, name)
				}
				assert.Nil(t, res)
				requireEmpty(t, b)

				current = good
				res, err = beam.Search(context.Background(), b, [][]int32{{5, 1}}, beam.Options{Rule: rule, Config: cfg})
				require.NoError(t, err)
				want := transformersOrNarrow(t, rule, good, cfg)
				assert.Equal(t, want, res.Hypotheses[0])
				requireEmpty(t, b)
			}
		}
	}
}

func transformersOrNarrow(t *testing.T, rule beam.Rule, model backend.ModelFunc, cfg *genconfig.Config) []beam.Hypothesis {
	b := backend.NewMemoryBackend(6, cfg.NumBeams, model)
	res, err := beam.Search(context.Background(), b, [][]int32{{5, 1}}, beam.Options{Rule: rule, Config: cfg})
	require.NoError(t, err)
	return res.Hypotheses[0]
}

func TestWrongLogitsWidth(t *testing.T) {
	mem := backend.NewMemoryBackend(6, 4, hashModel(6, 1))
	for _, rule := range []beam.Rule{beam.Transformers, beam.Narrowing} {
		_, err := beam.Search(context.Background(), narrowLogits{mem}, [][]int32{{5, 1}}, beam.Options{Rule: rule, Config: beamCfg(2)})
		assert.ErrorIs(t, err, beam.ErrBadLogits)
		requireEmpty(t, mem)
	}
}

func TestBackendFull(t *testing.T) {
	mem := backend.NewMemoryBackend(6, 4, masked(hashModel(6, 1), 0))
	mem.SetCapacity(5)
	res, err := beam.Search(context.Background(), mem, [][]int32{{5, 1}}, beam.Options{Config: beamCfg(2)})
	assert.ErrorIs(t, err, beam.ErrNoRoom)
	require.NotNil(t, res, "the hypotheses found before the slot filled up")
	assert.Equal(t, []bool{true}, res.Interrupted)
	require.Len(t, res.Hypotheses[0], 1, "num_return_sequences")
	// 5 cells hold the prompt and 3 generated tokens; the 4th, chosen but
	// not yet evaluated, is part of the live beams.
	assert.Len(t, res.Hypotheses[0][0].Tokens, 4)
	assert.True(t, res.Hypotheses[0][0].Partial)
	requireEmpty(t, mem)
	mem.SetCapacity(7)
	_, err = beam.Search(context.Background(), mem, [][]int32{{5, 1}}, beam.Options{Config: beamCfg(2)})
	assert.NoError(t, err, "2 prompt tokens and 5 new tokens fit in 7 cells")
}

// Cancellation follows the contract of package backend: the prompts whose
// search completed keep their hypotheses (those of an uncancelled search),
// the prompt under way keeps the beams found so far, marked Partial, the
// error is the context's own, and every slot is cleared.
func TestCancel(t *testing.T) {
	model := hashModel(6, 1)
	prompts := [][]int32{{5, 1}, {4, 2}}
	full, err := beam.Search(context.Background(), backend.NewMemoryBackend(6, 2, model), prompts, beam.Options{Config: beamCfg(2)})
	require.NoError(t, err)

	// Two slots for two beams: the prompts are searched one after the other.
	mem := backend.NewMemoryBackend(6, 2, model)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := beam.Search(ctx, mem, prompts, beam.Options{Config: beamCfg(2), Progress: func(p beam.Progress) {
		if p.Prompt == 1 && p.Step == 2 {
			cancel()
		}
	}})
	assert.Equal(t, context.Canceled, err)
	require.NotNil(t, res)
	assert.Equal(t, full.Hypotheses[0], res.Hypotheses[0])
	assert.Equal(t, []bool{false, true}, res.Interrupted)
	require.Len(t, res.Hypotheses[1], 1, "num_return_sequences")
	h := res.Hypotheses[1][0]
	assert.True(t, h.Partial)
	assert.False(t, h.Finished)
	assert.Len(t, h.Tokens, 2, "cancelled after its second step")
	assert.InDelta(t, teacherForced(t, model, prompts[1], h.Tokens), h.LogProb, 1e-5)
	assert.InDelta(t, h.LogProb/2, h.Score, 1e-5, "length_penalty 1")
	assert.Nil(t, res.Sequences)
	alone, err := beam.Search(context.Background(), backend.NewMemoryBackend(6, 2, model), prompts[:1], beam.Options{Config: beamCfg(2)})
	require.NoError(t, err)
	assert.Equal(t, alone.Stats.Evals+2, res.Stats.Evals, "prompt 0's steps, then prompt 1's first two: no step after the cancellation")
	requireEmpty(t, mem)
}

// evalCanceller cancels the search's context inside the n-th Eval and
// returns the context's error wrapped, as llama.cpp's backend does when it
// aborts a decode.
type evalCanceller struct {
	*backend.MemoryBackend
	n      int
	cancel context.CancelFunc
}

func (e *evalCanceller) Eval(ctx context.Context, feeds []backend.Feed) error {
	if e.n--; e.n == 0 {
		e.cancel()
		return fmt.Errorf("decode aborted: %w", ctx.Err())
	}
	return e.MemoryBackend.Eval(ctx, feeds)
}

func TestCancelDuringEval(t *testing.T) {
	mem := backend.NewMemoryBackend(6, 2, hashModel(6, 1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := beam.Search(ctx, &evalCanceller{MemoryBackend: mem, n: 2, cancel: cancel}, [][]int32{{5, 1}}, beam.Options{Config: beamCfg(2)})
	assert.Equal(t, context.Canceled, err, "the context's error, not the backend's wrapping")
	require.NotNil(t, res)
	// The first step ran: the hypothesis so far is the most probable first
	// token (brute force over the prompt's log-probabilities).
	lp, err := hashModel(6, 1)([]int32{5, 1})
	require.NoError(t, err)
	best := 0
	for i, v := range lp {
		if v > lp[best] {
			best = i
		}
	}
	require.Len(t, res.Hypotheses[0], 1)
	h := res.Hypotheses[0][0]
	assert.Equal(t, []int32{int32(best)}, h.Tokens)
	assert.Equal(t, best != 0, h.Partial, "a live beam unless it is eos, which finished")
	assert.Equal(t, best == 0, h.Finished)
	assert.InDelta(t, logSoftmax64(lp)[best], h.LogProb, 1e-5)
	requireEmpty(t, mem)
}

// storeFull fails the n-th Eval as a backend whose slots share a full store.
type storeFull struct {
	*backend.MemoryBackend
	n int
}

func (f *storeFull) Eval(ctx context.Context, feeds []backend.Feed) error {
	if f.n--; f.n == 0 {
		return fmt.Errorf("decode: %w", backend.ErrContextFull)
	}
	return f.MemoryBackend.Eval(ctx, feeds)
}

// A shared store that fills up interrupts the search as a full slot does.
func TestSharedStoreFull(t *testing.T) {
	model := hashModel(6, 1)
	mem := backend.NewMemoryBackend(6, 2, model)
	res, err := beam.Search(context.Background(), &storeFull{MemoryBackend: mem, n: 4}, [][]int32{{5, 1}}, beam.Options{Config: beamCfg(2)})
	require.ErrorIs(t, err, beam.ErrNoRoom)
	require.ErrorIs(t, err, backend.ErrContextFull)
	require.NotNil(t, res)
	assert.Equal(t, []bool{true}, res.Interrupted)
	require.Len(t, res.Hypotheses[0], 1)
	h := res.Hypotheses[0][0]
	assert.Len(t, h.Tokens, 3, "three steps ran; the fourth Eval failed")
	assert.InDelta(t, teacherForced(t, model, []int32{5, 1}, h.Tokens), h.LogProb, 1e-5)
	requireEmpty(t, mem)
}

// An interrupted search returns what it had found: under Narrowing the
// hypotheses at an interruption after n tokens are exactly those of a
// search limited to n new tokens, the live beams marked Partial; a full
// slot and a cancellation are two ways to stop it there.
func TestInterruptedSearchKeepsItsHypotheses(t *testing.T) {
	// eos (0) less likely, so that beams both finish and live on
	base := hashModel(6, 3)
	model := func(history []int32) ([]float32, error) {
		l, err := base(history)
		l[0] -= 2
		return l, err
	}
	prompt := [][]int32{{5, 1}}
	cfg := func(n int) *genconfig.Config {
		return cfgOf(func(c *genconfig.Config) {
			c.NumBeams = 3
			c.MaxNewTokens = intp(n)
			c.EOSTokenID = []int32{0}
		})
	}
	limited := func(n int) []beam.Hypothesis {
		res, err := beam.Search(context.Background(), backend.NewMemoryBackend(6, 3, model), prompt,
			beam.Options{Rule: beam.Narrowing, Config: cfg(n)})
		require.NoError(t, err)
		return res.Hypotheses[0]
	}
	partial := func(hyps []beam.Hypothesis) []beam.Hypothesis {
		out := slices.Clone(hyps)
		for i := range out {
			out[i].Partial = !out[i].Finished
		}
		return out
	}

	// A full slot: 6 cells hold the prompt and 4 evaluated tokens; the 5th
	// was chosen before the slot could take it.
	mem := backend.NewMemoryBackend(6, 3, model)
	mem.SetCapacity(6)
	res, err := beam.Search(context.Background(), mem, prompt, beam.Options{Rule: beam.Narrowing, Config: cfg(20)})
	require.ErrorIs(t, err, beam.ErrNoRoom)
	require.NotNil(t, res)
	assert.Equal(t, []bool{true}, res.Interrupted)
	want := partial(limited(5))
	assert.Equal(t, want, res.Hypotheses[0])
	assert.True(t, slices.ContainsFunc(want, func(h beam.Hypothesis) bool { return h.Partial }), "live beams are returned")
	requireEmpty(t, mem)

	// A cancellation after the third step.
	mem = backend.NewMemoryBackend(6, 3, model)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err = beam.Search(ctx, mem, prompt, beam.Options{Rule: beam.Narrowing, Config: cfg(20), Progress: func(p beam.Progress) {
		if p.Step == 3 {
			cancel()
		}
	}})
	require.Equal(t, context.Canceled, err)
	assert.Equal(t, partial(limited(3)), res.Hypotheses[0])
	requireEmpty(t, mem)

	// Transformers' rule with sampling off and one beam (greedy): the tokens so far.
	mem = backend.NewMemoryBackend(6, 1, model)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	res, err = beam.Search(ctx, mem, prompt, beam.Options{Config: cfgOf(func(c *genconfig.Config) {
		c.MaxNewTokens = intp(20)
	}), Progress: func(p beam.Progress) {
		if p.Step == 4 {
			cancel()
		}
	}})
	require.Equal(t, context.Canceled, err)
	require.Len(t, res.Hypotheses[0], 1)
	h := res.Hypotheses[0][0]
	assert.True(t, h.Partial)
	require.Len(t, h.Tokens, 4)
	assert.InDelta(t, teacherForced(t, model, prompt[0], h.Tokens), h.LogProb, 1e-4)
	requireEmpty(t, mem)
}

// TestStaleSlotsAreIgnored leaves histories in the backend's slots before a
// search: the search clears or overwrites what it uses.
func TestStaleSlotsAreIgnored(t *testing.T) {
	model := hashModel(6, 2)
	want := transformersOrNarrow(t, beam.Transformers, model, beamCfg(3))
	mem := backend.NewMemoryBackend(6, 3, model)
	for i := range 3 {
		require.NoError(t, mem.Eval(context.Background(), []backend.Feed{{Slot: i, Tokens: []int32{1, 2, 3}}}))
	}
	res, err := beam.Search(context.Background(), mem, [][]int32{{5, 1}}, beam.Options{Config: beamCfg(3)})
	require.NoError(t, err)
	assert.Equal(t, want, res.Hypotheses[0])
	requireEmpty(t, mem)
}

// eogBackend is a MemoryBackend whose model names its end-of-generation
// tokens, as llamabackend.Backend does.
type eogBackend struct {
	*backend.MemoryBackend
	eog []int32
}

func (b eogBackend) EOGTokens() []int32 { return b.eog }

// A config without eos_token_id takes the backend's end-of-generation
// tokens; an empty list keeps none, and every hypothesis runs to the length
// limit.
func TestSearchTakesEOSFromBackend(t *testing.T) {
	// Token 3 is always the most likely next token, so a search that knows
	// it as eos finishes at once.
	model := func([]int32) ([]float32, error) { return []float32{-3, -2, -2.5, -0.1}, nil }
	search := func(eos []int32) *beam.Result {
		b := eogBackend{backend.NewMemoryBackend(4, 2, model), []int32{3}}
		cfg := cfgOf(func(c *genconfig.Config) {
			c.NumBeams, c.NumReturnSequences = 2, 2
			c.MaxNewTokens = intp(4)
			c.EOSTokenID = eos
		})
		res, err := beam.Search(context.Background(), b, [][]int32{{0}}, beam.Options{Config: cfg})
		require.NoError(t, err)
		return res
	}
	fromModel := search(nil)
	require.Len(t, fromModel.Hypotheses[0], 2)
	assert.Equal(t, []int32{3}, fromModel.Hypotheses[0][0].Tokens)
	assert.True(t, fromModel.Hypotheses[0][0].Finished)

	none := search([]int32{})
	for _, h := range none.Hypotheses[0] {
		assert.Len(t, h.Tokens, 4)
		assert.False(t, h.Finished)
	}
}
