package generation

import (
	"context"
	"errors"
	"iter"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/testkit/asan"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/prefixcache"
	"github.com/stretchr/testify/require"
)

// gatedBackend lets a test step the loop: each Eval waits for a value on
// gate, and the feeds of every Eval are recorded.
type gatedBackend struct {
	backend.Backend
	gate chan struct{}

	mu    sync.Mutex
	evals [][]backend.Feed
}

func (b *gatedBackend) Eval(ctx context.Context, feeds []backend.Feed) error {
	select {
	case <-b.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	rec := make([]backend.Feed, len(feeds))
	for i, f := range feeds {
		rec[i] = backend.Feed{Slot: f.Slot, Tokens: slices.Clone(f.Tokens)}
	}
	b.evals = append(b.evals, rec)
	b.mu.Unlock()
	return b.Backend.Eval(ctx, feeds)
}

// Requests submitted from many goroutines, more than there are slots, with
// prompts evaluated in chunks of 3 tokens, give exactly what each gives
// alone, and leave every slot empty.
func TestEngineEqualsAlone(t *testing.T) {
	reqs := mixedRequests()
	alone := eachAlone(t, reqs)
	for _, tc := range []struct {
		name         string
		slots, chunk int
	}{{"3 slots chunk 3", 3, 3}, {"all slots chunk 1", len(reqs), 1}, {"1 slot no chunks", 1, -1}, {"2 slots default chunk", 2, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			b := backend.NewMemoryBackend(16, tc.slots, testmodel.HashModel(16))
			e, err := NewEngine(b, nil, EngineOptions{PromptChunk: tc.chunk})
			require.NoError(t, err)
			got, err := e.Generate(context.Background(), reqs)
			require.NoError(t, err)
			require.NoError(t, e.Close())
			require.Equal(t, alone, got)
			requireEmptySlots(t, b)
			st := e.Stats()
			require.Equal(t, uint64(len(reqs)), st.Submitted)
			require.Equal(t, uint64(len(reqs)), st.Finished)
			require.Zero(t, st.Active)
			require.Zero(t, st.Waiting)
			n := 0
			for _, r := range alone {
				n += len(r.Tokens)
			}
			require.Equal(t, uint64(n), st.GeneratedTokens)
		})
	}
}

// A request submitted while another generates joins the running batch: its
// prompt is evaluated in chunks in the same Evals as the other request's
// tokens, and neither waits for the other to finish.
func TestEngineJoinsRunningBatch(t *testing.T) {
	mem := backend.NewMemoryBackend(16, 2, testmodel.HashModel(16))
	b := &gatedBackend{Backend: mem, gate: make(chan struct{})}
	e, err := NewEngine(b, nil, EngineOptions{PromptChunk: 4})
	require.NoError(t, err)
	defer e.Close()

	reqA := Request{Prompt: []int32{3}, Config: greedyConfig(20)}
	reqB := Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, Config: samplingConfig(5), Seed: 3}
	a, err := e.Submit(context.Background(), reqA)
	require.NoError(t, err)
	nextA, stopA := iter.Pull(a.Events())
	defer stopA()
	var tokensA []int32
	for range 3 {
		b.gate <- struct{}{}
		ev, ok := nextA()
		require.True(t, ok)
		tokensA = append(tokensA, ev.Token)
	}
	task, err := e.Submit(context.Background(), reqB)
	require.NoError(t, err)
	go func() {
		for {
			select {
			case b.gate <- struct{}{}:
			case <-e.done:
				return
			}
		}
	}()
	gotB := task.Result()
	for ev, ok := nextA(); ok; ev, ok = nextA() {
		if ev.Token >= 0 {
			tokensA = append(tokensA, ev.Token)
		}
	}
	want := generate(t, backend.NewMemoryBackend(16, 1, testmodel.HashModel(16)), nil, []Request{reqA, reqB})
	require.Equal(t, want[0].Tokens, tokensA)
	require.Equal(t, want[1], gotB)

	// B's prompt went in chunks of 4, 4 and 2 tokens, each beside one
	// token of A, and B's first token came while A was still running.
	b.mu.Lock()
	defer b.mu.Unlock()
	slotA := b.evals[0][0].Slot
	var chunks []int
	lastB := -1
	for i, feeds := range b.evals {
		for _, f := range feeds {
			if f.Slot == slotA {
				continue
			}
			if len(chunks) < 3 {
				require.Len(t, feeds, 2, "eval %d: a prompt chunk is evaluated with A's token", i)
				chunks = append(chunks, len(f.Tokens))
			}
			lastB = i
		}
	}
	require.Equal(t, []int{4, 4, 2}, chunks)
	require.Len(t, b.evals[lastB], 2, "B's last token came while A was running")
}

// Cancelling one request ends it at once and frees its slot; the others go
// on, unchanged, and Close cancels the requests still waiting.
func TestEngineCancel(t *testing.T) {
	mem := backend.NewMemoryBackend(16, 1, testmodel.HashModel(16))
	b := &gatedBackend{Backend: mem, gate: make(chan struct{})}
	e, err := NewEngine(b, nil, EngineOptions{})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	a, err := e.Submit(ctx, Request{Prompt: []int32{3}, Config: greedyConfig(50)})
	require.NoError(t, err)
	next, stop := iter.Pull(a.Events())
	defer stop()
	b.gate <- struct{}{}
	ev, ok := next()
	require.True(t, ok)
	require.Equal(t, NotFinished, ev.Finish)

	// B waits for A's slot; C waits behind it and is never run.
	reqB := Request{Prompt: []int32{5, 6}, Config: greedyConfig(4)}
	taskB, err := e.Submit(context.Background(), reqB)
	require.NoError(t, err)
	taskC, err := e.Submit(context.Background(), Request{Prompt: []int32{5}, Config: greedyConfig(400)})
	require.NoError(t, err)

	cancel()
	for ev, ok = next(); ok && ev.Finish == NotFinished; ev, ok = next() {
	}
	require.Equal(t, FinishCancelled, ev.Finish)
	require.ErrorIs(t, ev.Err, context.Canceled)

	// The step under way ends, then B's prompt and 3 more tokens.
	for range 2 + 3 {
		b.gate <- struct{}{}
	}
	resB := taskB.Result()
	require.Equal(t, generate(t, backend.NewMemoryBackend(16, 1, testmodel.HashModel(16)), nil, []Request{reqB})[0], resB)

	b.gate <- struct{}{} // C's prompt
	require.NoError(t, e.Close())
	resC := taskC.Result()
	require.Equal(t, FinishCancelled, resC.Finish)
	requireEmptySlots(t, mem)

	_, err = e.Submit(context.Background(), reqB)
	require.ErrorIs(t, err, ErrClosed)
}

// Invalid requests and prompts too long for a slot are refused by Submit,
// and nothing runs.
func TestEngineSubmitErrors(t *testing.T) {
	mem := backend.NewMemoryBackend(16, 2, testmodel.HashModel(16))
	mem.SetCapacity(8)
	e, err := NewEngine(mem, nil, EngineOptions{})
	require.NoError(t, err)
	defer e.Close()
	_, err = e.Submit(context.Background(), Request{Prompt: make([]int32, 9), Config: greedyConfig(4)})
	require.ErrorIs(t, err, ErrPromptTooLong)
	_, err = e.Submit(context.Background(), Request{Prompt: []int32{99}})
	require.ErrorIs(t, err, backend.ErrTokenOutOfRange)
	_, err = e.Submit(context.Background(), Request{Text: "hi"})
	require.ErrorIs(t, err, ErrNoTokenizer)
	require.Zero(t, e.Stats().Submitted)

	// A request that reaches the end of its slot ends with
	// FinishContextFull when its 8 cells hold the prompt and 3 tokens, the
	// 4th token chosen, as with Generate.
	req := Request{Prompt: []int32{1, 2, 3, 4, 5}, Config: greedyConfig(10)}
	task, err := e.Submit(context.Background(), req)
	require.NoError(t, err)
	res := task.Result()
	require.Equal(t, FinishContextFull, res.Finish)
	require.Len(t, res.Tokens, 4)
	alone := backend.NewMemoryBackend(16, 1, testmodel.HashModel(16))
	alone.SetCapacity(8)
	require.Equal(t, generate(t, alone, nil, []Request{req})[0], res)
}

// failingBackend fails its Eval number fail (counting from 1).
type failingBackend struct {
	backend.Backend
	calls, fail int
}

var errDevice = errors.New("device lost")

func (b *failingBackend) Eval(ctx context.Context, feeds []backend.Feed) error {
	b.calls++
	if b.calls == b.fail {
		return errDevice
	}
	return b.Backend.Eval(ctx, feeds)
}

// A backend failure ends the requests of the batch with FinishError and the
// backend's error, clears their slots, and the engine goes on with the
// requests that come next.
func TestEngineBackendFailure(t *testing.T) {
	mem := backend.NewMemoryBackend(16, 2, testmodel.HashModel(16))
	e, err := NewEngine(&failingBackend{Backend: mem, fail: 3}, nil, EngineOptions{})
	require.NoError(t, err)
	defer e.Close()
	a, err := e.Submit(context.Background(), Request{Prompt: []int32{3}, Config: greedyConfig(10)})
	require.NoError(t, err)
	res := a.Result()
	require.Equal(t, FinishError, res.Finish)
	require.ErrorIs(t, res.Err, errDevice)
	require.Len(t, res.Tokens, 2, "two evals succeeded")
	requireEmptySlots(t, mem)

	req := Request{Prompt: []int32{4, 5}, Config: greedyConfig(6)}
	b, err := e.Submit(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, generate(t, backend.NewMemoryBackend(16, 1, testmodel.HashModel(16)), nil, []Request{req})[0], b.Result())
	require.Zero(t, e.Stats().Active)
}

// A running request costs no allocation per token: its events pass from the
// loop to the consumer in swapped buffers, which only grow now and then
// (when the consumer falls behind further than before, and as the
// request's own token and text buffers double), far fewer times than
// there are tokens.
func TestEngineSteadyStateAllocations(t *testing.T) {
	if asan.Enabled {
		t.Skip("allocation counts are not meaningful under -asan")
	}
	b := backend.NewMemoryBackend(64, 1, cheapModel(64))
	e, err := NewEngine(b, nil, EngineOptions{})
	require.NoError(t, err)
	defer e.Close()
	req := Request{Prompt: []int32{1}, Config: samplingConfig(6000), Logprobs: true, TopLogprobs: 2}
	task, err := e.Submit(context.Background(), req)
	require.NoError(t, err)
	var ms runtime.MemStats
	var start uint64
	n := 0
	for range task.Events() {
		switch n++; n {
		case 2000:
			runtime.ReadMemStats(&ms)
			start = ms.Mallocs
		case 5000:
			runtime.ReadMemStats(&ms)
			require.LessOrEqual(t, ms.Mallocs-start, uint64(200), "allocations in 3000 tokens")
		}
	}
	require.Equal(t, 6000, n)
}

// Over a prefix cache, a prompt's first chunk takes what the cache holds
// without counting it against the chunk: the second turn of a chat costs
// its new tokens only, however small the chunk, and gives what it gives
// alone.
func TestEngineOverPrefixCache(t *testing.T) {
	mem := backend.NewMemoryBackend(16, 2, testmodel.HashModel(16))
	pc, err := prefixcache.New(mem, prefixcache.Options{CacheSlots: 1})
	require.NoError(t, err)
	e, err := NewEngine(pc, nil, EngineOptions{PromptChunk: 4})
	require.NoError(t, err)
	defer e.Close()

	first := Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 1, 2, 3, 4, 5}, Config: greedyConfig(5)}
	a, err := e.Submit(context.Background(), first)
	require.NoError(t, err)
	resA := a.Result()
	require.Len(t, resA.Tokens, 5)

	second := Request{Prompt: append(append(slices.Clone(first.Prompt), resA.Tokens...), 7, 8, 9), Config: greedyConfig(5)}
	mem.ResetStats()
	b, err := e.Submit(context.Background(), second)
	require.NoError(t, err)
	resB := b.Result()
	require.Equal(t, generate(t, backend.NewMemoryBackend(16, 1, testmodel.HashModel(16)), nil, []Request{second})[0], resB)
	// The cache held the first prompt and 4 of its tokens (the 5th was
	// chosen, not fed): 4 prompt tokens and 4 of the 5 new ones remain.
	require.Equal(t, 4+4, mem.Stats().Tokens)
	require.Equal(t, int64(1), pc.Stats().Hits)
}

// Generate runs the requests Submit accepts and reports the ones it refuses,
// by index, beside the others' results.
func TestEngineGenerateReportsRefusals(t *testing.T) {
	mem := backend.NewMemoryBackend(16, 2, testmodel.HashModel(16))
	mem.SetCapacity(8)
	e, err := NewEngine(mem, nil, EngineOptions{})
	require.NoError(t, err)
	defer e.Close()
	ok := Request{Prompt: []int32{1, 2}, Config: greedyConfig(3)}
	got, err := e.Generate(context.Background(), []Request{ok, {Prompt: make([]int32, 9), Config: greedyConfig(4)}})
	require.ErrorIs(t, err, ErrPromptTooLong)
	require.ErrorContains(t, err, "request 1: ")
	alone := backend.NewMemoryBackend(16, 1, testmodel.HashModel(16))
	require.Equal(t, generate(t, alone, nil, []Request{ok})[0], got[0])
	require.Zero(t, got[1].Tokens)
}
