package reference

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// EvalNonCausal of one input is EvalInputs of it, exactly; in a block of
// several, an input's output depends on the inputs after it (under
// EvalInputs it does not); and the inputs after a block attend causally
// again (their rows do not depend on the inputs after them).
func TestEvalNonCausal(t *testing.T) {
	m, vocab := loadTiny(t)
	toks := randomTokens(rand.New(rand.NewPCG(5, 6)), 8, vocab)
	in := make([]Input, len(toks))
	for i, tok := range toks {
		in[i].Token = tok
	}
	one, _, err := m.NewSequence().EvalInputs(in[:1])
	require.NoError(t, err)
	block, _, err := m.NewSequence().EvalNonCausal(in[:1])
	require.NoError(t, err)
	assert.Equal(t, one, block)

	changed := append([]Input(nil), in...)
	changed[3].Token = (changed[3].Token + 1) % int32(vocab)
	a, _, err := m.NewSequence().EvalNonCausal(in[:4])
	require.NoError(t, err)
	b, _, err := m.NewSequence().EvalNonCausal(changed[:4])
	require.NoError(t, err)
	assert.NotEqual(t, a[0], b[0], "input 0 attends to input 3")
	ca, _, err := m.NewSequence().EvalInputs(in[:4])
	require.NoError(t, err)
	cb, _, err := m.NewSequence().EvalInputs(changed[:4])
	require.NoError(t, err)
	assert.Equal(t, ca[0], cb[0], "causally it does not")

	s1, s2 := m.NewSequence(), m.NewSequence()
	_, _, err = s1.EvalNonCausal(in[:4])
	require.NoError(t, err)
	_, _, err = s2.EvalNonCausal(in[:4])
	require.NoError(t, err)
	r1, _, err := s1.EvalInputs(in[4:])
	require.NoError(t, err)
	r2, _, err := s2.EvalInputs(in[4:6])
	require.NoError(t, err)
	assert.Equal(t, r1[:2], r2)

	_, _, err = m.NewSequence().EvalNonCausal([]Input{{Token: int32(vocab)}})
	assert.ErrorIs(t, err, ErrToken)
}
