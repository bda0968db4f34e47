package llamacpp_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/llamaloop/llamaloop/cgo"
	"github.com/llamaloop/llamaloop/llamacpp"
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
