package llamacpp_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// qwen2vl rewrites tiny-f32 as a qwen2vl text model (multi-position RoPE:
// four positions per entry), with zero q/k/v biases when withBias.
func qwen2vl(t *testing.T, withBias bool) string {
	src := modelPath(t, "tiny-f32")
	path := filepath.Join(t.TempDir(), "tiny-qwen2vl.gguf")
	rewriteGGUF(t, src, path, func(kvs []gguf.KV, ts []gguf.TensorInfo) ([]gguf.KV, []gguf.TensorInfo) {
		if withBias {
			for l := range 3 {
				for n, w := range map[string]uint64{"attn_q": 256, "attn_k": 128, "attn_v": 128} {
					ts = append(ts, gguf.TensorInfo{Name: fmt.Sprintf("blk.%d.%s.bias", l, n), Shape: []uint64{w}, Type: gguf.TensorF32})
				}
			}
		}
		for i := range kvs {
			if kvs[i].Key == "general.architecture" {
				kvs[i].Value = "qwen2vl"
			}
			if rest, ok := strings.CutPrefix(kvs[i].Key, "llama."); ok {
				kvs[i].Key = "qwen2vl." + rest
			}
		}
		kvs = append(kvs, gguf.KV{Key: "qwen2vl.rope.dimension_sections", Value: []int32{16, 8, 8, 0}})
		return kvs, ts
	})
	return path
}

// A qwen2vl without its q/k/v biases is refused at load: its graph adds
// them unchecked (a SIGSEGV in NewContext before the validation said so).
func TestQwen2VLNeedsBiases(t *testing.T) {
	_, err := llamacpp.LoadModel(qwen2vl(t, false), llamatest.ModelParams(t, llamacpp.ModelParams{}))
	require.ErrorIs(t, err, llamacpp.ErrLoad)
	require.ErrorContains(t, err, `"blk.0.attn_q.bias": missing, and llama.cpp's qwen2vl graph adds it unchecked`)
}

// A text model with multi-position RoPE decodes tokens, and embeddings
// with their M-RoPE positions; a batch of embeddings with one position
// each is refused with the reason, and so are M-RoPE positions for a model
// without, and the two kinds in one batch.
func TestMRoPEModelEmbeddings(t *testing.T) {
	m, err := llamacpp.LoadModel(qwen2vl(t, true), llamatest.ModelParams(t, llamacpp.ModelParams{}))
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	require.True(t, m.MRoPE())
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 16})
	b := newBatch(t, 16, 1)
	_, err = b.Add(5, 0, 0, true)
	require.NoError(t, err)
	require.NoError(t, ctx.Decode(t.Context(), b), "tokens decode: llama.cpp widens their positions itself")
	b.Clear()
	vec := make([]float32, m.InputEmbeddingSize())
	_, err = b.AddEmbedding(vec, 1, 0, true)
	require.NoError(t, err)
	err = ctx.Decode(t.Context(), b)
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	require.ErrorContains(t, err, "multi-position RoPE (M-RoPE): its input embeddings need four positions each")
	_, err = b.AddEmbeddingMRoPE(vec, backend.Pos{T: 1, H: 1, W: 2}, 0, true)
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument, "one kind of embeddings per batch")

	b.Clear()
	for i, p := range []backend.Pos{{T: 1, H: 1, W: 1}, {T: 1, H: 1, W: 2}, {T: 1, H: 2, W: 1}, {T: 1, H: 2, W: 2}} {
		vec[i] = 1
		_, err = b.AddEmbeddingMRoPE(vec, p, 0, i == 3)
		require.NoError(t, err)
	}
	require.NoError(t, ctx.Decode(t.Context(), b))
	last, err := ctx.SeqPosMax(0)
	require.NoError(t, err)
	assert.Equal(t, int32(1), last, "the image's cells sit at its temporal position")
	_, err = b.Add(5, 3, 0, true)
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument, "tokens and embeddings do not share a batch")
	_, err = b.AddEmbeddingMRoPE(vec, backend.Pos{T: -1}, 0, true)
	require.ErrorContains(t, err, "negative M-RoPE position")
	b.Clear()
	_, err = b.AddEmbeddingMRoPE(vec[:10], backend.Pos{T: 2, H: 2, W: 2}, 0, true)
	require.NoError(t, err, "rows of another width, the positions kept")
	err = ctx.Decode(t.Context(), b)
	require.ErrorContains(t, err, "input embeddings of width 10; the model takes 256")

	plain := loadModel(t, "tiny-f32")
	require.False(t, plain.MRoPE())
	pctx := newContext(t, plain, llamacpp.ContextParams{ContextSize: 256, BatchSize: 16})
	b.Clear()
	_, err = b.AddEmbeddingMRoPE(vec, backend.Pos{}, 0, true)
	require.NoError(t, err)
	err = pctx.Decode(t.Context(), b)
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	require.ErrorContains(t, err, "which takes one position per input")
}
