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
	"github.com/llamaloop/llamaloop/prefixcache"
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

// plain decodes reqs with a generator without speculation, the reference:
// prompt lookup is taken out of their configs.
func plain(t *testing.T, model backend.ModelFunc, reqs []generation.Request) []generation.Result {
	t.Helper()
	g := generation.NewGenerator(backend.NewMemoryBackend(vocab, 4, model), nil)
	greqs := slices.Clone(reqs)
	for i := range greqs {
		if c := greqs[i].Config; c != nil && c.PromptLookup() {
			greqs[i].Config = c.Clone()
			greqs[i].Config.PromptLookupNumTokens = nil
		}
	}
	res, err := g.Generate(context.Background(), greqs)
	require.NoError(t, err)
	return res
}

func tokens(res []generation.Result) [][]int32 {
	out := make([][]int32, len(res))
	for i, r := range res {
		out[i] = r.Tokens
	}
	return out
}

// newGen returns a generator over target with draft (nil: none).
func newGen(t *testing.T, target backend.Backend, draft backend.Backend) *generation.Generator {
	t.Helper()
	g, err := generation.New(target, nil, generation.Options{Draft: draft})
	require.NoError(t, err)
	return g
}

// checked runs the generator's stream and checks the KV bookkeeping at the
// first event of every step: the target's slot holds exactly the sequence
// S after the previous step and the step's candidates (rejected candidates
// left no cells), the draft's slot a prefix of S, and every slot is empty
// at the end.
func checked(t *testing.T, g *generation.Generator, target, draft *backend.MemoryBackend, reqs []generation.Request) []generation.Result {
	t.Helper()
	res := make([]generation.Result, len(reqs))
	stepEnded := make([]bool, len(reqs))
	for ev, err := range g.Stream(context.Background(), reqs) {
		require.NoError(t, err)
		r := &res[ev.Request]
		if ev.Token >= 0 && stepEnded[ev.Request] {
			s := append(slices.Clone(reqs[ev.Request].Prompt), r.Tokens...)
			require.True(t, holds(target, s, len(s)+ev.Drafted), "request %d: no target slot holds its sequence and its %d candidates", ev.Request, ev.Drafted)
			if draft != nil {
				require.True(t, holdsPrefix(draft, s, len(s)+ev.Drafted), "request %d: no draft slot holds a prefix of its sequence", ev.Request)
			}
		}
		stepEnded[ev.Request] = !ev.Accepted
		if ev.Token >= 0 {
			r.Tokens = append(r.Tokens, ev.Token)
		}
		r.Speculation.Add(ev)
		if ev.Finish != generation.NotFinished {
			r.Finish, r.Err = ev.Finish, ev.Err
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

// holds reports whether a slot of b holds n tokens that start with s.
func holds(b *backend.MemoryBackend, s []int32, n int) bool {
	for slot := range b.Slots() {
		if h := b.History(slot); len(h) == n && slices.Equal(h[:len(s)-1], s[:len(s)-1]) {
			return true
		}
	}
	return false
}

// holdsPrefix reports whether a slot of b holds a history that starts as s
// does and is shorter than n: s and the step's candidates but the last.
func holdsPrefix(b *backend.MemoryBackend, s []int32, n int) bool {
	for slot := range b.Slots() {
		if h := b.History(slot); len(h) > 0 && len(h) < n && slices.Equal(h[:min(len(h), len(s))], s[:min(len(h), len(s))]) {
			return true
		}
	}
	return false
}

func stats(res []generation.Result) generation.SpeculationStats {
	var st generation.SpeculationStats
	for _, r := range res {
		st.Steps += r.Speculation.Steps
		st.Drafted += r.Speculation.Drafted
		st.Accepted += r.Speculation.Accepted
	}
	return st
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
					var reqs []generation.Request
					for _, p := range prompts(12, uint64(k)) {
						reqs = append(reqs, generation.Request{Prompt: p, Config: cfg})
					}
					want := tokens(plain(t, bigram(0), reqs))
					target := backend.NewMemoryBackend(vocab, 3, bigram(0))
					draft := backend.NewMemoryBackend(vocab, 4, bigram(0.3))
					got := checked(t, newGen(t, target, draft), target, draft, reqs)
					assert.Equal(t, want, tokens(got))
					st := stats(got)
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
				var reqs []generation.Request
				for _, p := range prompts(10, uint64(n*7+ngram)) {
					reqs = append(reqs, generation.Request{Prompt: p, Config: cfg})
				}
				want := tokens(plain(t, bigram(0), reqs))
				target := backend.NewMemoryBackend(vocab, 4, bigram(0))
				got := checked(t, newGen(t, target, nil), target, nil, reqs)
				assert.Equal(t, want, tokens(got))
				st := stats(got)
				assert.Positive(t, st.Accepted, "greedy cycles are found in the text so far")
			})
		}
	}
}

// Speculation is refused, with its reason, where it cannot run: on a
// backend without backend.AllLogits, with a draft model of another
// vocabulary or fewer slots, with prompt embeddings; a request without
// speculation runs beside it.
func TestRefusals(t *testing.T) {
	n := 3
	cfg := config(25, func(c *genconfig.Config) { c.PromptLookupNumTokens = &n })
	g := generation.NewGenerator(onlyBackend{backend.NewMemoryBackend(vocab, 2, bigram(0))}, nil)
	_, err := g.Generate(context.Background(), []generation.Request{{Prompt: []int32{3}, Config: cfg}})
	assert.ErrorContains(t, err, "backend.AllLogits")
	res, err := g.Generate(context.Background(), []generation.Request{{Prompt: []int32{3}, Config: config(5, nil)}})
	require.NoError(t, err)
	assert.Len(t, res[0].Tokens, 5)

	target := backend.NewMemoryBackend(vocab, 2, bigram(0))
	_, err = generation.New(target, nil, generation.Options{Draft: backend.NewMemoryBackend(vocab+1, 2, bigram(0))})
	assert.ErrorContains(t, err, "vocabulary")
	_, err = generation.New(target, nil, generation.Options{Draft: backend.NewMemoryBackend(vocab, 1, bigram(0))})
	assert.ErrorContains(t, err, "slots")
	zero := 0
	_, err = newGen(t, target, nil).Generate(context.Background(), []generation.Request{{Prompt: []int32{3},
		Config: config(5, func(c *genconfig.Config) { c.PromptLookupNumTokens = &zero })}})
	assert.ErrorContains(t, err, "prompt_lookup_num_tokens")
}

// onlyBackend hides every method beyond backend.Backend.
type onlyBackend struct{ backend.Backend }

// A slot that fills up ends its request with FinishContextFull, without
// losing the tokens it made, and the speculation never overfills it.
func TestContextFull(t *testing.T) {
	n := 5
	cfg := config(100, func(c *genconfig.Config) { c.PromptLookupNumTokens = &n })
	target := backend.NewMemoryBackend(vocab, 2, bigram(0))
	target.SetCapacity(12)
	reqs := []generation.Request{{Prompt: []int32{3, 4, 5}, Config: cfg}}
	got, err := newGen(t, target, nil).Generate(context.Background(), reqs)
	require.NoError(t, err)
	want := tokens(plain(t, bigram(0), reqs))
	if got[0].Finish == generation.FinishEOS {
		t.Skip("the model stopped first")
	}
	assert.Equal(t, generation.FinishContextFull, got[0].Finish)
	assert.Equal(t, want[0][:len(got[0].Tokens)], got[0].Tokens)
	assert.Len(t, got[0].Tokens, 12-3+1, "the slot holds all but the last token")
	t.Logf("%+v %v", got[0].Speculation, got[0].Tokens)
}

// A step allocates nothing in steady state: a long generation allocates
// only what the amortised growth of its sequences' buffers takes (a few
// allocations per doubling), far below one allocation per step.
func TestNoAllocationPerStep(t *testing.T) {
	allocs := func(draft backend.Backend, cfg *genconfig.Config) float64 {
		d := newGen(t, backend.NewMemoryBackend(vocab, 2, hashModel(0)), draft)
		reqs := []generation.Request{{Prompt: []int32{3, 4}, Config: cfg, Seed: 1}, {Prompt: []int32{5}, Config: cfg, Seed: 2}}
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
		draft := backend.NewMemoryBackend(vocab, 2, hashModel(1))
		a, b := allocs(draft, short(20)), allocs(draft, short(1000))
		t.Logf("draft model, sampling %v: %v allocations for 20 tokens, %v for 1000", sample, a, b)
		assert.Less(t, b-a, 60.0, "draft model, sampling %v: %v allocations for 20 tokens, %v for 1000", sample, a, b)
		lookup := func(maxNew int) *genconfig.Config {
			c := short(maxNew)
			c.PromptLookupNumTokens = &n
			return c
		}
		a, b = allocs(nil, lookup(20)), allocs(nil, lookup(1000))
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
	first := func(d *generation.Generator, cfg *genconfig.Config) (drafted []int) {
		for ev, err := range d.Stream(context.Background(), []generation.Request{{Prompt: []int32{3, 4}, Config: cfg}}) {
			require.NoError(t, err)
			if !ev.Accepted && ev.Drafted > 0 {
				drafted = append(drafted, ev.Drafted) // a verification's last token
			}
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
		d := newGen(t, backend.NewMemoryBackend(vocab, 1, bigram(0)), backend.NewMemoryBackend(vocab, 1, bigram(0)))
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
	d := newGen(t, target, draft)
	plainCfg := config(50, func(c *genconfig.Config) { c.EOSTokenID = nil })
	reqs := []generation.Request{{Prompt: []int32{3}, Config: cfg}, {Prompt: []int32{4, 5}, Config: plainCfg}, {Prompt: []int32{6}, Config: cfg}}
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

// Over a prefix cache (prefixcache implements backend.AllLogits), requests
// that speculate and share prompts, one-token prompts among them, reuse
// the cached prefixes and give the plain loop's tokens, with a draft model
// and with prompt lookup.
func TestOverPrefixCache(t *testing.T) {
	n := 3
	for _, lookup := range []bool{false, true} {
		cfg := config(30, func(c *genconfig.Config) {
			c.NumAssistantTokens = 4
			if lookup {
				c.PromptLookupNumTokens = &n
			}
		})
		var reqs []generation.Request
		for _, p := range [][]int32{{3, 4, 5, 6}, {3, 4, 5, 6}, {7}, {7}, {3, 4, 5, 6, 8}} {
			reqs = append(reqs, generation.Request{Prompt: p, Config: cfg})
		}
		want := tokens(plain(t, bigram(0), reqs))
		mem := backend.NewMemoryBackend(vocab, 3, bigram(0))
		pc, err := prefixcache.New(mem, prefixcache.Options{CacheSlots: 2})
		require.NoError(t, err)
		var draft backend.Backend
		if !lookup {
			draft = backend.NewMemoryBackend(vocab, 1, bigram(0.3))
		}
		gen := newGen(t, pc, draft)
		var got [][]int32
		for _, r := range reqs { // one at a time: each finds the one before in the cache
			res, err := gen.Generate(context.Background(), []generation.Request{r})
			require.NoError(t, err)
			got = append(got, res[0].Tokens)
			assert.Positive(t, res[0].Speculation.Drafted, "lookup %v", lookup)
		}
		assert.Equal(t, want, got, "lookup %v", lookup)
		assert.Positive(t, pc.Stats().Hits, "lookup %v", lookup)
	}
}
