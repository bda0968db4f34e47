package backend

import (
	"errors"
	"fmt"
)

// Pos is the position of one input of a model with multi-position RoPE
// (M-RoPE: Qwen2-VL, Qwen2.5-VL, Qwen3-VL), whose rotary embedding turns
// some pairs of a head by a temporal position, some by a height and some by
// a width (llama_batch.pos's first three planes; the fourth is 0). A text
// token at position p is {p, p, p}. An image's embeddings share one
// temporal position t and walk its grid of patches: the one at row y,
// column x is {t, t+y, t+x}, and the input after the image is at
// 1 + the largest of its planes, t + max(rows, columns) (llama.cpp's
// mtmd_helper_decode_image_chunk and mtmd_image_tokens_get_n_pos).
type Pos struct{ T, H, W int32 }

// TextPos is the position p of a text token: p in every plane.
func TextPos(p int32) Pos { return Pos{p, p, p} }

// PosAt is the position of input j of f appended to a history whose next
// position is next: f.Pos[j], or the text position that continues it.
func PosAt(f Feed, next int32, j int) Pos {
	if f.Pos != nil {
		return f.Pos[j]
	}
	return TextPos(next + int32(j))
}

// MaxPos bounds every plane of a Pos.
const MaxPos = 1<<30 - 1

// PositionInput is an optional interface of a Backend that evaluates
// inputs at the positions a feed gives (Feed.Pos). A slot's next position
// is then no longer its length: after an M-RoPE image it is the image's
// temporal position plus the larger side of its grid, which is fewer than
// its embeddings. Inputs fed without positions continue from the slot's
// next position; Truncate and Copy keep each token's position (a history
// may not be cut inside an image, whose embeddings share one temporal
// position); Room stays a count of tokens (KV cells).
type PositionInput interface {
	Backend

	// MRoPE reports whether the model rotates by multi-position RoPE: Eval
	// refuses Feed.Pos otherwise.
	MRoPE() bool
}

// ErrBadPosition reports a Feed.Pos that does not fit its feed, its slot
// or the model: see CheckPositions.
var ErrBadPosition = errors.New("invalid input position")

// CheckPositions checks pos, the positions of a feed whose inputs are
// tokens, or embeddings where embd has a non-nil entry, appended to a
// history whose next position is next; it returns the history's next
// position after them. Every plane is in [0, MaxPos]. A token's planes are
// equal (llama.cpp gives a token one position, which it copies to every
// plane) and its position at least next. An embedding's temporal position
// is at least next, or the temporal position of the embedding before it
// (one image), in which case its (height, width) comes after that one's in
// row-major order: llama.cpp masks the inputs that share a temporal
// position by that order, which makes its attention causal in the feed's
// order as it is elsewhere. The next position after an input is the
// largest of 1 + its planes and the next position before it.
func CheckPositions(pos []Pos, embd [][]float32, next int32) (int32, error) {
	if embd != nil && len(embd) != len(pos) {
		return 0, fmt.Errorf("%w: %d positions for %d inputs", ErrBadPosition, len(pos), len(embd))
	}
	prevEmbd := false
	var prev Pos
	for j, p := range pos {
		for _, v := range [3]int32{p.T, p.H, p.W} {
			if v < 0 || v > MaxPos {
				return 0, fmt.Errorf("%w: input %d at %v: a plane outside [0, %d] (MaxPos)", ErrBadPosition, j, p, MaxPos)
			}
		}
		isEmbd := embd != nil && embd[j] != nil
		switch {
		case !isEmbd && (p.H != p.T || p.W != p.T):
			return 0, fmt.Errorf("%w: token %d at %v: a token takes one position in every plane", ErrBadPosition, j, p)
		case isEmbd && prevEmbd && p.T == prev.T:
			if p.H < prev.H || p.H == prev.H && p.W <= prev.W {
				return 0, fmt.Errorf("%w: embedding %d at %v after %v: embeddings that share a temporal position go in row-major order of (height, width)", ErrBadPosition, j, p, prev)
			}
		case p.T < next:
			return 0, fmt.Errorf("%w: input %d at %v: before the history's next position %d", ErrBadPosition, j, p, next)
		}
		next = max(next, p.T+1, p.H+1, p.W+1)
		prev, prevEmbd = p, isEmbd
	}
	return next, nil
}

// SlotPositions keeps the positions of a backend's slots for a
// PositionInput: the next position of each, and, once a slot is fed
// explicit positions, the temporal position of each of its tokens (what
// Truncate needs: llama.cpp forgets the cells from a position on). A slot
// never fed positions costs nothing: its positions are its token indices.
type SlotPositions struct {
	slots []slotPos
}

type slotPos struct {
	at   []int32 // temporal position of each token; nil while they are the indices
	next int32   // with at: the next input's position
}

// NewSlotPositions keeps the positions of n slots, all empty.
func NewSlotPositions(n int) *SlotPositions { return &SlotPositions{slots: make([]slotPos, n)} }

// Next is the position of the next input of slot, which holds length
// tokens.
func (s *SlotPositions) Next(slot, length int) int32 {
	if p := &s.slots[slot]; p.at != nil {
		return p.next
	}
	return int32(length)
}

// Check is CheckPositions of f against its slot, which holds length
// tokens.
func (s *SlotPositions) Check(f Feed, length int) error {
	if f.Pos == nil {
		return nil
	}
	if len(f.Pos) != len(f.Tokens) {
		return fmt.Errorf("%w: %d positions for %d tokens", ErrBadPosition, len(f.Pos), len(f.Tokens))
	}
	_, err := CheckPositions(f.Pos, f.Embd, s.Next(f.Slot, length))
	return err
}

// Append records f, checked by Check, appended to its slot of length
// tokens.
func (s *SlotPositions) Append(f Feed, length int) {
	p := &s.slots[f.Slot]
	if f.Pos == nil && p.at == nil {
		return
	}
	if p.at == nil {
		p.at = make([]int32, length, length+len(f.Tokens))
		for i := range p.at {
			p.at[i] = int32(i)
		}
		p.next = int32(length)
	}
	if f.Pos == nil {
		for range f.Tokens {
			p.at = append(p.at, p.next)
			p.next++
		}
		return
	}
	for _, q := range f.Pos {
		p.at = append(p.at, q.T)
		p.next = max(p.next, q.T+1, q.H+1, q.W+1)
	}
}

// Cut returns the position from which slot forgets its tokens to keep its
// first n: the position of token n. A cut between two embeddings of one
// image (one temporal position) is an error wrapping ErrBadPosition.
func (s *SlotPositions) Cut(slot, n int) (int32, error) {
	p := &s.slots[slot]
	if p.at == nil || n >= len(p.at) {
		return int32(n), nil
	}
	if n > 0 && p.at[n-1] == p.at[n] {
		return 0, fmt.Errorf("%w: token %d of slot %d shares its temporal position %d with the one before it (one image): a history is cut before or after an image", ErrBadPosition, n, slot, p.at[n])
	}
	return p.at[n], nil
}

// Truncate records that slot keeps its first n tokens (a Cut that
// succeeded).
func (s *SlotPositions) Truncate(slot, n int) {
	p := &s.slots[slot]
	switch {
	case p.at == nil || n >= len(p.at):
	case n == 0:
		*p = slotPos{}
	default:
		p.next, p.at = p.at[n], p.at[:n]
	}
}

// Copy makes dst's positions src's.
func (s *SlotPositions) Copy(dst, src int) {
	if dst == src {
		return
	}
	sp := s.slots[src]
	if sp.at != nil {
		sp.at = append([]int32(nil), sp.at...)
	}
	s.slots[dst] = sp
}

// Clear empties slot.
func (s *SlotPositions) Clear(slot int) { s.slots[slot] = slotPos{} }

// Resync returns the length of slot after a failed decode left its last
// cell at position last (-1: none), and keeps the positions of that many
// tokens.
func (s *SlotPositions) Resync(slot int, last int32) int {
	p := &s.slots[slot]
	if p.at == nil {
		return int(last) + 1
	}
	n := 0
	for n < len(p.at) && p.at[n] <= last {
		n++
	}
	s.Truncate(slot, n)
	return n
}
