package llamabackend

import (
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// Input embeddings (backend.EmbeddingInput): llama.cpp decodes a batch of
// tokens or of embeddings, so Eval and EvalAll end a decode wherever a run
// of one kind meets the other; feeds without embeddings decode as before.

// InputEmbeddingSize implements backend.EmbeddingInput: the model's input
// width.
func (b *Backend) InputEmbeddingSize() int { return b.ctx.Model().InputEmbeddingSize() }

// checkEmbd checks feeds[i].Embd, wrapping backend.ErrBadEmbedding and
// llamacpp.ErrInvalidArgument.
func (b *Backend) checkEmbd(feeds []backend.Feed, i int) error {
	if feeds[i].Embd == nil {
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
