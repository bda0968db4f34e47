package refbackend

import (
	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
)

// InputEmbeddingSize implements backend.EmbeddingInput: the reference
// evaluates an input embedding in place of a token's embedding row, in
// float64 (the float32 values widened exactly).
func (b *Backend) InputEmbeddingSize() int { return b.model.NEmbd }

// eval evaluates feeds[i] on its slot and returns every position's logits.
func (b *Backend) eval(feeds []backend.Feed, i int) ([][]float64, error) {
	f := feeds[i]
	if f.Embd == nil {
		return b.seqs[f.Slot].Eval(f.Tokens)
	}
	if err := backend.CheckEmbd(feeds, i, b.model.NEmbd); err != nil {
		return nil, err
	}
	in := make([]reference.Input, len(f.Tokens))
	for j, t := range f.Tokens {
		in[j].Token = t
		if e := f.Embd[j]; e != nil {
			in[j].Embd = make([]float64, len(e))
			for k, v := range e {
				in[j].Embd[k] = float64(v)
			}
		}
	}
	logits, _, err := b.seqs[f.Slot].EvalInputs(in)
	return logits, err
}

var _ backend.EmbeddingInput = (*Backend)(nil)
