package llamacpp_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/internal/llamatest"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each file type Quantize accepts gives a model that llama.cpp describes by
// that type, holds fewer bytes, and computes a prompt in one batch as it does
// token by token: the 4-bit types run on ggml's repacked kernels, whose
// matrix-matrix and matrix-vector paths differ.
func TestQuantizeFileTypes(t *testing.T) {
	assert.Contains(t, llamacpp.SystemInfo(), "REPACK = 1", "built without -DGGML_USE_CPU_REPACK (make env prints the flags)")
	src := modelPath(t, "tiny-f32")
	f32 := loadModel(t, "tiny-f32")
	for _, c := range []struct {
		ft   llamacpp.FileType
		desc string
		// largest share of the F32 size
		size float64
	}{
		{llamacpp.F16, "F16", 0.51},
		{llamacpp.Q8_0, "Q8_0", 0.28},
		{llamacpp.Q4_0, "Q4_0", 0.16},
		{llamacpp.Q4_K_M, "Q4_K - Medium", 0.18},
	} {
		t.Run(c.desc, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "q.gguf")
			require.NoError(t, llamacpp.Quantize(src, out, c.ft, 2))
			m, err := llamacpp.LoadModel(out, llamatest.ModelParams(t, llamacpp.ModelParams{}))
			require.NoError(t, err)
			defer m.Close()
			assert.Equal(t, "llama ?B "+c.desc, m.Info().Description)
			assert.Less(t, float64(m.Info().Size), c.size*float64(f32.Info().Size))

			tokens := randomTokens(5, 12, m.Vocab().Size())
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
			t.Logf("%s: largest |batch - token by token| %.3g", c.desc, d)
			assert.Less(t, d, 0.05)
		})
	}
	assert.ErrorIs(t, llamacpp.Quantize(src, filepath.Join(t.TempDir(), "x.gguf"), llamacpp.FileType(99), 1),
		llamacpp.ErrInvalidArgument)
}
