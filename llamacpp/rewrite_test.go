package llamacpp_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/stretchr/testify/require"
)

// rewriteGGUF writes the GGUF at src to dst with its metadata and tensor
// list changed by edit.
func rewriteGGUF(t *testing.T, src, dst string, edit func([]gguf.KV, []gguf.TensorInfo) ([]gguf.KV, []gguf.TensorInfo)) {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	r, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	kvs, ts := edit(append([]gguf.KV(nil), r.File.Metadata...), append([]gguf.TensorInfo(nil), r.File.Tensors...))
	var buf bytes.Buffer
	w, err := gguf.NewWriter(&buf, kvs, ts)
	require.NoError(t, err)
	for _, ti := range w.Tensors() {
		size, err := ti.Size()
		require.NoError(t, err)
		b, err := r.TensorBytes(ti.Name)
		if err != nil || uint64(len(b)) != size {
			b = make([]byte, size)
		}
		_, err = w.Write(b)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	require.NoError(t, os.WriteFile(dst, buf.Bytes(), 0o644))
}
