package backend

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mixedLayout is two text tokens, an image of 3 columns and 2 rows at
// temporal position 2 (mtmd's layout), and a text token after it at
// 2 + max(3, 2) = 5 (values worked by hand).
func mixedLayout() ([]Pos, [][]float32) {
	e := []float32{1}
	pos := []Pos{
		{0, 0, 0}, {1, 1, 1},
		{2, 2, 2}, {2, 2, 3}, {2, 2, 4},
		{2, 3, 2}, {2, 3, 3}, {2, 3, 4},
		{5, 5, 5},
	}
	embd := [][]float32{nil, nil, e, e, e, e, e, e, nil}
	return pos, embd
}

func TestCheckPositions(t *testing.T) {
	pos, embd := mixedLayout()
	next, err := CheckPositions(pos, embd, 0)
	require.NoError(t, err)
	assert.Equal(t, int32(6), next)
	next, err = CheckPositions(pos[:8], embd[:8], 0)
	require.NoError(t, err)
	assert.Equal(t, int32(5), next, "after the image: its temporal position plus its larger side")
	next, err = CheckPositions([]Pos{TextPos(9)}, nil, 4)
	require.NoError(t, err)
	assert.Equal(t, int32(10), next, "a token may jump forward")

	for name, tc := range map[string]struct {
		pos  []Pos
		embd [][]float32
		next int32
		want string
	}{
		"token planes":   {[]Pos{{3, 3, 4}}, nil, 0, "a token takes one position in every plane"},
		"token behind":   {[]Pos{TextPos(2)}, nil, 3, "before the history's next position 3"},
		"embd behind":    {pos[2:3], embd[2:3], 3, "before the history's next position 3"},
		"not row-major":  {[]Pos{{2, 3, 2}, {2, 2, 4}}, [][]float32{{1}, {1}}, 0, "row-major order"},
		"repeated":       {[]Pos{{2, 2, 2}, {2, 2, 2}}, [][]float32{{1}, {1}}, 0, "row-major order"},
		"token in image": {[]Pos{{2, 2, 2}, TextPos(2)}, [][]float32{{1}, nil}, 0, "before the history's next position 3"},
		"negative":       {[]Pos{{-1, 0, 0}}, nil, 0, "outside [0, 1073741823] (MaxPos)"},
		"too far":        {[]Pos{{0, MaxPos + 1, 0}}, [][]float32{{1}}, 0, "(MaxPos)"},
		"lengths":        {pos, embd[:3], 0, "9 positions for 3 inputs"},
	} {
		_, err := CheckPositions(tc.pos, tc.embd, tc.next)
		assert.ErrorIs(t, err, ErrBadPosition, name)
		assert.ErrorContains(t, err, tc.want, name)
	}
}

func TestSlotPositions(t *testing.T) {
	pos, embd := mixedLayout()
	s := NewSlotPositions(3)
	toks := make([]int32, len(pos))
	assert.Equal(t, int32(4), s.Next(0, 4), "a slot never fed positions is at its length")
	s.Append(Feed{Slot: 0, Tokens: toks[:2]}, 0)
	assert.Equal(t, int32(2), s.Next(0, 2))

	f := Feed{Slot: 0, Tokens: toks[2:], Embd: embd[2:], Pos: pos[2:]}
	require.NoError(t, s.Check(f, 2))
	assert.ErrorIs(t, s.Check(Feed{Slot: 0, Tokens: toks[2:], Pos: pos[3:]}, 2), ErrBadPosition, "a position per token")
	s.Append(f, 2)
	assert.Equal(t, int32(6), s.Next(0, 9))
	s.Append(Feed{Slot: 0, Tokens: toks[:2]}, 9) // generated tokens at 6, 7
	assert.Equal(t, int32(8), s.Next(0, 11))
	assert.Equal(t, TextPos(8), PosAt(Feed{Slot: 0, Tokens: toks[:1]}, s.Next(0, 11), 0))
	assert.Equal(t, pos[3], PosAt(f, 0, 1))

	s.Copy(1, 0)
	for _, n := range []int{3, 4, 7} {
		_, err := s.Cut(1, n)
		assert.ErrorIs(t, err, ErrBadPosition, "a cut at %d, inside the image", n)
	}
	for n, want := range map[int]int32{0: 0, 2: 2, 8: 5, 9: 6, 10: 7} {
		cut, err := s.Cut(1, n)
		require.NoError(t, err)
		assert.Equal(t, want, cut, "cut at %d", n)
	}
	s.Truncate(1, 9)
	assert.Equal(t, int32(6), s.Next(1, 9))
	assert.Equal(t, int32(8), s.Next(0, 11), "the copy is its own")
	s.Truncate(1, 2)
	assert.Equal(t, int32(2), s.Next(1, 2))

	assert.Equal(t, 8, s.Resync(0, 2), "the image's cells at 2 survived a failed decode")
	assert.Equal(t, int32(5), s.Next(0, 8))
	assert.Equal(t, 0, s.Resync(0, -1))
	assert.Equal(t, int32(0), s.Next(0, 0))
	assert.Equal(t, 5, s.Resync(2, 4), "a slot never fed positions")
	s.Append(f, 2)
	assert.Equal(t, int32(6), s.Next(0, 9))
	s.Clear(0)
	assert.Equal(t, int32(3), s.Next(0, 3))
}

// The memory backend reads tokens only: positions are refused.
func TestMemoryBackendRefusesPositions(t *testing.T) {
	b := NewMemoryBackend(4, 1, countingModel(4))
	err := b.Eval(context.Background(), []Feed{{Slot: 0, Tokens: []int32{1}, Pos: []Pos{TextPos(0)}}})
	require.ErrorIs(t, err, ErrBadPosition)
	assert.Empty(t, b.History(0))
}
