package prefixcache_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/llamaloop/llamaloop/prefixcache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const vocab = 64

func config(kind string, maxNew int) (*genconfig.Config, *mirostat.Config) {
	c := genconfig.Default()
	c.MaxNewTokens = &maxNew
	switch kind {
	case "sample":
		c.DoSample, c.TopK, c.RepetitionPenalty = true, 0, 1.3
	case "mirostat":
		return c, &mirostat.Config{Version: mirostat.V2, Tau: 3, Eta: 0.1}
	case "greedy":
		c.NoRepeatNGramSize = 2
	}
	return c, nil
}

func toks(from, n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32((from + 7*i) % vocab)
	}
	return t
}

// A chat of four turns, two conversations at a time that share a system
// prompt, gives through the cache exactly the tokens it gives without it;
// each turn after the first evaluates only its new tokens, whether the
// cache has slots of its own or keeps the finished turns in place.
func TestChatUnchanged(t *testing.T) {
	for _, tc := range []struct {
		kind       string
		cacheSlots int
	}{{"greedy", 2}, {"sample", 2}, {"mirostat", 2}, {"greedy", 0}, {"sample", 0}, {"mirostat", 0}} {
		kind := tc.kind
		t.Run(fmt.Sprintf("%s, %d cache slots", kind, tc.cacheSlots), func(t *testing.T) {
			plain := backend.NewMemoryBackend(vocab, 2, testmodel.HashModel(vocab))
			under := backend.NewMemoryBackend(vocab, 2+tc.cacheSlots, testmodel.HashModel(vocab))
			pc, err := prefixcache.New(under, prefixcache.Options{CacheSlots: tc.cacheSlots})
			require.NoError(t, err)
			require.Equal(t, 2, pc.Slots())
			genPlain := generation.NewGenerator(plain, nil)
			genCached := generation.NewGenerator(pc, nil)
			cfg, miro := config(kind, 6)

			system := toks(3, 40)
			convs := [][]int32{slices.Clone(system), slices.Clone(system)}
			for turn := range 4 {
				reqs := make([]generation.Request, len(convs))
				for i := range convs {
					convs[i] = append(convs[i], toks(11*turn+5*i+1, 5+turn)...) // the user's turn
					reqs[i] = generation.Request{Prompt: convs[i], Config: cfg, Mirostat: miro, Seed: uint64(10*turn + i)}
				}
				plain.ResetStats()
				under.ResetStats()
				saved := pc.Stats().TokensSaved
				want, err := genPlain.Generate(context.Background(), reqs)
				require.NoError(t, err)
				got, err := genCached.Generate(context.Background(), reqs)
				require.NoError(t, err)
				fed := 0
				for i := range reqs {
					require.Equal(t, want[i].Tokens, got[i].Tokens, "turn %d, conversation %d", turn, i)
					require.Equal(t, generation.FinishLength, got[i].Finish)
					fed += len(got[i].Tokens) - 1 // every token but the last is fed back
				}
				// Both conversations of turn 0 start in one Eval, with
				// nothing to share yet.
				newTokens := 0
				for i := range reqs {
					if turn == 0 {
						newTokens += len(convs[i])
					} else {
						newTokens += 5 + turn + 1 // the user's turn and the reply's last token
					}
				}
				assert.Equal(t, newTokens+fed, under.Stats().Tokens, "turn %d: tokens evaluated through the cache", turn)
				assert.Equal(t, plain.Stats().Tokens, under.Stats().Tokens+int(pc.Stats().TokensSaved-saved), "turn %d", turn)
				for i := range convs {
					convs[i] = append(convs[i], got[i].Tokens...)
				}
			}
		})
	}
}

// A prompt that a cached sequence holds whole still has its last token
// evaluated, for its logits.
func TestFullyCachedPrompt(t *testing.T) {
	under := backend.NewMemoryBackend(vocab, 2, testmodel.HashModel(vocab))
	pc, err := prefixcache.New(under, prefixcache.Options{CacheSlots: 1})
	require.NoError(t, err)
	ctx := context.Background()
	p := toks(1, 12)
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: p}}))
	first := slices.Clone(pc.Logits(0))
	require.NoError(t, pc.Clear(0))
	under.ResetStats()
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: p}}))
	assert.Equal(t, 1, under.Stats().Tokens)
	assert.Equal(t, first, pc.Logits(0))
	st := pc.Stats()
	assert.Equal(t, prefixcache.Stats{Lookups: 2, Hits: 1, PromptTokens: 24, TokensSaved: 11, Kept: 1}, st)
	// The slot took the entry's underlying slot over: the entry is gone
	// until the slot is cleared again.
	require.NoError(t, pc.Clear(0))
	assert.EqualValues(t, 1, pc.Stats().Entries)
	assert.EqualValues(t, 12, pc.Stats().Cells)
}

// Entries leave least recently used first, under the cell budget and when
// the cache slots run out; an entry that is a prefix of a newer one is
// dropped, and a history that an entry holds is not kept twice.
func TestEviction(t *testing.T) {
	ctx := context.Background()
	under := backend.NewMemoryBackend(vocab, 4, testmodel.HashModel(vocab))
	pc, err := prefixcache.New(under, prefixcache.Options{CacheSlots: 3, MaxCells: 12})
	require.NoError(t, err)
	run := func(p []int32) {
		t.Helper()
		require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: p}}))
		require.NoError(t, pc.Clear(0))
	}
	held := func(p []int32) bool {
		slot, n, _ := pc.Lookup(p, nil)
		if n == len(p) {
			assert.Equal(t, p, under.History(slot)[:n], "the entry's slot holds its tokens")
		}
		return n == len(p)
	}
	a, b, c, d := []int32{1, 2, 3, 4}, []int32{5, 6, 7, 8, 9}, []int32{10, 11, 12}, []int32{13, 14, 15}
	run(a)
	run(b)
	assert.True(t, held(a) && held(b))
	run(c) // 4+5+3 = 12 cells: all fit
	assert.True(t, held(a) && held(b) && held(c))
	run(d) // a, the least recently used, makes room
	assert.False(t, held(a))
	assert.True(t, held(b) && held(c) && held(d))
	assert.EqualValues(t, 1, pc.Stats().Evictions)

	// A partial hit on b makes it recently used; the next entry evicts c.
	run([]int32{5, 6, 30})
	assert.True(t, held(b))
	assert.False(t, held(c), "c was the least recently used")
	assert.True(t, held([]int32{5, 6, 30}))

	// An entry that extends another replaces it; a prefix of an entry is
	// not kept.
	run([]int32{13, 14, 15, 16, 17})
	assert.True(t, held([]int32{13, 14, 15, 16, 17}))
	before := pc.Stats()
	run([]int32{13, 14, 15, 16})
	after := pc.Stats()
	assert.Equal(t, before.Entries, after.Entries)
	assert.Equal(t, before.Kept, after.Kept)

	// A history longer than the budget is not kept.
	run(toks(2, 13))
	_, n, _ := pc.Lookup(toks(2, 13), nil)
	assert.Equal(t, 0, n)
	assert.LessOrEqual(t, pc.Stats().Cells, int64(12))
}

// A request copies a prefix from a slot that is still running.
func TestLiveSource(t *testing.T) {
	ctx := context.Background()
	under := backend.NewMemoryBackend(vocab, 3, testmodel.HashModel(vocab))
	pc, err := prefixcache.New(under, prefixcache.Options{CacheSlots: 1})
	require.NoError(t, err)
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: toks(1, 10)}}))
	under.ResetStats()
	p := append(toks(1, 6), 40, 41)
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: []int32{9}}, {Slot: 1, Tokens: p}}))
	assert.Equal(t, 3, under.Stats().Tokens, "one token for slot 0, two for slot 1")
	ref := backend.NewMemoryBackend(vocab, 1, testmodel.HashModel(vocab))
	require.NoError(t, ref.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: p}}))
	assert.Equal(t, ref.Logits(0), pc.Logits(1))
	assert.EqualValues(t, 6, pc.Stats().TokensSaved)
}

// failing fails every Eval with backend.ErrContextFull once armed.
type failing struct {
	*backend.MemoryBackend
	fail bool
}

func (f *failing) Eval(ctx context.Context, feeds []backend.Feed) error {
	if f.fail {
		return fmt.Errorf("test: %w", backend.ErrContextFull)
	}
	return f.MemoryBackend.Eval(ctx, feeds)
}

// A slot whose Eval failed is not kept, and a full context empties the
// cache so that the next attempt has room.
func TestFailedEval(t *testing.T) {
	ctx := context.Background()
	f := &failing{MemoryBackend: backend.NewMemoryBackend(vocab, 3, testmodel.HashModel(vocab))}
	pc, err := prefixcache.New(f, prefixcache.Options{CacheSlots: 2})
	require.NoError(t, err)
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: toks(1, 5)}}))
	require.NoError(t, pc.Clear(0))
	require.EqualValues(t, 1, pc.Stats().Entries)
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: toks(20, 5)}}))
	f.fail = true
	err = pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: []int32{3}}})
	require.ErrorIs(t, err, backend.ErrContextFull)
	assert.EqualValues(t, 0, pc.Stats().Entries, "a full context drops the cache")
	require.NoError(t, pc.Clear(0))
	assert.EqualValues(t, 0, pc.Stats().Entries, "an undefined history is not kept")
	f.fail = false
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: toks(1, 5)}}))
	assert.EqualValues(t, 0, pc.Stats().Hits)

	_, err = prefixcache.New(f, prefixcache.Options{CacheSlots: 3})
	require.ErrorContains(t, err, "CacheSlots 3")
	_, err = prefixcache.New(f, prefixcache.Options{CacheSlots: -1})
	require.ErrorContains(t, err, "CacheSlots -1")
	require.Error(t, pc.Eval(ctx, []backend.Feed{{Slot: 1, Tokens: []int32{1}}}))
	require.Error(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: nil}}))
	require.Error(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: []int32{1}}, {Slot: 0, Tokens: []int32{2}}}))
}

// Adopt makes an entry of a state written into its slot from outside, and
// leaves nothing behind when writing fails.
func TestAdopt(t *testing.T) {
	ctx := context.Background()
	under := backend.NewMemoryBackend(vocab, 2, testmodel.HashModel(vocab))
	pc, err := prefixcache.New(under, prefixcache.Options{CacheSlots: 1})
	require.NoError(t, err)
	p := toks(4, 9)
	err = pc.Adopt(p, func(slot int) error {
		require.NoError(t, under.Eval(ctx, []backend.Feed{{Slot: slot, Tokens: p[:3]}}))
		return fmt.Errorf("test: disk gone")
	})
	require.ErrorContains(t, err, "disk gone")
	assert.Empty(t, under.History(1), "the half-written slot was cleared")
	assert.EqualValues(t, 0, pc.Stats().Entries)

	require.NoError(t, pc.Adopt(p, func(slot int) error {
		return under.Eval(ctx, []backend.Feed{{Slot: slot, Tokens: p}})
	}))
	slot, n, held := pc.Lookup(append(slices.Clone(p), 1), nil)
	assert.Equal(t, 1, slot)
	assert.Equal(t, len(p), n)
	assert.Equal(t, len(p), held)
	under.ResetStats()
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: append(slices.Clone(p), 1, 2)}}))
	assert.Equal(t, 2, under.Stats().Tokens)
}

// A replay of 1000 chat requests whose conversations open with one of a
// few system prompts: the tokens are those of the plain backend, and the
// cache's accounting is exact (tokens evaluated plus tokens saved equal the
// plain backend's tokens). The hit rate and the tokens saved are logged
// (README, "Prefix reuse").
func TestReplay1000(t *testing.T) {
	for _, slots := range []int{0, 8, 32} {
		t.Run(fmt.Sprintf("cache slots %d", slots), func(t *testing.T) { replay(t, slots) })
	}
}

func replay(t *testing.T, slots int) {
	const (
		requests  = 1000
		convCount = 120
		parallel  = 4
	)
	rng := rand.New(rand.NewPCG(1, 2))
	systems := make([][]int32, 6)
	for i := range systems {
		systems[i] = toks(1+i, 150+20*i)
	}
	convs := make([][]int32, convCount)
	for i := range convs {
		convs[i] = slices.Clone(systems[rng.IntN(len(systems))])
	}
	plain := backend.NewMemoryBackend(vocab, parallel, testmodel.HashModel(vocab))
	under := backend.NewMemoryBackend(vocab, parallel+slots, testmodel.HashModel(vocab))
	pc, err := prefixcache.New(under, prefixcache.Options{CacheSlots: slots, MaxCells: slots * 1024})
	require.NoError(t, err)
	genPlain := generation.NewGenerator(plain, nil)
	genCached := generation.NewGenerator(pc, nil)
	cfg, _ := config("sample", 12)

	for done := 0; done < requests; done += parallel {
		// parallel distinct conversations take a turn each; a few of them
		// have become too long and start over (a new chat).
		picked := rng.Perm(convCount)[:parallel]
		reqs := make([]generation.Request, parallel)
		for i, c := range picked {
			if len(convs[c]) > 600 {
				convs[c] = slices.Clone(systems[rng.IntN(len(systems))])
			}
			convs[c] = append(convs[c], toks(rng.IntN(vocab), 8+rng.IntN(24))...)
			reqs[i] = generation.Request{Prompt: slices.Clone(convs[c]), Config: cfg, Seed: uint64(done + i)}
		}
		want, err := genPlain.Generate(context.Background(), reqs)
		require.NoError(t, err)
		got, err := genCached.Generate(context.Background(), reqs)
		require.NoError(t, err)
		for i, c := range picked {
			require.Equal(t, want[i].Tokens, got[i].Tokens)
			convs[c] = append(convs[c], got[i].Tokens...)
		}
	}
	st := pc.Stats()
	assert.EqualValues(t, requests, st.Lookups)
	assert.Equal(t, plain.Stats().Tokens, under.Stats().Tokens+int(st.TokensSaved))
	if slots > 0 {
		assert.LessOrEqual(t, st.Cells, int64(slots*1024))
	}
	assert.Positive(t, st.Hits)
	t.Logf("%d requests, %d conversations over %d system prompts, %d cache slots: hit rate %.1f%%, prompt tokens %d, saved %d (%.1f%%), evaluated %d instead of %d tokens, %d evictions",
		st.Lookups, convCount, len(systems), slots, 100*st.HitRate(), st.PromptTokens, st.TokensSaved,
		100*float64(st.TokensSaved)/float64(st.PromptTokens), under.Stats().Tokens, plain.Stats().Tokens, st.Evictions)
}

// A warm cache allocates nothing: a request that copies a cached prefix,
// its steps, and the clear that finds its history already cached
// (AllocsPerRun runs the turn 51 times).
func TestNoAllocs(t *testing.T) {
	row := make([]float32, vocab)
	under := backend.NewMemoryBackend(vocab, 3, func([]int32) ([]float32, error) { return row, nil })
	pc, err := prefixcache.New(under, prefixcache.Options{CacheSlots: 2, MaxCells: 64})
	require.NoError(t, err)
	ctx := context.Background()
	prompt := toks(1, 20)
	feed := []backend.Feed{{Slot: 0, Tokens: prompt}}
	step := []backend.Feed{{Slot: 0, Tokens: []int32{5}}}
	turn := func() {
		if err := pc.Eval(ctx, feed); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			if err := pc.Eval(ctx, step); err != nil {
				t.Fatal(err)
			}
		}
		if err := pc.Clear(0); err != nil {
			t.Fatal(err)
		}
	}
	turn()
	turn()
	assert.Zero(t, testing.AllocsPerRun(50, turn))
	assert.EqualValues(t, 52, pc.Stats().Hits, "every turn but the first reused the prompt")
}

// A slot written by Copy is not kept until an Eval extends it; then it is.
func TestCopiedNotKept(t *testing.T) {
	ctx := context.Background()
	under := backend.NewMemoryBackend(vocab, 3, testmodel.HashModel(vocab))
	pc, err := prefixcache.New(under, prefixcache.Options{CacheSlots: 1})
	require.NoError(t, err)
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: toks(1, 6)}}))
	require.NoError(t, pc.Copy(1, 0))
	require.NoError(t, pc.Clear(1))
	assert.Zero(t, pc.Stats().Entries)
	require.NoError(t, pc.Copy(1, 0))
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 1, Tokens: []int32{3}}}))
	require.NoError(t, pc.Clear(1))
	_, n, held := pc.Lookup(append(toks(1, 6), 3), nil)
	assert.Equal(t, 7, n)
	assert.Equal(t, 7, held)
}

// With no cache slots, finished histories stay in the caller's slots: a
// feed that extends one takes its slot over, one that shares part of one
// takes it over and truncates it when no slot is free, and a feed that
// shares nothing evicts the least recently used. The tokens evaluated are
// counted.
func TestInPlace(t *testing.T) {
	ctx := context.Background()
	under := backend.NewMemoryBackend(vocab, 2, testmodel.HashModel(vocab))
	pc, err := prefixcache.New(under, prefixcache.Options{})
	require.NoError(t, err)
	require.Equal(t, 2, pc.Slots())
	a, b := toks(1, 10), toks(2, 10)
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: a}, {Slot: 1, Tokens: b}}))
	require.NoError(t, pc.Clear(0))
	require.NoError(t, pc.Clear(1))
	require.EqualValues(t, 2, pc.Stats().Entries, "both histories stay, in place")
	assert.Equal(t, pc.Room(0), under.Room(0), "an empty slot's room")

	// Slot 1 continues a: only the two new tokens are evaluated.
	under.ResetStats()
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 1, Tokens: append(slices.Clone(a), 40, 41)}}))
	assert.Equal(t, 2, under.Stats().Tokens)

	// Slot 0 shares 6 tokens of b and no slot is free: b's slot is
	// truncated and extended.
	c := append(slices.Clone(b[:6]), 50, 51, 52)
	under.ResetStats()
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: c}}))
	assert.Equal(t, 3, under.Stats().Tokens)
	assert.EqualValues(t, 0, pc.Stats().Entries)
	assert.ElementsMatch(t, [][]int32{c, append(slices.Clone(a), 40, 41)}, [][]int32{under.History(0), under.History(1)})

	// A prompt that shares nothing evicts the least recently used entry.
	require.NoError(t, pc.Clear(0))
	require.NoError(t, pc.Clear(1))
	under.ResetStats()
	d := toks(5, 7)
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: d}}))
	assert.Equal(t, 7, under.Stats().Tokens)
	st := pc.Stats()
	assert.EqualValues(t, 1, st.Evictions)
	assert.EqualValues(t, 1, st.Entries)
	_, n, _ := pc.Lookup(append(slices.Clone(a), 40, 41), nil)
	assert.Equal(t, 12, n, "the entry used last stays")
	_, n, _ = pc.Lookup(c, nil)
	assert.Zero(t, n, "the one used first is gone")
	assert.Equal(t, prefixcache.Stats{Lookups: 5, Hits: 2, PromptTokens: 10 + 10 + 12 + 9 + 7, TokensSaved: 10 + 6, Kept: 4, Evictions: 1, Entries: 1, Cells: 12}, st)
}
