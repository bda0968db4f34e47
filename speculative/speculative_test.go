package speculative_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/speculative"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	vocab = 24
	eos   = 1
)

// bigram is a toy model whose logits depend on the last two tokens through
// a hash: a deterministic "language" with cycles, which greedy decoding
// falls into (prompt lookup then finds its candidates). noise > 0 makes a
// draft that agrees with the target in about 1-noise of the contexts.
func bigram(noise float64) backend.ModelFunc {
	row := make([]float32, vocab)
	return func(h []int32) ([]float32, error) {
		a, b := int32(0), h[len(h)-1]
		if len(h) > 1 {
			a = h[len(h)-2]
		}
		key := uint64(a)*131 + uint64(b)*7 + 3
		r := rand.New(rand.NewPCG(key, 1))
		for i := range row {
			row[i] = float32(r.NormFloat64() * 2)
		}
		row[eos] -= 3 // stops are rare but happen
		if noise > 0 {
			d := rand.New(rand.NewPCG(key, 2))
			if d.Float64() < noise {
				for i := range row {
					row[i] = float32(d.NormFloat64() * 2)
				}
			}
		}
		return row, nil
	}
}

func config(maxNew int, mod func(c *genconfig.Config)) *genconfig.Config {
	c := genconfig.Default()
	c.MaxNewTokens = &maxNew
	c.EOSTokenID = []int32{eos}
	if mod != nil {
		mod(c)
	}
	return c
}

func prompts(n int, seed uint64) [][]int32 {
	r := rand.New(rand.NewPCG(seed, 0))
	out := make([][]int32, n)
	for i := range out {
		p := make([]int32, 1+r.IntN(8))
		for j := range p {
			p[j] = int32(2 + r.IntN(vocab-2))
		}
		out[i] = p
	}
	return out
}

// plain decodes reqs with generation.Generator, the reference.
func plain(t *testing.T, model backend.ModelFunc, reqs []speculative.Request) [][]int32 {
	t.Helper()
	g := generation.NewGenerator(backend.NewMemoryBackend(vocab, 4, model), nil)
	greqs := make([]generation.Request, len(reqs))
	for i, r := range reqs {
		greqs[i] = generation.Request{Prompt: r.Prompt, Config: r.Config, Seed: r.Seed}
	}
	res, err := g.Generate(context.Background(), greqs)
	require.NoError(t, err)
	out := make([][]int32, len(res))
	for i, r := range res {
		out[i] = r.Tokens
	}
	return out
}

// checked runs the decoder's stream and checks the KV bookkeeping after
// every step, at each request's event: the target's slot holds exactly the
// sequence S so far but its last token, the draft's slot a prefix of S
// shorter than it (rejected candidates left no cells), and a finished
// request's slots are empty, as is every slot at the end.
func checked(t *testing.T, d *speculative.Decoder, target, draft *backend.MemoryBackend, reqs []speculative.Request) []speculative.Result {
	t.Helper()
	res := make([]speculative.Result, len(reqs))
	for ev, err := range d.Stream(context.Background(), reqs) {
		require.NoError(t, err)
		r := &res[ev.Request]
		r.Add(ev)
		s := append(slices.Clone(reqs[ev.Request].Prompt), r.Tokens...)
		if ev.Finish != generation.NotFinished {
			require.Empty(t, target.History(ev.Slot), "request %d finished", ev.Request)
			if draft != nil {
				require.Empty(t, draft.History(ev.Slot), "request %d finished", ev.Request)
			}
			continue
		}
		require.Equal(t, s[:len(s)-1], target.History(ev.Slot), "request %d", ev.Request)
		if draft != nil {
			h := draft.History(ev.Slot)
			require.Less(t, len(h), len(s), "request %d", ev.Request)
			require.Equal(t, s[:len(h)], h, "request %d", ev.Request)
		}
	}
	for slot := range target.Slots() {
		require.Empty(t, target.History(slot))
	}
	if draft != nil {
		for slot := range draft.Slots() {
			require.Empty(t, draft.History(slot))
		}
	}
	return res
}

// Greedy speculative decoding with a draft model gives the tokens of plain
// greedy decoding, for many prompts, draft lengths and schedules, with and
// without history-dependent processors, in batches whose rows accept
// different numbers of candidates.
func TestDraftGreedyEqualsPlain(t *testing.T) {
	procs := map[string]func(*genconfig.Config){
		"plain": nil,
		"penalties": func(c *genconfig.Config) {
			c.RepetitionPenalty = 1.3
			c.NoRepeatNGramSize = 3
			c.MinNewTokens = new(int)
			*c.MinNewTokens = 5
		},
	}
	for name, mod := range procs {
		for _, k := range []int{1, 2, 3, 5, 8} {
			for _, sched := range []string{genconfig.ScheduleConstant, genconfig.ScheduleHeuristic, genconfig.ScheduleHeuristicTransient} {
				t.Run(fmt.Sprintf("%s/k%d/%s", name, k, sched), func(t *testing.T) {
					cfg := config(30, mod)
					cfg.NumAssistantTokens = k
					cfg.NumAssistantTokensSchedule = sched
					cfg.AssistantConfidenceThreshold = 0
					if k == 5 {
						cfg.AssistantConfidenceThreshold = 0.4
					}
					var reqs []speculative.Request
					for _, p := range prompts(12, uint64(k)) {
						reqs = append(reqs, speculative.Request{Prompt: p, Config: cfg})
					}
					want := plain(t, bigram(0), reqs)
					target := backend.NewMemoryBackend(vocab, 3, bigram(0))
					draft := backend.NewMemoryBackend(vocab, 4, bigram(0.3))
					d, err := speculative.New(target, speculative.Options{Draft: draft})
					require.NoError(t, err)
					got := checked(t, d, target, draft, reqs)
					var st speculative.Stats
					for i := range reqs {
						require.Equal(t, want[i], got[i].Tokens, "request %d", i)
						st = st.Add(got[i].Stats)
					}
					assert.Positive(t, st.Accepted, "the draft agrees sometimes")
					assert.Less(t, st.Accepted, st.Drafted, "and not always")
				})
			}
		}
	}
}

// Greedy prompt lookup gives the tokens of plain greedy decoding.
func TestPromptLookupGreedyEqualsPlain(t *testing.T) {
	for _, n := range []int{1, 2, 4, 10} {
		for _, ngram := range []int{0, 1, 3} {
			t.Run(fmt.Sprintf("n%d/ngram%d", n, ngram), func(t *testing.T) {
				cfg := config(40, func(c *genconfig.Config) {
					c.PromptLookupNumTokens = &n
					c.MaxMatchingNGramSize = &ngram
				})
				var reqs []speculative.Request
				for _, p := range prompts(10, uint64(n*7+ngram)) {
					reqs = append(reqs, speculative.Request{Prompt: p, Config: cfg})
				}
				want := plain(t, bigram(0), reqs)
				target := backend.NewMemoryBackend(vocab, 4, bigram(0))
				d, err := speculative.New(target, speculative.Options{})
				require.NoError(t, err)
				got := checked(t, d, target, nil, reqs)
				var st speculative.Stats
				for i := range reqs {
					require.Equal(t, want[i], got[i].Tokens, "request %d", i)
					st = st.Add(got[i].Stats)
				}
				assert.Positive(t, st.Accepted, "greedy cycles are found in the text so far")
			})
		}
	}
}

// A target without backend.AllLogits is verified position by position,
// with the same tokens.
func TestWithoutAllLogits(t *testing.T) {
	n := 3
	cfg := config(25, func(c *genconfig.Config) { c.PromptLookupNumTokens = &n })
	var reqs []speculative.Request
	for _, p := range prompts(5, 9) {
		reqs = append(reqs, speculative.Request{Prompt: p, Config: cfg})
	}
	want := plain(t, bigram(0), reqs)
	d, err := speculative.New(onlyBackend{backend.NewMemoryBackend(vocab, 2, bigram(0))}, speculative.Options{})
	require.NoError(t, err)
	got, err := d.Generate(context.Background(), reqs)
	require.NoError(t, err)
	for i := range reqs {
		assert.Equal(t, want[i], got[i].Tokens)
	}
}

// onlyBackend hides every method beyond backend.Backend.
type onlyBackend struct{ backend.Backend }

func TestBadInput(t *testing.T) {
	target := backend.NewMemoryBackend(vocab, 2, bigram(0))
	_, err := speculative.New(target, speculative.Options{Draft: backend.NewMemoryBackend(vocab+1, 2, bigram(0))})
	assert.ErrorContains(t, err, "vocabulary")

	d, err := speculative.New(target, speculative.Options{})
	require.NoError(t, err)
	_, err = d.Generate(context.Background(), []speculative.Request{{Prompt: []int32{3}, Config: config(5, nil)}})
	assert.ErrorContains(t, err, "prompt_lookup_num_tokens")
	_, err = d.Generate(context.Background(), []speculative.Request{{Prompt: nil}})
	assert.ErrorIs(t, err, generation.ErrEmptyPrompt)
	_, err = d.Generate(context.Background(), []speculative.Request{{Prompt: []int32{vocab}}})
	assert.ErrorIs(t, err, backend.ErrTokenOutOfRange)
	zero := 0
	_, err = d.Generate(context.Background(), []speculative.Request{{Prompt: []int32{3},
		Config: config(5, func(c *genconfig.Config) { c.PromptLookupNumTokens = &zero })}})
	assert.ErrorContains(t, err, "prompt_lookup_num_tokens")
}

// A slot that fills up ends its request with FinishContextFull, without
// losing the tokens it made, and the speculation never overfills it.
func TestContextFull(t *testing.T) {
	n := 5
	cfg := config(100, func(c *genconfig.Config) { c.PromptLookupNumTokens = &n })
	target := backend.NewMemoryBackend(vocab, 2, bigram(0))
	target.SetCapacity(12)
	d, err := speculative.New(target, speculative.Options{})
	require.NoError(t, err)
	reqs := []speculative.Request{{Prompt: []int32{3, 4, 5}, Config: cfg}}
	got, err := d.Generate(context.Background(), reqs)
	require.NoError(t, err)
	want := plain(t, bigram(0), reqs)
	if got[0].Finish == generation.FinishEOS {
		t.Skip("the model stopped first")
	}
	assert.Equal(t, generation.FinishContextFull, got[0].Finish)
	assert.Equal(t, want[0][:len(got[0].Tokens)], got[0].Tokens)
	assert.Len(t, got[0].Tokens, 12-3+1, "the slot holds all but the last token")
}

// A step allocates nothing in steady state: a long generation allocates
// only what the amortised growth of its sequences' buffers takes (a few
// allocations per doubling), far below one allocation per step.
func TestNoAllocationPerStep(t *testing.T) {
	allocs := func(opts speculative.Options, cfg *genconfig.Config) float64 {
		target := backend.NewMemoryBackend(vocab, 2, hashModel(0))
		d, err := speculative.New(target, opts)
		require.NoError(t, err)
		reqs := []speculative.Request{{Prompt: []int32{3, 4}, Config: cfg, Seed: 1}, {Prompt: []int32{5}, Config: cfg, Seed: 2}}
		drain := func() {
			for _, err := range d.Stream(context.Background(), reqs) {
				require.NoError(t, err)
			}
		}
		drain() // buffers grow once
		return testing.AllocsPerRun(5, drain)
	}
	n := 4
	for _, sample := range []bool{false, true} {
		short := func(maxNew int) *genconfig.Config {
			return config(maxNew, func(c *genconfig.Config) {
				c.EOSTokenID = nil
				c.DoSample = sample
				c.NumAssistantTokens = 3
			})
		}
		draft := speculative.Options{Draft: backend.NewMemoryBackend(vocab, 2, hashModel(1))}
		a, b := allocs(draft, short(20)), allocs(draft, short(1000))
		t.Logf("draft model, sampling %v: %v allocations for 20 tokens, %v for 1000", sample, a, b)
		assert.Less(t, b-a, 60.0, "draft model, sampling %v: %v allocations for 20 tokens, %v for 1000", sample, a, b)
		lookup := func(maxNew int) *genconfig.Config {
			c := short(maxNew)
			c.PromptLookupNumTokens = &n
			return c
		}
		a, b = allocs(speculative.Options{}, lookup(20)), allocs(speculative.Options{}, lookup(1000))
		t.Logf("prompt lookup, sampling %v: %v allocations for 20 tokens, %v for 1000", sample, a, b)
		assert.Less(t, b-a, 60.0, "prompt lookup, sampling %v: %v allocations for 20 tokens, %v for 1000", sample, a, b)
	}
}

// hashModel is a bigram model like bigram's that allocates nothing: its
// logits are hashes of the last two tokens (and salt, a draft's noise).
func hashModel(salt uint64) backend.ModelFunc {
	row := make([]float32, vocab)
	return func(h []int32) ([]float32, error) {
		a, b := uint64(0), uint64(h[len(h)-1])
		if len(h) > 1 {
			a = uint64(h[len(h)-2])
		}
		x := a*131 + b*7 + 3
		for i := range row {
			z := x*0x9e3779b97f4a7c15 + uint64(i)*0xbf58476d1ce4e5b9
			if salt != 0 && x%3 == 0 {
				z += salt * 0x94d049bb133111eb
			}
			z ^= z >> 31
			z *= 0xd6e9a1d1c2f1f3a5
			z ^= z >> 29
			row[i] = float32(z>>40) / float32(1<<24) * 6
		}
		return row, nil
	}
}

// The heuristic schedules grow the draft length by 2 after a step whose
// candidates were all accepted; "heuristic" carries it over to the next
// call, "heuristic_transient" starts again from num_assistant_tokens,
// "constant" never changes it.
func TestSchedules(t *testing.T) {
	first := func(d *speculative.Decoder, cfg *genconfig.Config) (drafted []int) {
		for ev, err := range d.Stream(context.Background(), []speculative.Request{{Prompt: []int32{3, 4}, Config: cfg}}) {
			require.NoError(t, err)
			drafted = append(drafted, ev.Drafted)
		}
		return drafted
	}
	for _, tc := range []struct {
		schedule     string
		grows, keeps bool
	}{
		{genconfig.ScheduleConstant, false, false},
		{genconfig.ScheduleHeuristic, true, true},
		{genconfig.ScheduleHeuristicTransient, true, false},
	} {
		cfg := config(60, func(c *genconfig.Config) {
			c.EOSTokenID = nil
			c.NumAssistantTokens = 2
			c.NumAssistantTokensSchedule = tc.schedule
			c.AssistantConfidenceThreshold = 0
		})
		// The draft is the target itself: every candidate is accepted.
		d, err := speculative.New(backend.NewMemoryBackend(vocab, 1, bigram(0)),
			speculative.Options{Draft: backend.NewMemoryBackend(vocab, 1, bigram(0))})
		require.NoError(t, err)
		one := first(d, cfg)
		two := first(d, cfg)
		assert.Equal(t, 2, one[0], tc.schedule)
		if tc.grows {
			assert.Equal(t, []int{2, 4, 6}, one[:3], tc.schedule)
		} else {
			assert.Equal(t, []int{2, 2, 2}, one[:3], tc.schedule)
		}
		if tc.keeps {
			assert.Greater(t, two[0], 2, tc.schedule)
		} else {
			assert.Equal(t, 2, two[0], tc.schedule)
		}
	}
}

// Cancellation follows package backend's contract: every unfinished request
// ends with FinishCancelled and ctx.Err(), the stream yields no error, and
// no slot keeps cells.
func TestCancellation(t *testing.T) {
	n := 3
	cfg := config(50, func(c *genconfig.Config) { c.EOSTokenID = nil; c.PromptLookupNumTokens = &n })
	target := backend.NewMemoryBackend(vocab, 2, bigram(0))
	draft := backend.NewMemoryBackend(vocab, 2, bigram(0.3))
	d, err := speculative.New(target, speculative.Options{Draft: draft})
	require.NoError(t, err)
	plainCfg := config(50, func(c *genconfig.Config) { c.EOSTokenID = nil })
	reqs := []speculative.Request{{Prompt: []int32{3}, Config: cfg}, {Prompt: []int32{4, 5}, Config: plainCfg}, {Prompt: []int32{6}, Config: cfg}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	finished := map[int]generation.FinishReason{}
	events := 0
	for ev, err := range d.Stream(ctx, reqs) {
		require.NoError(t, err)
		if events++; events == 2 {
			cancel()
		}
		if ev.Finish != generation.NotFinished {
			finished[ev.Request] = ev.Finish
			assert.Equal(t, context.Canceled, ev.Err)
		}
	}
	assert.Equal(t, map[int]generation.FinishReason{0: generation.FinishCancelled, 1: generation.FinishCancelled,
		2: generation.FinishCancelled}, finished)
	for s := range 2 {
		assert.Empty(t, target.History(s))
		assert.Empty(t, draft.History(s))
	}
}
