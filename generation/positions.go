package generation

import (
	"errors"
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
)

// checkPositions checks req.PromptPositions against its prompt, its
// embeddings and the backend: whole, as the first feed of an empty slot.
func (g *Generator) checkPositions(req *Request) error {
	in, ok := g.backend.(backend.PositionInput)
	mrope := ok && in.MRoPE()
	if req.PromptPositions == nil {
		if mrope && req.PromptEmbeddings != nil {
			return fmt.Errorf("%w: the model has multi-position RoPE (M-RoPE): its PromptEmbeddings need PromptPositions (llamacpp.Prompt.Positions)", backend.ErrBadPosition)
		}
		return nil
	}
	switch {
	case !ok:
		return fmt.Errorf("%w: PromptPositions on a backend without input positions (%T)", backend.ErrBadPosition, g.backend)
	case !mrope:
		return fmt.Errorf("%w: PromptPositions for a model with one position per input (no M-RoPE)", backend.ErrBadPosition)
	case req.Prompt == nil:
		return errors.New("PromptPositions need Prompt: a token per position")
	case len(req.PromptPositions) != len(req.Prompt):
		return fmt.Errorf("%w: %d PromptPositions entries for %d prompt tokens", backend.ErrBadPosition, len(req.PromptPositions), len(req.Prompt))
	}
	if _, err := backend.CheckPositions(req.PromptPositions, req.PromptEmbeddings, 0); err != nil {
		return fmt.Errorf("PromptPositions: %w", err)
	}
	return nil
}

// promptPos is the part of the request's positions that goes with toks,
// the prompt tokens fed next; nil when it has none, or toks are generated
// (the backend continues them from the slot's next position).
func (r *seq) promptPos(toks []int32) []backend.Pos {
	if r.pos == nil || r.nfed >= len(r.pos) {
		return nil
	}
	end := r.nfed + len(toks)
	if end <= len(r.pos) {
		return r.pos[r.nfed:end]
	}
	// A resumed request (Resume) feeds the tokens it had generated with its
	// prompt: they continue after the prompt's largest position.
	next := int32(0)
	for _, p := range r.pos {
		next = max(next, p.T+1, p.H+1, p.W+1)
	}
	out := append(make([]backend.Pos, 0, len(toks)), r.pos[r.nfed:]...)
	for len(out) < len(toks) {
		out = append(out, backend.TextPos(next))
		next++
	}
	return out
}

// withCandidatePos is the Pos of r's feed, whose tokens are at pos, once n
// candidates follow them (the last prompt token of a speculating request
// is fed with its first candidates): text positions continuing after the
// largest of pos, where the backend would continue them; nil when pos is
// (the backend continues the slot's positions).
func (r *seq) withCandidatePos(pos []backend.Pos, n int) []backend.Pos {
	if pos == nil {
		return nil
	}
	next := int32(0)
	for _, p := range pos {
		next = max(next, p.T+1, p.H+1, p.W+1)
	}
	r.feedPos = append(r.feedPos[:0], pos...)
	for range n {
		r.feedPos = append(r.feedPos, backend.TextPos(next))
		next++
	}
	return r.feedPos
}
