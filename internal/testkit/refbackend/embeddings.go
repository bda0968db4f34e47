package refbackend

import (
	"math"
	"slices"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
)

// InputEmbeddingSize implements backend.EmbeddingInput: the reference
// evaluates an input embedding in place of a token's embedding row, in
// float64 (the float32 values widened exactly).
func (b *Backend) InputEmbeddingSize() int { return b.model.NEmbd }

// MaxNonCausal implements backend.NonCausalInput: the reference evaluates
// a non-causal run of any length (reference.Sequence.EvalNonCausal).
func (b *Backend) MaxNonCausal() int { return math.MaxInt }

// eval evaluates feeds[i] on its slot and returns every position's logits.
func (b *Backend) eval(feeds []backend.Feed, i int) ([][]float64, error) {
	f := feeds[i]
	if f.Embd == nil && f.NonCausal == nil {
		return b.seqs[f.Slot].Eval(f.Tokens)
	}
	if err := backend.CheckEmbd(feeds, i, b.model.NEmbd); err != nil {
		return nil, err
	}
	if err := backend.CheckNonCausal(f.NonCausal, f.Embd, b.MaxNonCausal()); err != nil {
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
	// the inputs between runs causally, each run non-causally
	seq := b.seqs[f.Slot]
	var logits [][]float64
	from := 0
	for _, r := range append(slices.Clip(f.NonCausal), backend.Span{Start: len(in), End: len(in)}) {
		if r.Start > from {
			l, _, err := seq.EvalInputs(in[from:r.Start])
			if err != nil {
				return nil, err
			}
			logits = append(logits, l...)
		}
		if r.End > r.Start {
			l, _, err := seq.EvalNonCausal(in[r.Start:r.End])
			if err != nil {
				return nil, err
			}
			logits = append(logits, l...)
		}
		from = r.End
	}
	return logits, nil
}

var (
	_ backend.EmbeddingInput = (*Backend)(nil)
	_ backend.NonCausalInput = (*Backend)(nil)
)
