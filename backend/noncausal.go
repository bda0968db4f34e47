package backend

import "fmt"

// Span is the run of positions [Start, End).
type Span struct{ Start, End int }

// Len is the number of positions of the run.
func (s Span) Len() int { return s.End - s.Start }

// NonCausalInput is an optional interface of an EmbeddingInput backend
// that evaluates runs of input embeddings with causal attention off
// (Feed.NonCausal): every position of a run attends to every other one of
// the run, later ones included, and to the slot's history before it, as
// llama.cpp's mtmd helper decodes the embeddings of a Gemma 3 image. What
// comes after a run, in the same feed or later, attends causally as ever.
// Package generation refuses a request with such runs on a backend
// without it.
type NonCausalInput interface {
	EmbeddingInput

	// MaxNonCausal is the longest run the backend evaluates: a run is
	// evaluated whole, in one piece (llama.cpp: one micro-batch, so
	// n_ubatch positions).
	MaxNonCausal() int
}

// CheckNonCausal checks runs against embd, the embeddings of their
// positions: each run non-empty, inside embd, of embeddings only
// (non-nil entries), at most limit long, and the runs in order without
// overlapping. Its errors wrap ErrBadEmbedding and name the run and the
// bound.
func CheckNonCausal(runs []Span, embd [][]float32, limit int) error {
	end := 0
	for i, s := range runs {
		switch {
		case s.Start < end || s.End <= s.Start || s.End > len(embd):
			return fmt.Errorf("%w: non-causal run %d [%d, %d) is empty, overlaps the run before or leaves the %d positions",
				ErrBadEmbedding, i, s.Start, s.End, len(embd))
		case s.Len() > limit:
			return fmt.Errorf("%w: non-causal run %d [%d, %d) of %d positions is over the backend's bound of %d (a run is evaluated in one piece)",
				ErrBadEmbedding, i, s.Start, s.End, s.Len(), limit)
		}
		for j := s.Start; j < s.End; j++ {
			if embd[j] == nil {
				return fmt.Errorf("%w: non-causal run %d [%d, %d) holds a token at %d: a run is of embeddings only",
					ErrBadEmbedding, i, s.Start, s.End, j)
			}
		}
		end = s.End
	}
	return nil
}
