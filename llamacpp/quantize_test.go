package llamacpp_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/asan"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each file type Quantize accepts gives a model that llama.cpp describes by
// that type, holds fewer bytes, and computes a prompt in one batch as it does
// token by token: the 4-bit types run on ggml's repacked kernels, whose
// matrix-matrix and matrix-vector paths differ.
//
// The bound is measured (logits of standard deviation 3, largest |logit| 13):
// with -O3 (make test) batched and token-by-token logits differ by at most
// 0.0046 (F16), 0 (Q8_0, Q4_0) and 2.9e-6 (Q4_K_M) on an AVX-512 Xeon
// (Sapphire Rapids family, AMX hidden by its hypervisor); its x86-64-v3
// build (make check-arch: the AVX2 kernels an AMD EPYC Zen 3 runs) gives
// 0.0052, 0, 0 and 2.9e-6, and on AMD EPYC Zen 3 itself this test passed
// make test and make test-asan with the 0.05 bound in earlier sessions. The
// instrumented -O1 build of make test-asan gives the same figures but for
// Q4_K_M on the Xeon: 0.149, with or without AddressSanitizer (a plain -O1
// build gives it too). Relinking the -O3 test binary with single objects of
// the -O1 build narrows it to two of the pinned ggml's files together:
// ggml-quants.c (quantize_row_q8_K_ref, which quantizes the activations of
// one-token products) and ggml-cpu/ops.cpp's RoPE, whose -O1 code rounds
// differently in the last bit; either alone stays at 3e-6. What then
// differs is only the one-token product on ggml's repacked q4_K weights
// (ggml_gemv_q4_K_8x8_q8_K): without repacking, and for the batched
// product, the -O1 logits stay within 3e-6 of the -O3 ones, and the AVX-512
// gemv agrees with ggml's generic gemv within 1e-6 on every call, so no
// vector kernel miscomputes and AddressSanitizer reports nothing: a
// rounding-sensitive spot of the repacked one-token path, not undefined
// behaviour of ours. The instrumented build keeps a bound above what it
// measured for that case alone.
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
			d, top := 0.0, 0.0
			for i, tok := range tokens {
				row := decodeSeq(t, ctx, b, 0, i, []int32{tok})[0]
				for j, v := range row {
					require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0))
					d = math.Max(d, math.Abs(float64(v-batched[i][j])))
					top = math.Max(top, math.Abs(float64(v)))
				}
			}
			t.Logf("%s: largest |batch - token by token| %.3g (largest |logit| %.3g)", c.desc, d, top)
			bound := 0.05
			if asan.Enabled && c.ft == llamacpp.Q4_K_M {
				bound = 0.2 // measured 0.149 on the AVX-512 Xeon at -O1; see above
			}
			assert.Less(t, d, bound)
		})
	}
	assert.ErrorIs(t, llamacpp.Quantize(src, filepath.Join(t.TempDir(), "x.gguf"), llamacpp.FileType(99), 1),
		llamacpp.ErrInvalidArgument)
}
