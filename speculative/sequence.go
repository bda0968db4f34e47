package speculative

import (
	"context"
	"slices"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/logits"
)

// A CandidateGenerator proposes the tokens that the target is expected to
// produce next, for a batch of sequences at once: DraftModel (assisted
// generation) and PromptLookup are transformers' two.
type CandidateGenerator interface {
	// Propose sets the candidates of every sequence in seqs with
	// Sequence.SetCandidates: at most Sequence.MaxCandidates tokens expected
	// after Sequence.Tokens, possibly none.
	Propose(ctx context.Context, seqs []*Sequence) error
	// Settle follows the verification of the candidates: Sequence.Tokens
	// now ends with the accepted ones and the target's token, and the
	// generator forgets whatever it drafted beyond them.
	Settle(seqs []*Sequence) error
	// Release is called once a sequence has ended, before its slot serves
	// another.
	Release(s *Sequence) error
}

// Sequence is one request while it runs: what a CandidateGenerator sees of
// it.
type Sequence struct {
	index     int
	prompt    []int32
	cfg       *genconfig.Config
	pipe      *logits.Pipeline
	hist      *logits.History // the target's processors; Tokens() is the sequence
	choose    logits.Chooser
	sampling  bool
	src       logits.Source
	eos       []int32
	maxLength int
	gen       CandidateGenerator
	slot      int
	dropped   bool // out of the batch, its slots emptied

	// One step's candidates, and the draft's probabilities of each (rows
	// of the vocabulary, one per candidate) when it sampled them.
	cand     []int32
	q        []float32
	hasQ     bool
	maxCand  int
	base     int // length of the sequence when the candidates were proposed
	accepted int // candidates the target accepted in the step

	// Draft model state (DraftModel).
	dlen      int // tokens in the draft's slot, a prefix of the sequence
	dhist     *logits.History
	dsrc      logits.Source
	numAssist int // the draft length of the heuristic schedules

	feed   []int32 // the step's feed to the target
	event  Event   // the step's event, sent after Settle
	tokens []int32 // generated
	finish generation.FinishReason
	err    error
}

// Tokens returns the sequence so far, prompt first: read only, valid until
// the step's verification.
func (s *Sequence) Tokens() []int32 { return s.hist.Tokens() }

// Slot is the sequence's slot in the target (and in the draft model).
func (s *Sequence) Slot() int { return s.slot }

// Config is the request's generation config.
func (s *Sequence) Config() *genconfig.Config { return s.cfg }

// MaxCandidates is how many candidates the step can verify: it keeps the
// sequence below max_length with the target's own token, and within the
// target's room.
func (s *Sequence) MaxCandidates() int { return s.maxCand }

// SetCandidates sets the step's candidates (copied). probs, when not nil,
// holds the draft distribution each candidate was sampled from, one row of
// the vocabulary per candidate, and selects speculative sampling; without
// it, sampling compares the target's draws with the candidates.
func (s *Sequence) SetCandidates(tokens []int32, probs []float32) {
	s.cand = append(s.cand[:0], tokens[:min(len(tokens), s.maxCand)]...)
	s.q = append(s.q[:0], probs...)
	s.hasQ = probs != nil && len(s.cand) > 0
}

// Accepted is the number of candidates the last verification accepted
// (for Settle).
func (s *Sequence) Accepted() int { return s.accepted }

func (s *Sequence) isEOS(t int32) bool { return slices.Contains(s.eos, t) }
