package grammar

import "github.com/llamaloop/llamaloop/logits"

// Processor is the logits processor that constrains a sequence to a grammar: it sets to -inf the
// score of every token that cannot be followed by a complete sentence, and allows the
// end-of-generation tokens exactly when the tokens accepted so far form a complete sentence.
// Each sequence's place in the grammar is its state (a [logits.StatefulProcessor]), advanced by
// the accepted token and cloned with beam search's histories, so it composes with every warper,
// Mirostat and beam search: add it with generation.Request.Processors, beam.Options.User,
// logits.Options.User or logits.Chain. The prompt is not matched: the grammar constrains the
// generated tokens only.
type Processor struct {
	m *Matcher
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
	p.m.Apply(st.s, scores)
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
