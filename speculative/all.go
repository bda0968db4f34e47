package speculative

import (
	"context"

	"github.com/llamaloop/llamaloop/backend"
)

// allLogits evaluates feeds keeping every position's logits: through
// backend.AllLogits when the target has it, and otherwise one token per
// feed per Eval, which is correct but as slow as no speculation.
type allLogits interface {
	evalAll(ctx context.Context, feeds []backend.Feed) error
	logitsAt(i, j int) []float32
}

func newAllLogits(b backend.Backend) allLogits {
	if a, ok := b.(backend.AllLogits); ok {
		return native{a}
	}
	return &stepwise{b: b}
}

type native struct{ b backend.AllLogits }

func (n native) evalAll(ctx context.Context, feeds []backend.Feed) error {
	return n.b.EvalAll(ctx, feeds)
}
func (n native) logitsAt(i, j int) []float32 { return n.b.LogitsAt(i, j) }

type stepwise struct {
	b     backend.Backend
	rows  [][]float32 // per feed, its positions' rows one after the other
	feeds []backend.Feed
	of    []int // feed index of each of feeds
}

func (s *stepwise) evalAll(ctx context.Context, feeds []backend.Feed) error {
	nv := s.b.VocabSize()
	for len(s.rows) < len(feeds) {
		s.rows = append(s.rows, nil)
	}
	longest := 0
	for i, f := range feeds {
		s.rows[i] = s.rows[i][:0]
		longest = max(longest, len(f.Tokens))
	}
	for j := range longest {
		s.feeds, s.of = s.feeds[:0], s.of[:0]
		for i, f := range feeds {
			if j < len(f.Tokens) {
				s.feeds = append(s.feeds, backend.Feed{Slot: f.Slot, Tokens: f.Tokens[j : j+1]})
				s.of = append(s.of, i)
			}
		}
		if err := s.b.Eval(ctx, s.feeds); err != nil {
			return err
		}
		for k, i := range s.of {
			s.rows[i] = append(s.rows[i], s.b.Logits(k)[:nv]...)
		}
	}
	return nil
}

func (s *stepwise) logitsAt(i, j int) []float32 {
	nv := s.b.VocabSize()
	return s.rows[i][j*nv : (j+1)*nv]
}
