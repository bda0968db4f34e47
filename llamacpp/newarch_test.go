package llamacpp_test

import (
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/cgo"
	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/require"
)

// An architecture that llama.cpp has only since 2026: maincoder, llama with
// each head of Q and K RMS-normalized after RoPE, written tiny by the
// project's GGUF writer. The pinned engine's validation refuses it, naming
// the engine; on the external engine built from master it loads, its logits
// agree with the float64 reference at every position, and greedy decoding
// follows the reference's argmax.
func TestArchitectureAfterThePin(t *testing.T) {
	s := testmodel.TinySpec(gguf.TensorF32)
	s.Name, s.Arch = "tiny-maincoder", "maincoder"
	path := filepath.Join(t.TempDir(), "maincoder.gguf")
	require.NoError(t, testmodel.WriteRandom(path, s))
	m, err := llamacpp.LoadModel(path, llamatest.ModelParams(t, llamacpp.ModelParams{}))
	if _, known := llamacpp.ArchRuleNames()["maincoder"]; !known {
		require.Equal(t, "module", cgo.Engine)
		require.ErrorIs(t, err, llamacpp.ErrLoad)
		require.ErrorContains(t, err, `general.architecture: "maincoder" is not an architecture that llama.cpp ec98e2002 (the pinned module) can run`)
		return
	}
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	ref, err := reference.Load(path)
	require.NoError(t, err)
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 64})
	b := newBatch(t, 64, 1)
	tokens := randomTokens(7, 40, m.Vocab().Size())
	want, err := ref.Logits(tokens)
	require.NoError(t, err)
	got := append(decodeSeq(t, ctx, b, 0, 0, tokens[:25]), decodeSeq(t, ctx, b, 0, 25, tokens[25:])...)
	d := maxDiff(t, got, want)
	t.Logf("maincoder on %s: largest |llama.cpp - reference| over %d positions: %.3g", cgo.EngineVersion(), len(tokens), d)
	require.LessOrEqual(t, d, llamatest.Tolerance(t, llamatest.Check("tiny-f32")))

	// Greedy generation: each next token is the reference's argmax.
	seq := ref.NewSequence()
	_, err = seq.Eval(tokens)
	require.NoError(t, err)
	next := argmax(got[len(got)-1])
	for i := range 8 {
		rows, err := seq.Eval([]int32{next})
		require.NoError(t, err)
		out := decodeSeq(t, ctx, b, 0, len(tokens)+i, []int32{next})
		require.Equal(t, argmax(rows[0]), argmax(out[0]), "token %d", i)
		next = argmax(out[0])
	}
}

func argmax[F float32 | float64](row []F) int32 {
	best := 0
	for i, x := range row {
		if x > row[best] {
			best = i
		}
	}
	return int32(best)
}
