//go:build cgo

package scripted

import (
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Go tokenizer of the demo model is llama.cpp's: the same tokens with
// and without special tokens, the same pieces, the same end-of-generation
// tokens and built-in chat template.
func TestTokenizerIsLlamaCpp(t *testing.T) {
	d, err := DemoModel()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "demo.gguf")
	require.NoError(t, d.Write(path))
	m, err := llamacpp.LoadModel(path, llamacpp.ModelParams{VocabOnly: true})
	require.NoError(t, err)
	defer m.Close()
	want := m.Vocab()
	tok, _, err := Demo(1, 0)
	require.NoError(t, err)

	for _, text := range []string{"", "The model", "  two  spaces ", "Hello<|im_end|>\n<|im_start|>user\nHi", "é€😀 </s> x<s>", `{"name": "get_weather"}`} {
		for _, special := range [][2]bool{{false, false}, {true, false}, {true, true}, {false, true}} {
			w, err := want.Tokenize(text, special[0], special[1])
			require.NoError(t, err)
			got, err := tok.Tokenize(text, special[0], special[1])
			require.NoError(t, err)
			assert.Equal(t, w, got, "%q add %v parse %v", text, special[0], special[1])
		}
	}
	for id := range int32(want.Size()) {
		for _, special := range []bool{false, true} {
			w, err := want.AppendPiece(nil, id, special)
			require.NoError(t, err)
			got, err := tok.AppendPiece(nil, id, special)
			require.NoError(t, err)
			assert.Equal(t, string(w), string(got), "token %d special %v", id, special)
		}
	}
	assert.ElementsMatch(t, want.EOGTokens(), tok.EOGTokens())
	assert.Equal(t, want.AddsBOS(), tok.AddsBOS())
	msgs := []backend.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}
	w, err := want.ApplyChatTemplate("", msgs, true)
	require.NoError(t, err)
	got, err := tok.ApplyChatTemplate(msgs, true)
	require.NoError(t, err)
	assert.Equal(t, w, got)
}
