package beam_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/require"
)

// decoderOnly is the decoder of m over encoder input in as a plain
// function of the decoder history, recomputed from scratch at every call:
// a decoder-only model that beam search drives without backend.Encoder.
func decoderOnly(t *testing.T, m *reference.T5, in []int32) backend.ModelFunc {
	enc, err := m.Encode(in)
	require.NoError(t, err)
	row := make([]float32, m.NVocab)
	return func(history []int32) ([]float32, error) {
		out, err := m.NewDecoder(enc).Eval(history)
		if err != nil {
			return nil, err
		}
		for i, v := range out[len(out)-1] {
			row[i] = float32(v)
		}
		return row, nil
	}
}

// Beam search on an encoder-decoder backend, two prompts searched side by
// side with their beams sharing one encoder output each (one Encode per
// prompt), finds exactly the hypotheses of the same search over each
// decoder as a decoder-only model whose prompt is decoder_start_token_id.
func TestEncoderDecoderBeamSearch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t5.gguf")
	require.NoError(t, testmodel.TinyT5().Write(path))
	m, err := reference.LoadT5(path)
	require.NoError(t, err)

	cfg := genconfig.Default()
	cfg.NumBeams, cfg.NumReturnSequences = 3, 3
	n := 6
	cfg.MaxNewTokens = &n
	cfg.EOSTokenID = []int32{testmodel.EOS}
	ins := [][]int32{{300, 301, 302, 2}, {400, 401, 2}}
	ref := refbackend.NewT5(m, 6)
	got, err := beam.Search(context.Background(), ref, ins, beam.Options{Config: cfg})
	require.NoError(t, err)
	require.Equal(t, 2, got.Stats.Encodes)
	require.Equal(t, 2, ref.EncoderRuns())
	require.Positive(t, got.Stats.Copies, "the beams must have been copied")

	for i, in := range ins {
		mem := backend.NewMemoryBackend(m.NVocab, 3, decoderOnly(t, m, in))
		want, err := beam.Search(context.Background(), mem, [][]int32{{m.DecoderStart}}, beam.Options{Config: cfg})
		require.NoError(t, err)
		require.Equal(t, want.Hypotheses[0], got.Hypotheses[i], "prompt %d", i)
	}
}

func TestEncoderDecoderBeamErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t5.gguf")
	require.NoError(t, testmodel.TinyT5().Write(path))
	m, err := reference.LoadT5(path)
	require.NoError(t, err)
	_, err = beam.Search(context.Background(), refbackend.NewT5(m, 2), [][]int32{{}}, beam.Options{})
	require.ErrorIs(t, err, beam.ErrInvalid)
	require.ErrorContains(t, err, "encoder input 0 is empty")
}
