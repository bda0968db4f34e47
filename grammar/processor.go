package grammar

import (
	"sync"

	"github.com/llamaloop/llamaloop/logits"
)

// Processor is the logits processor that constrains a sequence to a grammar: it sets to -inf the
// score of every token that cannot be followed by a complete sentence, and allows the
// end-of-generation tokens exactly when the tokens accepted so far form a complete sentence.
// Each sequence's place in the grammar is its state (a [logits.StatefulProcessor]), advanced by
// the accepted token and cloned with beam search's histories, so it composes with every warper,
// Mirostat and beam search: add it with generation.Request.Processors, beam.Options.User,
// logits.Options.User or logits.Chain. The prompt is not matched: the grammar constrains the
// generated tokens only.
//
// A sequence whose grammar needs more than the matcher's budget ([Options]) gets a row of -inf
// (its pipeline's chooser then finds no choice, and package generation ends the request with
// FinishError) and [Processor.Err] returns why.
type Processor struct {
	m *Matcher
	// failed holds the budget error of each *logits.History whose row was left without a choice.
	failed sync.Map
}

// NewProcessor returns the processor for matcher m; many pipelines may share it.
func NewProcessor(m *Matcher) *Processor { return &Processor{m: m} }

// Name returns "GrammarLogitsProcessor".
func (*Processor) Name() string { return "GrammarLogitsProcessor" }

// Matcher returns the processor's matcher.
func (p *Processor) Matcher() *Matcher { return p.m }

// NewState returns the state of a sequence at the start of the grammar.
func (p *Processor) NewState(_ []int32, _ int) logits.State {
	return &RowState{m: p.m, s: p.m.Start()}
}

// Process masks the tokens the sequence's grammar state does not allow.
func (p *Processor) Process(hist *logits.History, scores []float32) {
	st, ok := hist.State().(*RowState)
	if !ok {
		return
	}
	if err := p.m.Apply(st.s, scores); err != nil {
		st.s = p.m.failed(err) // the sequence stays failed
		p.failed.Store(hist, err)
	}
}

// Err implements [logits.Failer]: it returns the error, wrapping [ErrBudget], of the history whose row the processor left
// without a choice because its grammar needed more than the budget; nil for any other history.
func (p *Processor) Err(hist *logits.History) error {
	if err, ok := p.failed.Load(hist); ok {
		return err.(error)
	}
	return nil
}

// RowState is one sequence's place in the grammar.
type RowState struct {
	m *Matcher
	s State
}

// State returns the sequence's grammar state.
func (r *RowState) State() State { return r.s }

// Complete reports whether the accepted tokens form a complete sentence.
func (r *RowState) Complete() bool { return r.m.Complete(r.s) }

// Accept advances the state by the last token of history.
func (r *RowState) Accept(history []int32) {
	if len(history) > 0 {
		r.s = r.m.Accept(r.s, history[len(history)-1])
	}
}

// Clone returns an independent copy.
func (r *RowState) Clone() logits.State { c := *r; return &c }

// CopyFrom makes r equal to src, a state of the same processor.
func (r *RowState) CopyFrom(src logits.State) { *r = *src.(*RowState) }

// The processor declares the optional contracts of package logits it meets.
var (
	_ logits.StatefulProcessor = (*Processor)(nil)
	_ logits.Failer            = (*Processor)(nil)
)
