package llamabackend

import (
	"context"
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// Input embeddings (backend.EmbeddingInput): llama.cpp decodes a batch of
// tokens or of embeddings, so Eval and EvalAll end a decode wherever a run
// of one kind meets the other; feeds without embeddings decode as before.
// A non-causal run (backend.NonCausalInput) is a decode of its own.

// InputEmbeddingSize implements backend.EmbeddingInput: the model's input
// width.
func (b *Backend) InputEmbeddingSize() int { return b.ctx.Model().InputEmbeddingSize() }

// checkEmbd checks feeds[i].Embd, wrapping backend.ErrBadEmbedding and
// llamacpp.ErrInvalidArgument.
func (b *Backend) checkEmbd(feeds []backend.Feed, i int) error {
	if feeds[i].Embd == nil && feeds[i].NonCausal == nil {
		return nil
	}
	if b.invariant {
		// A run of embeddings among tokens is a decode of its own, and its
		// shape the batch-invariant rules do not cover yet.
		return fmt.Errorf("%w: feed %d: input embeddings in a batch-invariant context", llamacpp.ErrInvalidArgument, i)
	}
	if err := backend.CheckEmbd(feeds, i, b.InputEmbeddingSize()); err != nil {
		return fmt.Errorf("%w: %w", llamacpp.ErrInvalidArgument, err)
	}
	if err := backend.CheckNonCausal(feeds[i].NonCausal, feeds[i].Embd, b.MaxNonCausal()); err != nil {
		return fmt.Errorf("%w: feed %d: %w (llama.cpp's bound: the context's MicroBatchSize, n_ubatch)", llamacpp.ErrInvalidArgument, i, err)
	}
	return nil
}

// MaxNonCausal implements backend.NonCausalInput: the context's
// MicroBatchSize, since llama.cpp attends both ways only within one
// micro-batch.
func (b *Backend) MaxNonCausal() int { return b.ctx.MicroBatchSize() }

// evalNonCausal evaluates positions [j, j+n) of feeds[i], a non-causal
// run, in a decode of their own with causal attention off
// (llamacpp.Context.DecodeNonCausal), after decoding what the batch holds
// (the outputs of feeds[first:i]) at the slot's next position next; more
// says whether decodes follow.
func (b *Backend) evalNonCausal(ctx context.Context, feeds []backend.Feed, first, i, j, n int, next int32, more bool) error {
	if b.batch.Len() > 0 {
		if err := b.decode(ctx, feeds, first, i, true); err != nil {
			return err
		}
	}
	f := feeds[i]
	to := i
	for k := j; k < j+n; k++ {
		isLast := k == len(f.Tokens)-1
		idx, err := b.add(f.Tokens[k], f.Embd[k], backend.PosAt(f, next, k), int32(f.Slot), isLast)
		if err != nil {
			return err
		}
		if isLast {
			b.last[i], to = idx, i+1
		}
	}
	if err := b.ctx.DecodeNonCausal(ctx, b.batch); err != nil {
		b.resync(feeds)
		return b.decodeError(err)
	}
	b.collect(feeds, i, to, more)
	return nil
}

// switches reports whether the batch holds entries of the other kind than
// e (an embedding when not nil, else a token): the batch must be decoded
// first.
func (b *Backend) switches(e []float32) bool {
	return b.batch.Len() > 0 && (e != nil) != b.batch.HoldsEmbeddings()
}

// add adds the token t, or the embedding e in its place, at p: its planes
// with M-RoPE, else its temporal position (a token's planes are equal:
// llama.cpp copies its one position to every plane).
func (b *Backend) add(t int32, e []float32, p backend.Pos, seq int32, output bool) (int, error) {
	switch {
	case e == nil:
		return b.batch.Add(t, p.T, seq, output)
	case b.mrope:
		return b.batch.AddEmbeddingMRoPE(e, p, seq, output)
	}
	return b.batch.AddEmbedding(e, p.T, seq, output)
}
