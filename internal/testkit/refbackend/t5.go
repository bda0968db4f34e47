package refbackend

import (
	"context"
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
)

// T5 implements backend.Backend and backend.Encoder over decoder sequences
// of the float64 reference T5; logits are rounded to float32. A slot
// without an encoder output is nil.
type T5 struct {
	model   *reference.T5
	seqs    []*reference.T5Sequence
	rows    [][]float32
	encodes int
}

// NewT5 returns a backend with slots empty slots over model.
func NewT5(model *reference.T5, slots int) *T5 {
	return &T5{model: model, seqs: make([]*reference.T5Sequence, slots)}
}

// EncoderRuns is how many encoder inputs Encode has evaluated.
func (b *T5) EncoderRuns() int { return b.encodes }

// VocabSize implements backend.Backend.
func (b *T5) VocabSize() int { return b.model.NVocab }

// Slots implements backend.Backend.
func (b *T5) Slots() int { return len(b.seqs) }

// Room implements backend.Backend: the reference has no limit.
func (b *T5) Room(int) int { return math.MaxInt }

// DecoderStart implements backend.Encoder.
func (b *T5) DecoderStart() int32 { return b.model.DecoderStart }

// Encode implements backend.Encoder.
func (b *T5) Encode(ctx context.Context, feeds []backend.EncoderFeed) error {
	for _, f := range feeds {
		for _, s := range f.Slots {
			if err := b.check(s); err != nil {
				return err
			}
			if b.seqs[s] != nil && b.seqs[s].Len() > 0 {
				return fmt.Errorf("refbackend: encode into slot %d, which holds %d tokens", s, b.seqs[s].Len())
			}
			b.seqs[s] = nil
		}
	}
	for _, f := range feeds {
		if err := ctx.Err(); err != nil {
			return err
		}
		enc, err := b.model.Encode(f.Tokens)
		if err != nil {
			return err
		}
		b.encodes++
		for _, s := range f.Slots {
			b.seqs[s] = b.model.NewDecoder(enc)
		}
	}
	return nil
}

func (b *T5) check(slot int) error {
	if slot < 0 || slot >= len(b.seqs) {
		return fmt.Errorf("refbackend: slot %d outside [0, %d)", slot, len(b.seqs))
	}
	return nil
}

// Eval implements backend.Backend.
func (b *T5) Eval(ctx context.Context, feeds []backend.Feed) error {
	b.rows = b.rows[:0]
	for _, f := range feeds {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.check(f.Slot); err != nil {
			return err
		}
		if b.seqs[f.Slot] == nil {
			return fmt.Errorf("refbackend: slot %d: %w", f.Slot, backend.ErrNoEncoderOutput)
		}
		out, err := b.seqs[f.Slot].Eval(f.Tokens)
		if err != nil {
			return err
		}
		last := out[len(out)-1]
		row := make([]float32, len(last))
		for k, v := range last {
			row[k] = float32(v)
		}
		b.rows = append(b.rows, row)
	}
	return nil
}

// Logits implements backend.Backend.
func (b *T5) Logits(i int) []float32 { return b.rows[i] }

// Copy implements backend.Backend: dst gets src's encoder output too.
func (b *T5) Copy(dst, src int) error {
	if err := b.check(dst); err != nil {
		return err
	}
	if err := b.check(src); err != nil {
		return err
	}
	if dst != src {
		b.seqs[dst] = nil
		if b.seqs[src] != nil {
			b.seqs[dst] = b.seqs[src].Clone()
		}
	}
	return nil
}

// Truncate implements backend.Backend.
func (b *T5) Truncate(slot, n int) error {
	if err := b.check(slot); err != nil {
		return err
	}
	if b.seqs[slot] == nil {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("refbackend: truncate empty slot %d to %d", slot, n)
	}
	return b.seqs[slot].Truncate(n)
}

// Clear implements backend.Backend: the slot loses its encoder output.
func (b *T5) Clear(slot int) error {
	if err := b.check(slot); err != nil {
		return err
	}
	b.seqs[slot] = nil
	return nil
}

var _ backend.Encoder = (*T5)(nil)
