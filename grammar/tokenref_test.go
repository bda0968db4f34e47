package grammar

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTokenReferences checks <[id]> and !<[id]> against llama.cpp's rules, worked out by hand on
// a vocabulary where a token's text and its id disagree: a reference takes a whole token by its
// id whatever its text, a token that reaches a reference partway through its bytes is refused,
// tokens without text and end of generation are never taken by a reference, and a token that
// both its bytes and its id allow continues along both.
func TestTokenReferences(t *testing.T) {
	// 0 "a", 1 "b", 2 "ab", 3 "<t>", 4 end of generation, 5 "c", 6 a token without text.
	v, err := NewVocabulary([][]byte{[]byte("a"), []byte("b"), []byte("ab"), []byte("<t>"), nil, []byte("c"), nil}, []int32{4})
	require.NoError(t, err)
	steps := []struct {
		grammar string
		tokens  []int32 // accepted in turn; the allowed set is checked before each and at the end
		allowed [][]int32
	}{
		{`root ::= "a" <[3]> "b"`, []int32{0, 3, 1}, [][]int32{{0}, {3}, {1}, {4}}},
		{`root ::= !<[1]> "b"`, []int32{2, 1}, [][]int32{{0, 2, 3, 5}, {1}, {4}}},
		{`root ::= "a" | <[0]> "c"`, []int32{0, 5}, [][]int32{{0}, {4, 5}, {4}}},
		{`root ::= (<[1]> | !<[1]>) "c"`, []int32{1, 5}, [][]int32{{0, 1, 2, 3, 5}, {5}, {4}}},
		{`root ::= "b"? <[5]>`, []int32{5}, [][]int32{{1, 5}, {4}}},
	}
	for _, c := range steps {
		m := NewMatcher(mustParse(t, c.grammar), v)
		s := m.Start()
		for i, want := range c.allowed {
			assert.Equal(t, want, m.Allowed(nil, s), "%s after %v", c.grammar, c.tokens[:i])
			if i == len(c.tokens) {
				break
			}
			s = m.Accept(s, c.tokens[i])
			require.False(t, m.Dead(s), "%s: token %d refused after %v", c.grammar, c.tokens[i], c.tokens[:i])
		}
		assert.True(t, m.Complete(s), c.grammar)
	}

	m := NewMatcher(mustParse(t, `root ::= "a" <[3]> "b"`), v)
	assert.True(t, m.Dead(m.Accept(m.Start(), 2)), `"ab" reaches <[3]> after its first byte`)
	assert.True(t, m.Dead(m.AcceptBytes(m.Accept(m.Start(), 0), []byte("<t>"))), "a reference does not take the token's text")
	assert.True(t, m.Dead(m.Accept(m.Start(), 6)), "a token without text")
	negInf := float32(math.Inf(-1))
	row := []float32{1, 1, 1, 1, 1, 1, 1}
	m.Apply(m.Accept(m.Start(), 0), row)
	assert.Equal(t, []float32{negInf, negInf, negInf, 1, negInf, negInf, negInf}, row)
}
