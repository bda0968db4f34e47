package llamacpp_test

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/asan"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rss is the process's resident set in bytes, after the Go heap handed
// its free pages back (so that what remains is live memory, Go's or C's).
func rss(t *testing.T) int64 {
	t.Helper()
	debug.FreeOSMemory()
	return residentNow(t)
}

// residentNow is the resident set as it is, garbage included.
func residentNow(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/statm")
	require.NoError(t, err)
	pages, err := strconv.ParseInt(strings.Fields(string(data))[1], 10, 64)
	require.NoError(t, err)
	return pages * int64(os.Getpagesize())
}

func skipSoak(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" || asan.Enabled {
		t.Skip("reads /proc/self/statm; AddressSanitizer keeps freed memory in quarantine")
	}
	if testing.Short() {
		t.Skip("soak test")
	}
}

// cycle loads the tiny model into memory, decodes a few tokens in a
// context and closes both.
func cycle(t *testing.T, path string) {
	m, err := llamacpp.LoadModel(path, llamacpp.ModelParams{NoMmap: true})
	require.NoError(t, err)
	ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: 1024, Threads: 1})
	require.NoError(t, err)
	b, err := llamacpp.NewBatch(8, 1)
	require.NoError(t, err)
	for i, tok := range []int32{5, 6, 7, 8} {
		_, err = b.Add(tok, int32(i), 0, i == 3)
		require.NoError(t, err)
	}
	require.NoError(t, ctx.Decode(context.Background(), b))
	require.NoError(t, b.Close())
	require.NoError(t, ctx.Close())
	require.NoError(t, m.Close())
}

// TestSoakLoadClose: repeated LoadModel (NoMmap), NewContext, Decode and
// Close keep the resident set bounded. glibc's per-thread arenas fill up
// over the first hundred cycles or so (cgo calls run on whichever thread),
// so the bound is on the whole run: without malloc_trim the model's freed
// 8 MB buffers are kept, about 1.2 MB a cycle (240 MB over the run).
func TestSoakLoadClose(t *testing.T) {
	skipSoak(t)
	path := modelPath(t, "tiny-f32")
	for range 10 {
		cycle(t, path)
	}
	start := rss(t)
	const n = 200
	for range n {
		cycle(t, path)
	}
	grown := rss(t) - start
	t.Logf("RSS %d MB after warm-up, %+.3f MB a cycle over %d cycles", start>>20, float64(grown)/n/(1<<20), n)
	assert.Less(t, grown, int64(48<<20), "RSS must stay bounded over %d cycles", n)
	assert.Zero(t, llamacpp.NativeMemory(), "nothing accounted after every Close")
}

// TestSoakForgottenContexts: contexts that are never closed, each holding
// about 25 MB of KV cache (3.75 GB if none were freed), are freed by the
// collections that their accounted C memory starts, although the Go heap
// barely grows (without them: 2.5 GB resident after 120 contexts).
func TestSoakForgottenContexts(t *testing.T) {
	skipSoak(t)
	m := loadModel(t, "tiny-f32")
	start := residentNow(t)
	peak := start
	const n = 150
	for i := range n {
		ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: 16384, Threads: 1})
		require.NoError(t, err)
		_ = ctx // forgotten
		if i%10 == 0 {
			peak = max(peak, residentNow(t))
		}
	}
	t.Logf("%d forgotten contexts: RSS peaked %d MB above the start (%d MB of native memory accounted at the end)",
		n, (peak-start)>>20, llamacpp.NativeMemory()>>20)
	assert.Less(t, peak-start, int64(1<<30), "forgotten contexts must not pile up (%d of them hold 3.75 GB)", n)
}
