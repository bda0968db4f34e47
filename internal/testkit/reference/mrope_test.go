package reference

import (
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQwen2VLTextMRoPE(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.gguf")
	require.NoError(t, testmodel.TinyQwen2VLText().Write(path))
	m, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, "qwen2vl", m.Arch)
	assert.Equal(t, [4]int{8, 12, 12, 0}, m.RopeSections)

	// three tokens, then a 2x2 "image" of token embeddings at one temporal
	// position walking rows and columns, then a token
	tokens := []int32{300, 301, 302, 303, 304, 305, 306, 307}
	in := make([]Input, len(tokens))
	for i, tok := range tokens {
		in[i].Token = tok
	}
	pos := [][4]int{{0, 0, 0, 0}, {1, 1, 1, 0}, {2, 2, 2, 0}, {3, 3, 3, 0}, {3, 3, 4, 0}, {3, 4, 3, 0}, {3, 4, 4, 0}, {5, 5, 5, 0}}
	want, _, err := m.NewSequence().EvalInputsAt(in, pos)
	require.NoError(t, err)

	shift := func(plane, by int) [][4]int {
		out := make([][4]int, len(pos))
		for i, p := range pos {
			p[plane] += by
			out[i] = p
		}
		return out
	}
	// Rotary positions are relative: moving every input along one plane
	// leaves the logits unchanged.
	for plane := range 3 {
		got, _, err := m.NewSequence().EvalInputsAt(in, shift(plane, 7))
		require.NoError(t, err)
		for i := range want {
			assert.InDeltaSlice(t, want[i], got[i], 1e-9, "plane %d, input %d", plane, i)
		}
	}
	// Swapping the image's rows and columns changes what it says: the
	// height and width planes rotate different pairs.
	swapped := append([][4]int(nil), pos...)
	for i := 3; i < 7; i++ {
		swapped[i][1], swapped[i][2] = pos[i][2], pos[i][1]
	}
	got, _, err := m.NewSequence().EvalInputsAt(in, swapped)
	require.NoError(t, err)
	assert.NotEqual(t, want[7], got[7])

	// Text positions (p, p, p, 0) are plain positions: Logits agrees.
	text, err := m.Logits(tokens[:3])
	require.NoError(t, err)
	for i := range 3 {
		assert.InDeltaSlice(t, text[i], want[i], 1e-12)
	}
	_, _, err = m.NewSequence().EvalInputsAt(in, pos[:2])
	assert.ErrorContains(t, err, "2 positions for 8 inputs")
}
