package speculative

import (
	"context"
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/logits"
)

// draftStream separates a sequence's draft draws from its target draws.
const draftStream = 0x6472616674

// Draft is transformers' AssistedCandidateGenerator: a smaller model over
// the same vocabulary drafts the candidates one token at a time, with the
// sequence's processors and its choice (argmax, or a draw when the config
// samples), every sequence of a step in one Eval per drafted token. A
// sequence drafts num_assistant_tokens candidates (adapted by the heuristic
// schedules) and stops after an EOS token or a token whose draft
// probability is below assistant_confidence_threshold. Its slot i drafts
// for the target's slot i and keeps the sequence's evaluated prefix between
// steps. A Draft is not safe for concurrent use, and neither is its backend.
type Draft struct {
	b         backend.Backend
	feeds     []backend.Feed
	rows      []*Proposal
	next      []*Proposal
	one       []int32 // the last drafted token of each sequence, fed next
	heuristic int     // draft length carried between sequences by "heuristic"
}

// NewDraft returns the draft model b for a target of vocab tokens.
func NewDraft(b backend.Backend, vocab int) (*Draft, error) {
	if b.VocabSize() != vocab {
		return nil, fmt.Errorf("speculative: the draft model's vocabulary has %d tokens, the target's %d", b.VocabSize(), vocab)
	}
	return &Draft{b: b}, nil
}

// Slots is the number of the draft model's slots: a target slot beyond
// them cannot be drafted for.
func (d *Draft) Slots() int { return d.b.Slots() }

// Proposal is one sequence's candidates for a step, and what the draft
// model keeps of it between steps. Its zero value is a sequence that has
// not started; Start readies it.
type Proposal struct {
	// Tokens are the step's candidates.
	Tokens []int32
	// Probs holds, when the config samples, the draft distribution each
	// candidate was drawn from: one vocabulary row per candidate (for
	// Accept).
	Probs []float32

	cfg       *genconfig.Config
	pipe      *logits.Pipeline
	eos       []int32
	slot      int
	dlen      int // tokens in the draft's slot, a prefix of the sequence
	hist      *logits.History
	src       logits.Source
	numAssist int // the draft length of the heuristic schedules
	limit     int // most candidates of the step
	base      int // length of the sequence when the candidates were drafted
}

// Start readies p for a sequence in slot whose target runs pipe for cfg,
// stops at eos and draws with seed.
func (p *Proposal) Start(slot int, cfg *genconfig.Config, pipe *logits.Pipeline, eos []int32, seed uint64) {
	p.cfg, p.pipe, p.eos, p.slot, p.dlen, p.numAssist = cfg, pipe, eos, slot, 0, 0
	p.src.Seed(seed ^ draftStream)
	p.Tokens, p.Probs = p.Tokens[:0], p.Probs[:0]
}

// Propose drafts the candidates of every proposal of ps, at most limits[i]
// for ps[i], after hists[i], the target's history of its sequence (its
// tokens and the states of its processors, which the draft copies).
func (d *Draft) Propose(ctx context.Context, ps []*Proposal, hists []*logits.History, limits []int) error {
	d.feeds, d.rows = d.feeds[:0], d.rows[:0]
	for i, p := range ps {
		p.Tokens, p.Probs = p.Tokens[:0], p.Probs[:0]
		toks := hists[i].Tokens()
		p.base = len(toks)
		// The draft's slot needs the unevaluated rest of the sequence and
		// every candidate but the last.
		feed := toks[p.dlen:]
		p.limit = min(d.length(p), limits[i], d.b.Room(p.slot)-len(feed)+1)
		if p.limit < 1 || len(feed) == 0 {
			continue
		}
		if p.hist == nil {
			p.hist = hists[i].Clone()
		} else {
			p.hist.CopyFrom(hists[i])
		}
		d.feeds = append(d.feeds, backend.Feed{Slot: p.slot, Tokens: feed})
		d.rows = append(d.rows, p)
	}
	if cap(d.one) < len(d.rows) {
		d.one = make([]int32, len(d.rows))
	}
	for len(d.feeds) > 0 {
		if err := d.b.Eval(ctx, d.feeds); err != nil {
			for _, p := range d.rows {
				p.dlen = 0 // undefined after a failed Eval: cleared by Release
			}
			return fmt.Errorf("draft model: %w", err)
		}
		d.next = d.next[:0]
		for i, p := range d.rows {
			p.dlen += len(d.feeds[i].Tokens)
			if tok, more := p.draft(d.b.Logits(i)); more {
				d.one[len(d.next)] = tok
				d.feeds[len(d.next)] = backend.Feed{Slot: p.slot, Tokens: d.one[len(d.next) : len(d.next)+1]}
				d.next = append(d.next, p)
			}
		}
		d.feeds = d.feeds[:len(d.next)]
		d.rows, d.next = d.next, d.rows
	}
	return nil
}

// draft chooses p's next candidate from the draft's scores; more reports
// whether p drafts another.
func (p *Proposal) draft(scores []float32) (tok int32, more bool) {
	p.pipe.Process(p.hist, scores)
	t, err := p.pipe.Chooser().Choose(p.hist, scores, &p.src)
	if err != nil {
		return 0, false // no candidate from this row: the target decides
	}
	tok = int32(t)
	var prob float32
	if p.cfg.DoSample {
		n := len(p.Probs)
		p.Probs = append(p.Probs, scores...)
		logits.Softmax(p.Probs[n:], p.Probs[n:])
		prob = p.Probs[n+t]
	} else if p.cfg.AssistantConfidenceThreshold > 0 {
		prob = probOf(scores, t)
	}
	p.Tokens = append(p.Tokens, tok)
	p.hist.Accept(tok)
	stop := len(p.Tokens) >= p.limit || contains(p.eos, tok) ||
		(p.cfg.AssistantConfidenceThreshold > 0 && float64(prob) < p.cfg.AssistantConfidenceThreshold)
	return tok, !stop
}

// length returns the draft length of p for this step.
func (d *Draft) length(p *Proposal) int {
	if p.numAssist == 0 {
		p.numAssist = p.cfg.NumAssistantTokens
		if p.cfg.NumAssistantTokensSchedule == genconfig.ScheduleHeuristic && d.heuristic > 0 {
			p.numAssist = d.heuristic
		}
	}
	return p.numAssist
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

// Settle follows the verification of p's candidates, of which the target
// kept the first accepted: the draft's slot keeps the prefix it shares with
// the sequence, which holds every candidate fed to the draft up to the
// first rejected one.
func (d *Draft) Settle(p *Proposal, accepted int) error {
	if keep := min(p.dlen, p.base+accepted); keep < p.dlen {
		if err := d.b.Truncate(p.slot, keep); err != nil {
			return fmt.Errorf("draft model: %w", err)
		}
		p.dlen = keep
	}
	if p.cfg.NumAssistantTokensSchedule != genconfig.ScheduleConstant {
		// AssistedCandidateGenerator.update_candidate_strategy: a step
		// without candidates counts as all accepted, as there.
		if accepted == len(p.Tokens) {
			p.numAssist += 2
		} else {
			p.numAssist = max(1, p.numAssist-1)
		}
	}
	return nil
}

// Release empties the draft's slot of p, once its sequence has ended.
func (d *Draft) Release(p *Proposal) error {
	if p.cfg != nil && p.cfg.NumAssistantTokensSchedule == genconfig.ScheduleHeuristic && p.numAssist > 0 {
		d.heuristic = p.numAssist
	}
	p.dlen, p.cfg, p.pipe, p.hist = 0, nil, nil, nil
	return d.b.Clear(p.slot)
}

func contains(s []int32, t int32) bool {
	for _, x := range s {
		if x == t {
			return true
		}
	}
	return false
}
