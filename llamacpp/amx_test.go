//go:build linux && amd64

package llamacpp_test

import (
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/cpu"
)

// amxUsable reports why AMX cannot run here, or "" when it can: the build
// must target it (cgo/amx.cpp compiles ggml's kernels only then), the CPU
// must have it, and Linux must grant the process the tile state, as ggml asks
// before it registers the AMX buffer type.
func amxUsable() string {
	if !strings.Contains(llamacpp.SystemInfo(), "AMX_INT8 = 1") {
		return "built without AMX: the flags do not target it (-march=native on a Sapphire Rapids or later Xeon, or -march=sapphirerapids, does)"
	}
	if !cpu.X86.HasAMXInt8 || !cpu.X86.HasAMXTile {
		return "built for AMX, but this CPU (or its hypervisor) does not report AMX-INT8 and AMX-TILE"
	}
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	if _, _, errno := syscall.Syscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0); errno != 0 {
		return "the CPU has AMX but Linux refuses the tile state: " + errno.Error()
	}
	return ""
}

// On an AMX machine a Q8_0 model's wide matrices go to ggml's AMX buffer, as
// in upstream's build, and its logits agree batched and token by token. The
// feed-forward width is 2048 because ggml's AMX kernels take only matrices
// whose rows are a multiple of 2048 wide (ffn_down here).
func TestAMXBuffer(t *testing.T) {
	if why := amxUsable(); why != "" {
		t.Skip(why)
	}
	spec := testmodel.TinySpec(gguf.TensorF32)
	spec.Name, spec.NFF = "llamaloop-amx", 2048
	src := filepath.Join(t.TempDir(), "amx-f32.gguf")
	require.NoError(t, testmodel.WriteRandom(src, spec))
	q8 := filepath.Join(t.TempDir(), "amx-q8_0.gguf")
	require.NoError(t, llamacpp.Quantize(src, q8, llamacpp.Q8_0, 2))

	var mu sync.Mutex
	var log strings.Builder
	llamacpp.SetLogger(slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return log.Write(p)
	}), nil)), slog.LevelInfo)
	m, err := llamacpp.LoadModel(q8, llamatest.ModelParams(t, llamacpp.ModelParams{}))
	llamacpp.SetLogger(nil, 0)
	require.NoError(t, err)
	defer m.Close()
	mu.Lock()
	assert.Contains(t, log.String(), "AMX model buffer size", "the AMX buffer type did not take the weights")
	mu.Unlock()

	tokens := randomTokens(7, 16, m.Vocab().Size())
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256})
	b := newBatch(t, 16, 1)
	batched := decodeSeq(t, ctx, b, 0, 0, tokens)
	require.NoError(t, ctx.ClearCache())
	d := 0.0
	for i, tok := range tokens {
		row := decodeSeq(t, ctx, b, 0, i, []int32{tok})[0]
		for j, v := range row {
			require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0))
			d = math.Max(d, math.Abs(float64(v-batched[i][j])))
		}
	}
	t.Logf("AMX Q8_0: largest |batch - token by token| %.3g", d)
	// The bound of TestQuantizeFileTypes; not yet measured on an AMX CPU.
	assert.Less(t, d, 0.05)
}
