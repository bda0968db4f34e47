//go:build !llamacpp_external

package llamacpp_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/require"
)

// Every clip key of the tiny gemma3 projector with another type, a zero, a
// huge value or removed, and every tensor removed: LoadProjector and an
// encode return (an error or embeddings), never a crash of the process.
func TestProjectorMutations(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	spec := testmodel.TinyGemma3Projector()
	require.NoError(t, spec.Write(good))
	data, _ := os.ReadFile(good)
	r, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	img, err := llamacpp.ImageRGB(spec.ImageSize, spec.ImageSize, testRGB(spec.ImageSize, spec.ImageSize))
	require.NoError(t, err)

	type mutation struct {
		name string
		edit func([]gguf.KV, []gguf.TensorInfo) ([]gguf.KV, []gguf.TensorInfo)
	}
	var muts []mutation
	for i, kv := range r.File.Metadata {
		if !strings.HasPrefix(kv.Key, "clip.") {
			continue
		}
		for _, v := range []any{"x", uint32(0), uint32(1 << 30), int32(-1), float32(0), nil} {
			muts = append(muts, mutation{fmt.Sprintf("%s=%v(%T)", kv.Key, v, v), func(kvs []gguf.KV, ts []gguf.TensorInfo) ([]gguf.KV, []gguf.TensorInfo) {
				if v == nil {
					return append(kvs[:i:i], kvs[i+1:]...), ts
				}
				kvs[i].Value = v
				return kvs, ts
			}})
		}
	}
	for i, ti := range r.File.Tensors {
		muts = append(muts, mutation{"drop " + ti.Name, func(kvs []gguf.KV, ts []gguf.TensorInfo) ([]gguf.KV, []gguf.TensorInfo) {
			return kvs, append(ts[:i:i], ts[i+1:]...)
		}})
		muts = append(muts, mutation{"transpose " + ti.Name, func(kvs []gguf.KV, ts []gguf.TensorInfo) ([]gguf.KV, []gguf.TensorInfo) {
			s := append([]uint64(nil), ts[i].Shape...)
			if len(s) < 2 {
				s = append(s, 2)
				s[0] = (s[0] + 1) / 2
			} else {
				s[0], s[1] = s[1], s[0]+1
			}
			ts[i].Shape = s
			return kvs, ts
		}})
	}
	refused, loaded := 0, 0
	for _, mu := range muts {
		path := filepath.Join(dir, "m.gguf")
		rewriteGGUF(t, good, path, mu.edit)
		t.Log(mu.name)
		p, err := llamacpp.LoadProjector(path, m, llamacpp.ProjectorParams{Threads: 1})
		if err != nil {
			require.ErrorIs(t, err, llamacpp.ErrProjector, mu.name)
			refused++
			continue
		}
		loaded++
		if pr, err := p.Tokenize("x", []llamacpp.Media{img}, llamacpp.TokenizeOptions{}); err == nil {
			for i, c := range pr.Chunks {
				if c.Kind != llamacpp.ChunkText {
					pr.Encode(i)
				}
			}
			pr.Close()
		}
		p.Close()
	}
	t.Logf("%d mutations: %d refused, %d loaded", len(muts), refused, loaded)
	require.Greater(t, refused, len(muts)/2, "the validation refuses most mutations before clip sees them")
}
