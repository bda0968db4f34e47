package llamacpp_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With CPU variants in LLAMALOOP_BACKEND_DIR (make cpu-variants), the best
// one this CPU runs computes and the others are unloaded; without them the
// built-in backend does. The logits of either are checked against the
// float64 reference by TestLogitsMatchReference in the same run.
func TestCPUBackend(t *testing.T) {
	dir := os.Getenv(llamacpp.BackendDirEnv)
	variants, _ := filepath.Glob(filepath.Join(dir, "libggml-cpu-*.so"))
	cpus := 0
	for _, d := range llamacpp.Devices() {
		if d.Type == llamacpp.DeviceCPU {
			cpus++
		}
	}
	if dir == "" || len(variants) == 0 {
		assert.Equal(t, "built in", llamacpp.CPUBackend())
		assert.Equal(t, 1, cpus)
		return
	}
	t.Logf("computing with %s", llamacpp.CPUBackend())
	require.Contains(t, variants, llamacpp.CPUBackend(), "no CPU variant in %s runs here", dir)
	assert.Equal(t, 2, cpus, "the chosen variant and the built-in backend, the other variants unloaded")
}
