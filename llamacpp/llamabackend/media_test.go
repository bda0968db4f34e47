//go:build !llamacpp_external

package llamabackend_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/stretchr/testify/require"
)

// A mixed image+text prompt through the tiny gemma3 projector and the one
// generation loop, the image's embeddings a non-causal run as llama.cpp's
// helper decodes them: llama.cpp's greedy tokens and log-probabilities
// equal the float64 reference model's fed the same image embeddings, and
// differ from those of the prompt without the image and from the image
// read causally; a text-only request is batched beside it. The engine,
// with prompt chunks shorter than the image, feeds the image whole and
// gives the same tokens.
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
	toks, embd, err := pr.Inputs(llamacpp.InputsOptions{Placeholder: 3})
	require.NoError(t, err)
	runs := pr.NonCausal()
	require.Len(t, runs, 1, "gemma3's images are non-causal in llama.cpp's helper")
	require.Equal(t, spec.NTokens(), runs[0].Len())

	gen, b := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 2, BatchSize: 16})
	refGen := generation.NewGenerator(refbackend.New(ref, m.Vocab().Size(), 2), llamabackend.Tokenizer{Vocab: m.Vocab()})
	cfg := greedyConfig(12)
	reqs := []generation.Request{
		{Prompt: toks, PromptEmbeddings: embd, PromptNonCausal: runs, Config: cfg, Logprobs: true},
		{Prompt: toks, Config: cfg, Logprobs: true},
	}
	got, err := gen.Generate(context.Background(), reqs)
	require.NoError(t, err)
	want, err := refGen.Generate(context.Background(), reqs)
	require.NoError(t, err)
	for i := range reqs {
		require.Equal(t, want[i].Tokens, got[i].Tokens)
		require.InDeltaSlice(t, want[i].Logprobs, got[i].Logprobs, llamatest.Tolerance(t, llamatest.TinyF32))
	}
	require.NotEqual(t, got[1].Tokens, got[0].Tokens, "the image changes the reply")
	causal := []generation.Request{{Prompt: toks, PromptEmbeddings: embd, Config: cfg, Logprobs: true}}
	gotCausal, err := gen.Generate(context.Background(), causal)
	require.NoError(t, err)
	require.Greater(t, math.Abs(float64(gotCausal[0].Logprobs[0]-got[0].Logprobs[0])), 1e-3, "the run attends both ways")

	e, err := generation.NewEngine(b, llamabackend.Tokenizer{Vocab: m.Vocab()}, generation.EngineOptions{PromptChunk: 5})
	require.NoError(t, err)
	chunked, err := e.Generate(context.Background(), reqs)
	require.NoError(t, err)
	require.NoError(t, e.Close())
	require.Equal(t, got[0].Tokens, chunked[0].Tokens)
	require.Equal(t, got[1].Tokens, chunked[1].Tokens)
}
