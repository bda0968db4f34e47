package llamabackend

import (
	"context"

	"github.com/llamaloop/llamaloop/backend"
)

// EvalAll implements backend.AllLogits: every token of every feed is added
// to llama.cpp's batch with its output flag set, and after each
// llama_decode the rows it produced are copied into one buffer of the
// backend (a later decode of the same call would overwrite llama.cpp's).
// Asking for every position costs llama.cpp one output row per token, so
// EvalAll is meant for short feeds: the drafts that speculative decoding
// verifies.
func (b *Backend) EvalAll(ctx context.Context, feeds []backend.Feed) error {
	b.allOff = b.allOff[:0]
	total, err := b.checkFeeds(feeds)
	if err != nil {
		return err
	}
	if b.enc != nil {
		if err := b.prepareEncoder(ctx, feeds); err != nil {
			return err
		}
	}
	if feeds, err = b.inSlotOrder(feeds); err != nil {
		return err
	}
	defer clear(b.sorted) // the caller's tokens
	nv := b.VocabSize()
	if cap(b.all) < total*nv {
		b.all = make([]float32, total*nv)
	}
	b.all = b.all[:total*nv]
	b.grow(len(feeds))
	if b.invariant {
		off := 0
		for _, f := range feeds {
			b.allOff = append(b.allOff, off)
			off += len(f.Tokens)
		}
		if err := b.evalInvariant(ctx, feeds, true); err != nil {
			b.allOff = b.allOff[:0]
			return err
		}
		b.allViews(feeds)
		return nil
	}
	b.batch.Clear()
	done, base := 0, 0 // tokens added; row index of the batch's first token
	for _, f := range feeds {
		next := b.pos.Next(f.Slot, b.lens[f.Slot])
		b.allOff = append(b.allOff, done)
		runs := f.NonCausal
		for j := 0; j < len(f.Tokens); j++ {
			e := backend.EmbdAt(f, j)
			run := len(runs) > 0 && runs[0].Start == j
			if b.batch.Len() > 0 && (run || b.batch.Len() == b.batch.Cap() || b.switches(e)) {
				if err := b.decodeAll(ctx, feeds, base, false); err != nil {
					return err
				}
				base = done
			}
			if run {
				// a non-causal run: a decode of its own
				for ; j < runs[0].End; j++ {
					if _, err := b.add(f.Tokens[j], f.Embd[j], backend.PosAt(f, next, j), int32(f.Slot), true); err != nil {
						return err
					}
					done++
				}
				if err := b.decodeAll(ctx, feeds, base, true); err != nil {
					return err
				}
				base, runs = done, runs[1:]
				j--
				continue
			}
			if _, err := b.add(f.Tokens[j], e, backend.PosAt(f, next, j), int32(f.Slot), true); err != nil {
				return err
			}
			done++
		}
		b.advance(f)
	}
	if b.batch.Len() > 0 {
		if err := b.decodeAll(ctx, feeds, base, false); err != nil {
			return err
		}
	}
	b.allViews(feeds)
	return nil
}

// allViews points each feed's Logits at the row of its last token in b.all.
func (b *Backend) allViews(feeds []backend.Feed) {
	nv := b.VocabSize()
	for i, f := range feeds {
		k := b.allOff[i] + len(f.Tokens) - 1
		b.views[i] = b.all[k*nv : (k+1)*nv]
	}
}

// decodeAll runs the batch, with causal attention off when nonCausal, and
// copies every row it produced to all, from row base on.
func (b *Backend) decodeAll(ctx context.Context, feeds []backend.Feed, base int, nonCausal bool) error {
	decode := b.ctx.Decode
	if nonCausal {
		decode = b.ctx.DecodeNonCausal
	}
	if err := decode(ctx, b.batch); err != nil {
		b.allOff = b.allOff[:0]
		b.resync(feeds)
		return b.decodeError(err)
	}
	nv := b.VocabSize()
	for k := range b.batch.Len() {
		row, err := b.ctx.Logits(k)
		if err != nil {
			b.allOff = b.allOff[:0]
			return err
		}
		copy(b.all[(base+k)*nv:], row)
	}
	b.batch.Clear()
	return nil
}

// LogitsAt implements backend.AllLogits.
func (b *Backend) LogitsAt(i, j int) []float32 {
	if i < 0 || i >= len(b.allOff) || j < 0 {
		return nil
	}
	i = b.place(i)
	nv := b.VocabSize()
	end := len(b.all) / nv
	if i+1 < len(b.allOff) {
		end = b.allOff[i+1]
	}
	k := b.allOff[i] + j
	if k >= end {
		return nil
	}
	return b.all[k*nv : (k+1)*nv]
}

var _ backend.AllLogits = (*Backend)(nil)
