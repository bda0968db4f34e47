package llamacpp_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/cgo"
	"github.com/llamaloop/llamaloop/internal/llamatest"
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
