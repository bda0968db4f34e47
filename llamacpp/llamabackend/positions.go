package llamabackend

import (
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// Positions (backend.PositionInput): a model with multi-position RoPE
// (Qwen2-VL) takes an image's embeddings at the positions a feed gives;
// the slot then continues from the position after the image, which
// b.pos keeps per slot with each token's position, for Truncate.

// MRoPE implements backend.PositionInput: whether the model rotates by
// multi-position RoPE.
func (b *Backend) MRoPE() bool { return b.mrope }

// checkPos checks feeds[i].Pos against the model and its slot, wrapping
// backend.ErrBadPosition and llamacpp.ErrInvalidArgument. A model with
// M-RoPE takes embeddings only with positions: one position per
// embedding would put an image's patches on a line.
func (b *Backend) checkPos(feeds []backend.Feed, i int) error {
	f := feeds[i]
	if f.Pos == nil {
		if b.mrope && f.Embd != nil {
			for j, e := range f.Embd {
				if e != nil {
					return fmt.Errorf("%w: %w: feed %d: the embedding at %d has no position: a model with M-RoPE takes embeddings with positions (Feed.Pos)",
						llamacpp.ErrInvalidArgument, backend.ErrBadPosition, i, j)
				}
			}
		}
		return nil
	}
	switch {
	case !b.mrope:
		return fmt.Errorf("%w: %w: feed %d has positions; the model takes one position per input (no M-RoPE)", llamacpp.ErrInvalidArgument, backend.ErrBadPosition, i)
	case b.invariant:
		return fmt.Errorf("%w: %w: feed %d: positions in a batch-invariant context", llamacpp.ErrInvalidArgument, backend.ErrBadPosition, i)
	}
	if err := b.pos.Check(f, b.lens[f.Slot]); err != nil {
		return fmt.Errorf("%w: feed %d: %w", llamacpp.ErrInvalidArgument, i, err)
	}
	return nil
}

// advance records f, added to the batch, in its slot's length and
// positions.
func (b *Backend) advance(f backend.Feed) {
	b.pos.Append(f, b.lens[f.Slot])
	b.lens[f.Slot] += len(f.Tokens)
}
