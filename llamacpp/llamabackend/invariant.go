package llamabackend

import (
	"context"

	"github.com/llamaloop/llamaloop/backend"
)

// Batch-invariant evaluation. llama.cpp's CPU kernels compute a row with
// arithmetic that depends on the shape of the decode holding it: a matrix
// product of one row takes ggml's vec_dot path, one of two rows or more
// llamafile's tinyBLAS, whose sums run in another order (the same order for
// every row count from two on); so does attention's product with V, by the
// number of tokens a sequence has in the micro-batch; the last layer's
// feed-forward runs on the output rows only; and which sequences share a
// micro-batch follows from which slots are busy (llama.cpp groups sequences
// with consecutive ids). On a multi-layer model those roundings grow into
// other samples. In a context made with ContextParams.BatchInvariant,
// Eval and EvalAll therefore give every row one shape, whatever else is
// decoded and however a prompt is chunked:
//
//   - a feed of one token (a decoding step) is decoded beside its twin, the
//     same token one position further in the same sequence, whose logits
//     are requested too and whose cell is removed afterwards; causal
//     masking keeps the twin out of the real token's attention;
//   - a feed of several tokens (a prompt chunk, a draft) is decoded in
//     decodes of its own, each within one micro-batch and of at least two
//     tokens, with the logits of its last two tokens requested;
//
// so every product has two rows or more, every sequence two tokens or more
// in its micro-batch, and every decode no output or two or more. With a KV
// stream per sequence (the default, not UnifiedKV) a sequence's cells also
// sit at the same indices as alone, and its logits are bit-identical
// whatever shares its decodes (TestBatchInvarianceMultiLayer). The twin
// costs one cell of Room and one row per step.

// twinRoom is the cell a step's twin needs beyond the sequence's tokens.
func (b *Backend) twinRoom() int {
	if b.invariant {
		return 1
	}
	return 0
}

// evalInvariant is Eval (all false) or EvalAll (all true) in a
// batch-invariant context. EvalAll's rows are copied to b.all at the
// offsets b.allOff holds.
func (b *Backend) evalInvariant(ctx context.Context, feeds []backend.Feed, all bool) error {
	lastMulti, steps := -1, 0
	for i, f := range feeds {
		b.last[i] = -1
		if len(f.Tokens) == 1 {
			steps++
		} else {
			lastMulti = i
		}
	}
	piece := min(b.batch.Cap(), b.ctx.MicroBatchSize())
	for i, f := range feeds {
		if len(f.Tokens) == 1 {
			continue
		}
		pos := int32(b.lens[f.Slot])
		for from := 0; from < len(f.Tokens); {
			n := min(piece, len(f.Tokens)-from)
			if rest := len(f.Tokens) - from - n; rest == 1 {
				n-- // leave two tokens, not one, for the last piece
			}
			b.batch.Clear()
			for j := from; j < from+n; j++ {
				out := all || j >= len(f.Tokens)-2
				k, _ := b.batch.Add(f.Tokens[j], pos+int32(j), int32(f.Slot), out)
				if j == len(f.Tokens)-1 {
					b.last[i] = k
				}
			}
			from += n
			b.lens[f.Slot] = int(pos) + from
			var err error
			if all {
				err = b.decodeAll(ctx, feeds, b.allOff[i]+from-n, false)
			} else {
				err = b.decode(ctx, feeds, i, i+1, steps > 0 || i < lastMulti)
			}
			if err != nil {
				return err
			}
		}
	}
	if steps == 0 {
		return nil
	}
	// Steps: each beside its twin, as many pairs per decode as n_batch holds.
	b.batch.Clear()
	first := 0
	for i, f := range feeds {
		if len(f.Tokens) != 1 {
			continue
		}
		if b.batch.Cap()-b.batch.Len() < 2 {
			if err := b.decodeSteps(ctx, feeds, first, i, true, all); err != nil {
				return err
			}
			first = i
		}
		pos := int32(b.lens[f.Slot])
		k, _ := b.batch.Add(f.Tokens[0], pos, int32(f.Slot), true)
		b.batch.Add(f.Tokens[0], pos+1, int32(f.Slot), true)
		b.last[i] = k
		b.lens[f.Slot]++
	}
	return b.decodeSteps(ctx, feeds, first, len(feeds), false, all)
}

// decodeSteps decodes a batch of steps and their twins, removes the twins'
// cells (also when the decode fails, before resync reads the lengths) and
// collects the steps' rows of feeds[from:to]: views, or EvalAll's rows in
// b.all.
func (b *Backend) decodeSteps(ctx context.Context, feeds []backend.Feed, from, to int, more, all bool) error {
	err := b.ctx.Decode(ctx, b.batch)
	for _, f := range feeds[from:to] {
		if len(f.Tokens) == 1 {
			// the twin sits at the position after the step's, lens[slot]
			if rmErr := b.ctx.SeqRemove(int32(f.Slot), int32(b.lens[f.Slot]), -1); rmErr != nil && err == nil {
				err = rmErr
			}
		}
	}
	if err != nil {
		b.resync(feeds)
		return b.decodeError(err)
	}
	if !all {
		b.collect(feeds[:to], from, to, more)
		return nil
	}
	nv := b.VocabSize()
	for i := from; i < to; i++ {
		if len(feeds[i].Tokens) != 1 {
			continue
		}
		row, err := b.ctx.Logits(b.last[i])
		if err != nil {
			return err
		}
		copy(b.all[b.allOff[i]*nv:], row)
	}
	b.batch.Clear()
	return nil
}
