package llamabackend

import (
	"fmt"

	"github.com/llamaloop/llamaloop/llamacpp"
)

// SaveSlot returns the KV-cache state of slot (llamacpp.Context.SeqState):
// what LoadSlot needs to give a slot of a context with the same model and
// parameters the same history without evaluating it.
func (b *Backend) SaveSlot(slot int) ([]byte, error) {
	if err := b.checkSlot(slot); err != nil {
		return nil, err
	}
	return b.ctx.SeqState(int32(slot))
}

// LoadSlot restores into the empty slot a state that SaveSlot returned for
// a history of n tokens. On any error the slot stays empty.
func (b *Backend) LoadSlot(slot int, state []byte, n int) error {
	if err := b.checkSlot(slot); err != nil {
		return err
	}
	if b.lens[slot] != 0 {
		return fmt.Errorf("%w: slot %d holds %d tokens: load into an empty slot", llamacpp.ErrInvalidArgument, slot, b.lens[slot])
	}
	if n < 1 || n > b.ctx.SequenceSize() {
		return fmt.Errorf("%w: a state of %d tokens for a slot of %d cells", llamacpp.ErrInvalidArgument, n, b.ctx.SequenceSize())
	}
	if err := b.ctx.SetSeqState(int32(slot), state); err != nil {
		return err
	}
	lo, _ := b.ctx.SeqPosMin(int32(slot))
	hi, _ := b.ctx.SeqPosMax(int32(slot))
	if lo != 0 || int(hi) != n-1 {
		b.ctx.SeqRemove(int32(slot), -1, -1)
		return fmt.Errorf("%w: the state holds positions %d to %d, not the %d tokens given", llamacpp.ErrState, lo, hi, n)
	}
	b.lens[slot] = n
	return nil
}
