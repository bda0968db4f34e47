package refbackend

import (
	"fmt"
	"math"
	"slices"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
)

// InputEmbeddingSize implements backend.EmbeddingInput: the reference
// evaluates an input embedding in place of a token's embedding row, in
// float64 (the float32 values widened exactly).
func (b *Backend) InputEmbeddingSize() int { return b.model.NEmbd }

// MRoPE implements backend.PositionInput: whether the reference model
// rotates by multi-position RoPE (qwen2vl).
func (b *Backend) MRoPE() bool { return b.model.RopeSections != [4]int{} }

// MaxNonCausal implements backend.NonCausalInput: the reference evaluates
// a non-causal run of any length (reference.Sequence.EvalNonCausal).
func (b *Backend) MaxNonCausal() int { return math.MaxInt }

// eval evaluates feeds[i] on its slot, at the positions it gives or that
// continue the slot's, its non-causal runs each with attention both ways,
// and returns every position's logits.
func (b *Backend) eval(feeds []backend.Feed, i int) ([][]float64, error) {
	f := feeds[i]
	seq := b.seqs[f.Slot]
	if f.Embd != nil {
		if err := backend.CheckEmbd(feeds, i, b.model.NEmbd); err != nil {
			return nil, err
		}
	}
	if f.Pos != nil && !b.MRoPE() {
		return nil, fmt.Errorf("%w: feed %d: the model has one position per input", backend.ErrBadPosition, i)
	}
	if f.Pos != nil && f.NonCausal != nil {
		return nil, fmt.Errorf("%w: feed %d: the reference takes no positions beside non-causal runs", backend.ErrBadPosition, i)
	}
	if err := b.pos.Check(f, seq.Len()); err != nil {
		return nil, err
	}
	if err := backend.CheckNonCausal(f.NonCausal, f.Embd, b.MaxNonCausal()); err != nil {
		return nil, err
	}
	in := make([]reference.Input, len(f.Tokens))
	pos := make([][4]int, len(f.Tokens))
	next := b.pos.Next(f.Slot, seq.Len())
	for j, t := range f.Tokens {
		in[j].Token = t
		if e := backend.EmbdAt(f, j); e != nil {
			in[j].Embd = make([]float64, len(e))
			for k, v := range e {
				in[j].Embd[k] = float64(v)
			}
		}
		p := backend.PosAt(f, next, j)
		pos[j] = [4]int{int(p.T), int(p.H), int(p.W), 0}
	}
	length := seq.Len()
	var logits [][]float64
	if f.NonCausal == nil {
		l, _, err := seq.EvalInputsAt(in, pos)
		if err != nil {
			return nil, err
		}
		logits = l
	} else {
		// the inputs between runs causally, each run non-causally
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
	}
	b.pos.Append(f, length)
	return logits, nil
}

var (
	_ backend.EmbeddingInput = (*Backend)(nil)
	_ backend.PositionInput  = (*Backend)(nil)
	_ backend.NonCausalInput = (*Backend)(nil)
)
