package llamacpp_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/llamaloop/llamaloop/cgo"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pinned ggml's scheduler calls each backend's reset hook when it is
// freed, and llama.cpp destroys a context's backends before its scheduler.
// Close must hand the backend frees back only after llama_free returns: on
// CUDA the reset of a freed backend crashes, on the CPU it is a silent read
// of freed memory (which `make test-asan` reports). This test fails when the
// link-time wrap of ggml_backend_free is lost.
func TestCloseFreesBackendsAfterTheScheduler(t *testing.T) {
	if !cgo.WrapsBackendFree {
		t.Skip("a shared external llama.cpp: the wrap cannot reach inside it, and upstream's scheduler frees no backend late")
	}
	runtime.LockOSThread() // the deferral count is per OS thread
	defer runtime.UnlockOSThread()
	m := loadModel(t, "tiny-f32")
	for range 3 {
		ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: 64, Threads: 1})
		require.NoError(t, err)
		b := newBatch(t, 8, 1)
		_, err = b.Add(5, 0, 0, true)
		require.NoError(t, err)
		require.NoError(t, ctx.Decode(context.Background(), b))
		require.NoError(t, ctx.Close())
		require.GreaterOrEqual(t, cgo.DeferredBackendFrees(), 1,
			"llama_free freed no backend through the deferring wrap: is -Wl,--wrap=ggml_backend_free still linked?")
	}
}

// A context computes on thread pools of its thread counts, one per decode
// kind, and replaces them when the counts change; the results stay those of
// the reference whatever pool computed them.
func TestThreadPools(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	ref := loadReference(t, "tiny-f32")
	tokens := randomTokens(3, 8, m.Vocab().Size())
	want, err := ref.Logits(tokens)
	require.NoError(t, err)
	tol := llamatest.Tolerance(t, llamatest.TinyF32)

	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, Threads: 2, BatchThreads: 1})
	single, batch, retired := llamacpp.PoolThreads(ctx)
	assert.Equal(t, [3]int{2, 1, 0}, [3]int{single, batch, retired})
	b := newBatch(t, 8, 1)
	// a prompt on the batch pool, a token on the single-token pool
	got := decodeSeq(t, ctx, b, 0, 0, tokens[:3])
	got = append(got, decodeSeq(t, ctx, b, 0, 3, tokens[3:4])...)

	// Pools that computed are retired until a decode succeeds on the new ones.
	require.NoError(t, ctx.SetThreads(1, 1))
	single, batch, retired = llamacpp.PoolThreads(ctx)
	assert.Equal(t, [3]int{1, 1, 2}, [3]int{single, batch, retired})
	// Pools that never computed go at once.
	require.NoError(t, ctx.SetThreads(2, 2))
	single, batch, retired = llamacpp.PoolThreads(ctx)
	assert.Equal(t, [3]int{2, 2, 2}, [3]int{single, batch, retired})
	// The same counts keep the pools.
	require.NoError(t, ctx.SetThreads(2, 2))
	_, _, retired = llamacpp.PoolThreads(ctx)
	assert.Equal(t, 2, retired)
	got = append(got, decodeSeq(t, ctx, b, 0, 4, tokens[4:6])...)
	single, batch, retired = llamacpp.PoolThreads(ctx)
	assert.Equal(t, [3]int{2, 2, 0}, [3]int{single, batch, retired})
	th, tb := ctx.Threads()
	assert.Equal(t, [2]int{2, 2}, [2]int{th, tb})

	// A failed decode keeps the retired pools: it may have reached the old
	// pool's backend.
	require.NoError(t, ctx.SetThreads(1, 2))
	b.Clear()
	_, err = b.Add(tokens[6], 99, 0, true) // a gap in the positions
	require.NoError(t, err)
	require.Error(t, ctx.Decode(context.Background(), b))
	_, _, retired = llamacpp.PoolThreads(ctx)
	assert.Equal(t, 1, retired, "the one 2-thread pool that served both kinds")
	got = append(got, decodeSeq(t, ctx, b, 0, 6, tokens[6:8])...)
	_, _, retired = llamacpp.PoolThreads(ctx)
	assert.Zero(t, retired)

	require.LessOrEqual(t, maxDiff(t, got, want), tol)
	require.NoError(t, ctx.Close())
	require.NoError(t, ctx.Close())
}

// Workers that sleep after every graph (Poll NoPoll) or spin at a chosen
// level compute the reference's logits; a level outside ggml's range is
// refused with the bound.
func TestThreadPoolPoll(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	ref := loadReference(t, "tiny-f32")
	tokens := randomTokens(5, 6, m.Vocab().Size())
	want, err := ref.Logits(tokens)
	require.NoError(t, err)
	tol := llamatest.Tolerance(t, llamatest.TinyF32)
	for _, poll := range []int{llamacpp.NoPoll, 1, 100} {
		ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, Threads: 2, Poll: poll})
		b := newBatch(t, 8, 1)
		got := decodeSeq(t, ctx, b, 0, 0, tokens[:4])
		got = append(got, decodeSeq(t, ctx, b, 0, 4, tokens[4:5])...)
		got = append(got, decodeSeq(t, ctx, b, 0, 5, tokens[5:6])...)
		require.LessOrEqual(t, maxDiff(t, got, want), tol, "poll %d", poll)
		require.NoError(t, ctx.Close())
	}
	for _, poll := range []int{-2, 101} {
		_, err := m.NewContext(llamacpp.ContextParams{ContextSize: 256, Poll: poll})
		require.ErrorContains(t, err, fmt.Sprintf("poll %d outside [-1, 100]", poll))
	}
}

// More threads than CPUs cost one warning line on the default logger.
func TestOversubscribedThreadsWarn(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(prev)
	m := loadModel(t, "tiny-f32")
	n := runtime.NumCPU()
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, Threads: 1, BatchThreads: n})
	assert.Empty(t, buf.String(), "as many threads as CPUs")
	require.NoError(t, ctx.SetThreads(1, n+1))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 1, buf.String())
	assert.Contains(t, lines[0], "level=WARN")
	assert.Contains(t, lines[0], fmt.Sprintf("llamacpp: %d threads on %d CPUs", n+1, n))
	// still correct, only slow
	b := newBatch(t, 4, 1)
	rows := decodeSeq(t, ctx, b, 0, 0, []int32{5, 6})
	assert.Len(t, rows, 2)
}

// Two goroutines that decode on one Context at once (a misuse, which
// segfaulted inside llama.cpp) are serialised: every decode succeeds, and
// each sequence's logits are those of the same decodes made one after the
// other.
func TestConcurrentDecodeSerialised(t *testing.T) {
	for _, name := range []string{"tiny-f32", "bench-small"} {
		t.Run(name, func(t *testing.T) {
			if name == "bench-small" && testing.Short() {
				t.Skip("a 12-layer model of 134M weights")
			}
			concurrentDecodes(t, loadModel(t, name))
		})
	}
}

func concurrentDecodes(t *testing.T, m *llamacpp.Model) {
	want := func() [][]float32 {
		ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 2})
		b := newBatch(t, 64, 1)
		var last [][]float32
		for seq := range int32(2) {
			for step := range 20 {
				last = append(last, decodeSeq(t, ctx, b, seq, step, randomTokens(int(seq)*100+step, 1, m.Vocab().Size()))[0])
			}
		}
		return last
	}()
	for round := range 3 {
		ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 2})
		errs := make(chan error, 2)
		for seq := range int32(2) {
			go func() {
				b, err := llamacpp.NewBatch(8, 1)
				if err != nil {
					errs <- err
					return
				}
				defer b.Close()
				for step := range 20 {
					b.Clear()
					if _, err := b.Add(randomTokens(int(seq)*100+step, 1, m.Vocab().Size())[0], int32(step), seq, true); err != nil {
						errs <- err
						return
					}
					if err := ctx.Decode(context.Background(), b); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range 2 {
			require.NoError(t, <-errs, "round %d", round)
		}
		// Both sequences hold their 20 positions.
		for seq := range int32(2) {
			p, err := ctx.SeqPosMax(seq)
			require.NoError(t, err)
			assert.Equal(t, int32(19), p)
		}
		// The next token scores as in the serial run: the caches are right.
		b := newBatch(t, 8, 1)
		for seq := range int32(2) {
			next := randomTokens(int(seq)*100+19, 1, m.Vocab().Size())
			require.NoError(t, ctx.SeqRemove(seq, 19, -1))
			got := decodeSeq(t, ctx, b, seq, 19, next)[0]
			assert.InDelta(t, 0, maxAbs(got, want[seq*20+19]), 1e-4, "round %d seq %d", round, seq)
		}
	}
}

func maxAbs(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, float64(a[i]-b[i]), float64(b[i]-a[i]))
	}
	return d
}

// BenchmarkDecodeLock sets the cost of Decode's lock beside a decode of one
// token: run both and divide (2-vCPU AMD EPYC: see the package's report).
func BenchmarkDecodeLock(b *testing.B) {
	b.Run("decode-one-token", func(b *testing.B) {
		m := loadModel(b, "tiny-f32")
		ctx := newContext(b, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 1})
		batch := newBatch(b, 8, 1)
		pos := int32(0)
		for b.Loop() {
			if pos == 256 {
				require.NoError(b, ctx.SeqRemove(0, -1, -1))
				pos = 0
			}
			batch.Clear()
			batch.Add(5, pos, 0, true)
			if err := ctx.Decode(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
			pos++
		}
	})
	b.Run("uncontended-lock", func(b *testing.B) {
		var mu sync.Mutex
		for b.Loop() {
			mu.Lock()
			mu.Unlock() //nolint:staticcheck // the cost of the pair is measured
		}
	})
}
