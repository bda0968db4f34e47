// Package refbackend serves the float64 reference forward pass as a
// backend.Backend, so that the decoding loop and beam search can run on
// the reference and on llama.cpp alike and be compared.
package refbackend

import (
	"context"
	"math"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
)

// Backend implements backend.Backend over reference sequences. Logits are
// the reference's float64 values rounded to float32.
type Backend struct {
	model *reference.Model
	vocab int
	seqs  []*reference.Sequence
	rows  [][]float32
	all   [][][]float32 // every position's rows of the last EvalAll
	pos   *backend.SlotPositions
}

// New returns a backend with slots sequences over model.
func New(model *reference.Model, vocab, slots int) *Backend {
	b := &Backend{model: model, vocab: vocab, seqs: make([]*reference.Sequence, slots), pos: backend.NewSlotPositions(slots)}
	for i := range b.seqs {
		b.seqs[i] = model.NewSequence()
	}
	return b
}

// VocabSize implements backend.Backend.
func (b *Backend) VocabSize() int { return b.vocab }

// Slots implements backend.Backend.
func (b *Backend) Slots() int { return len(b.seqs) }

// Room implements backend.Backend: the reference has no limit.
func (b *Backend) Room(slot int) int { return math.MaxInt }

// Eval implements backend.Backend: it is EvalAll, since the reference
// computes every position's logits anyway.
func (b *Backend) Eval(ctx context.Context, feeds []backend.Feed) error { return b.EvalAll(ctx, feeds) }

// Logits implements backend.Backend.
func (b *Backend) Logits(i int) []float32 { return b.rows[i] }

// Copy implements backend.Backend.
func (b *Backend) Copy(dst, src int) error {
	if dst != src {
		b.seqs[dst] = b.seqs[src].Clone()
		b.pos.Copy(dst, src)
	}
	return nil
}

// Truncate implements backend.Backend; as llama.cpp's, it refuses a cut
// inside an M-RoPE image.
func (b *Backend) Truncate(slot, n int) error {
	if n >= 0 && n < b.seqs[slot].Len() {
		if _, err := b.pos.Cut(slot, n); err != nil {
			return err
		}
	}
	if err := b.seqs[slot].Truncate(n); err != nil {
		return err
	}
	b.pos.Truncate(slot, n)
	return nil
}

// Clear implements backend.Backend.
func (b *Backend) Clear(slot int) error {
	b.seqs[slot] = b.model.NewSequence()
	b.pos.Clear(slot)
	return nil
}
