package speculative

import (
	"context"
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/logits"
)

// draftStream separates a request's draft draws from its target draws.
const draftStream = 0x6472616674

// DraftModel is transformers' AssistedCandidateGenerator: a smaller model
// over the same vocabulary drafts the candidates one token at a time, with
// the request's processors and its choice (argmax, or a draw when the
// config samples), all rows of a step in one Eval per drafted token. A row
// drafts num_assistant_tokens candidates (adapted by the heuristic
// schedules) and stops after an EOS token or a token whose draft probability
// is below assistant_confidence_threshold. The draft's slot keeps the
// sequence's evaluated prefix between steps; Settle truncates it to what the
// sequence kept.
type DraftModel struct {
	b         backend.Backend
	feeds     []backend.Feed
	rows      []*Sequence
	next      []*Sequence
	one       []int32 // the last drafted token of each row, fed next
	heuristic int     // draft length carried between calls by "heuristic"
}

// length returns the draft length of s for this step.
func (g *DraftModel) length(s *Sequence) int {
	if s.numAssist == 0 {
		s.numAssist = s.cfg.NumAssistantTokens
		if s.cfg.NumAssistantTokensSchedule == genconfig.ScheduleHeuristic && g.heuristic > 0 {
			s.numAssist = g.heuristic
		}
	}
	return s.numAssist
}

// Propose implements CandidateGenerator.
func (g *DraftModel) Propose(ctx context.Context, seqs []*Sequence) error {
	g.feeds, g.rows = g.feeds[:0], g.rows[:0]
	for _, s := range seqs {
		s.SetCandidates(nil, nil)
		s.q = s.q[:0]
		toks := s.Tokens()
		k := min(g.length(s), s.maxCand)
		// The draft's slot needs the unevaluated rest of the sequence and
		// every candidate but the last.
		feed := toks[s.dlen:]
		k = min(k, g.b.Room(s.slot)-len(feed)+1)
		if k < 1 || len(feed) == 0 {
			continue
		}
		if s.dhist == nil {
			s.dhist = s.hist.Clone()
		} else {
			s.dhist.CopyFrom(s.hist)
		}
		s.maxCand = k
		g.feeds = append(g.feeds, backend.Feed{Slot: s.slot, Tokens: feed})
		g.rows = append(g.rows, s)
	}
	if cap(g.one) < len(g.rows) {
		g.one = make([]int32, len(g.rows))
	}
	for len(g.feeds) > 0 {
		if err := g.b.Eval(ctx, g.feeds); err != nil {
			for _, s := range g.rows {
				s.dlen = 0 // undefined after a failed Eval: cleared by Release
			}
			return fmt.Errorf("draft model: %w", err)
		}
		g.next = g.next[:0]
		nf := 0
		for i, s := range g.rows {
			s.dlen += len(g.feeds[i].Tokens)
			scores := g.b.Logits(i)
			s.pipe.Process(s.dhist, scores)
			t, err := s.choose.Choose(s.dhist, scores, &s.dsrc)
			if err != nil {
				continue // no candidate from this row: the target decides
			}
			tok := int32(t)
			var p float32
			if s.sampling {
				n := len(s.q)
				s.q = append(s.q, scores...)
				logits.Softmax(s.q[n:], s.q[n:])
				p = s.q[n+t]
			} else if s.cfg.AssistantConfidenceThreshold > 0 {
				p = probOf(scores, t)
			}
			s.cand = append(s.cand, tok)
			s.dhist.Accept(tok)
			if len(s.cand) >= s.maxCand || s.isEOS(tok) ||
				(s.cfg.AssistantConfidenceThreshold > 0 && float64(p) < s.cfg.AssistantConfidenceThreshold) {
				continue
			}
			g.one[nf] = tok
			g.feeds[nf] = backend.Feed{Slot: s.slot, Tokens: g.one[nf : nf+1]}
			g.next = append(g.next, s)
			nf++
		}
		g.feeds = g.feeds[:nf]
		g.rows, g.next = g.next, g.rows
	}
	for _, s := range seqs {
		s.hasQ = s.sampling && len(s.cand) > 0
	}
	return nil
}

// probOf is softmax(scores)[t], accumulated in float64.
func probOf(scores []float32, t int) float32 {
	m := float32(math.Inf(-1))
	for _, x := range scores {
		m = max(m, x)
	}
	var sum float64
	for _, x := range scores {
		sum += math.Exp(float64(x - m))
	}
	return float32(math.Exp(float64(scores[t]-m)) / sum)
}

// Settle implements CandidateGenerator: the draft's slot keeps the prefix it
// shares with the sequence, which holds every candidate fed to the draft
// up to the first rejected one.
func (g *DraftModel) Settle(seqs []*Sequence) error {
	for _, s := range seqs {
		keep := min(s.dlen, s.base+s.accepted)
		if keep < s.dlen {
			if err := g.b.Truncate(s.slot, keep); err != nil {
				return fmt.Errorf("draft model: %w", err)
			}
			s.dlen = keep
		}
		if s.cfg.NumAssistantTokensSchedule != genconfig.ScheduleConstant {
			// AssistedCandidateGenerator.update_candidate_strategy: a step
			// without candidates counts as all accepted, as there.
			if s.accepted == len(s.cand) {
				s.numAssist += 2
			} else {
				s.numAssist = max(1, s.numAssist-1)
			}
		}
	}
	return nil
}

// Release implements CandidateGenerator: the draft's slot is emptied.
func (g *DraftModel) Release(s *Sequence) error {
	if s.cfg.NumAssistantTokensSchedule == genconfig.ScheduleHeuristic && s.numAssist > 0 {
		g.heuristic = s.numAssist
	}
	s.dlen = 0
	return g.b.Clear(s.slot)
}
