package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/require"
)

// An encoder-decoder model generates from the command line as on the
// float64 reference: the prompt is the encoder input (tokenized with the
// EOS that T5's tokenizer appends), greedy tokens and the best beam are the
// reference's; the modes that need a decoder-only model say so.
func TestEncoderDecoderModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t5.gguf")
	t5 := testmodel.TinyT5()
	require.NoError(t, t5.Write(path))
	ref, err := reference.LoadT5(path)
	require.NoError(t, err)
	const text = "The cat sat on the mat"
	in := t5.Vocab.Tokenize(text, true)
	require.Equal(t, testmodel.EOS, in[len(in)-1])

	cfg := genconfig.Default()
	n := 10
	cfg.MaxNewTokens = &n
	cfg.EOSTokenID = []int32{testmodel.EOS}
	want, err := generation.NewGenerator(refbackend.NewT5(ref, 1), nil).Generate(context.Background(),
		[]generation.Request{{Prompt: in, Config: cfg}})
	require.NoError(t, err)

	res := run(t, "", "-m", path, "-p", text, "--max-new-tokens", "10", "--json", "--quiet")
	require.Equal(t, 0, res.Code, res.Stderr)
	r := ofType(jsonLines(t, res.Stdout), "result")
	require.Len(t, r, 1)
	require.Equal(t, want[0].Tokens, ints(r[0]["tokens"]))
	require.Equal(t, float64(len(in)), r[0]["prompt_tokens"])

	beams := cfg.Clone()
	beams.NumBeams = 3
	hyps, err := beam.Search(context.Background(), refbackend.NewT5(ref, 3), [][]int32{in}, beam.Options{Config: beams})
	require.NoError(t, err)
	res = run(t, "", "-m", path, "-p", text, "--max-new-tokens", "10", "--num-beams", "3", "--json", "--quiet")
	require.Equal(t, 0, res.Code, res.Stderr)
	r = ofType(jsonLines(t, res.Stdout), "result")
	require.Len(t, r, 1)
	require.Equal(t, hyps.Hypotheses[0][0].Tokens, ints(r[0]["tokens"]))
	require.InDelta(t, hyps.Hypotheses[0][0].Score, r[0]["score"].(float64), 1e-3)

	res = run(t, "", "-m", path, "--chat")
	require.Equal(t, 2, res.Code)
	require.Contains(t, res.Stderr, "interactive --chat needs a decoder-only model; t5.gguf is an encoder-decoder")
	res = run(t, "", "-m", path, "--demo")
	require.Equal(t, 2, res.Code)
	require.Contains(t, res.Stderr, "--demo needs a decoder-only model")
}
