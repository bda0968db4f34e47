//go:build !llamacpp_external

package llamabackend_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/stretchr/testify/require"
)

// A mixed image+text prompt through the tiny gemma3 projector and the one
// generation loop: llama.cpp's greedy tokens equal the float64 reference
// model's fed the same image embeddings, and differ from those of the
// prompt without the image; a text-only request is batched beside it.
func TestGenerateWithImage(t *testing.T) {
	m := llamaModel(t, "tiny")
	path, _ := llamaModels.Load("tiny")
	ref, err := reference.Load(path.(string))
	require.NoError(t, err)
	mmproj := filepath.Join(t.TempDir(), "tiny-gemma3.mmproj.gguf")
	spec := testmodel.TinyGemma3Projector()
	require.NoError(t, spec.Write(mmproj))
	p, err := llamacpp.LoadProjector(mmproj, m, llamacpp.ProjectorParams{Threads: 1})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })

	rgb := make([]byte, 3*spec.ImageSize*spec.ImageSize)
	for i := range rgb {
		rgb[i] = byte(i * 37)
	}
	img, err := llamacpp.ImageRGB(spec.ImageSize, spec.ImageSize, rgb)
	require.NoError(t, err)
	pr, err := p.Tokenize("look: <__media__> and say", []llamacpp.Media{img}, llamacpp.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	t.Cleanup(pr.Close)
	_, _, err = pr.Inputs(llamacpp.InputsOptions{Placeholder: 3})
	require.ErrorIs(t, err, llamacpp.ErrNonCausal, "gemma3's images are non-causal in llama.cpp's helper")
	toks, embd, err := pr.Inputs(llamacpp.InputsOptions{Placeholder: 3, CausalImages: true})
	require.NoError(t, err)

	gen, _ := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 2, BatchSize: 16})
	refGen := generation.NewGenerator(refbackend.New(ref, m.Vocab().Size(), 2), llamabackend.Tokenizer{Vocab: m.Vocab()})
	cfg := greedyConfig(12)
	reqs := []generation.Request{{Prompt: toks, PromptEmbeddings: embd, Config: cfg}, {Prompt: toks, Config: cfg}}
	got, err := gen.Generate(context.Background(), reqs)
	require.NoError(t, err)
	want, err := refGen.Generate(context.Background(), reqs)
	require.NoError(t, err)
	require.Equal(t, want[0].Tokens, got[0].Tokens)
	require.Equal(t, want[1].Tokens, got[1].Tokens)
	require.NotEqual(t, got[1].Tokens, got[0].Tokens, "the image changes the reply")
}
