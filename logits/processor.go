package logits

// Processor is one stage of a [Pipeline]: it rewrites one row of scores in place, given the
// [History] of the sequence they continue (prompt plus accepted tokens). len(scores) is the
// vocabulary size. The scores are the raw logits for greedy search and sampling, and
// log-probabilities for beam search, exactly as in transformers'
// LogitsProcessor.__call__(input_ids, scores) restricted to one row.
//
// Process must not keep scores, must not panic on any float value (NaN, ±inf), and must not change
// the history: a processor that needs state per sequence implements [StatefulProcessor].
//
// Process is called concurrently. Beam search (package beam) processes the rows of a step on
// several goroutines at once when the step is large (rows × vocabulary of at least 2^15, and
// GOMAXPROCS above 1), so it calls Process of every processor of its pipeline, the built-in ones
// and the user's (beam.Options.User) alike, from several goroutines at the same time, each call
// with a different History and a different scores slice. A Processor must therefore be safe for
// concurrent calls of Process: it may read its own fields but not write them, it keeps what
// belongs to one sequence in that sequence's state ([StatefulProcessor], read with
// [History.State]) or on the stack, and it synchronises itself whatever it shares between
// sequences (a counter, a cache, a log). NewState, State.Accept and State.Clone are called on the
// search's goroutine, never while a Process of the same pipeline runs. The decoding loop (package
// generation) calls Process on one goroutine, one row after the other.
type Processor interface {
	// Name is transformers' class name for the built-in processors (e.g. "TopKLogitsWarper"), and
	// a descriptive name for the others.
	Name() string
	Process(hist *History, scores []float32)
}

// StatefulProcessor is a [Processor] that keeps state per sequence, updated incrementally as tokens
// are accepted (an n-gram table, a set of seen tokens...). The pipeline calls NewState once per
// [History], then State.Accept after each accepted token; inside Process, [History.State] returns
// the state that NewState made for that history.
type StatefulProcessor interface {
	Processor
	// NewState returns the state of a sequence that starts as prompt, for rows of vocabSize
	// scores. prompt must not be kept.
	NewState(prompt []int32, vocabSize int) State
}

// State is the state of a [StatefulProcessor] for one sequence, kept in its [History].
type State interface {
	// Accept updates the state after a token was accepted; history is the sequence's whole
	// history, the new token last. history must not be kept.
	Accept(history []int32)
	// Clone returns an independent copy (for History.Clone and beam search).
	Clone() State
}

// Failer is an optional interface of a [Processor] that can leave a row without a choice for a
// reason of its own (grammar.Processor, whose grammar needed more than its budget): Err returns
// that reason for the sequence of hist, or nil. The decoding loop reports it in place of the
// chooser's [ErrNoChoice].
type Failer interface {
	Err(hist *History) error
}

// stateCopier is implemented by states that can become a copy of another state of the same
// processor while reusing their storage; History.CopyFrom prefers it to Clone.
type stateCopier interface {
	CopyFrom(src State)
}

// ProcessorFunc adapts a function to a stateless [Processor] named name. fn is called as Process
// is, concurrently under beam search: see [Processor].
func ProcessorFunc(name string, fn func(hist *History, scores []float32)) Processor {
	return funcProcessor{name: name, fn: fn}
}

type funcProcessor struct {
	name string
	fn   func(hist *History, scores []float32)
}

func (f funcProcessor) Name() string                            { return f.name }
func (f funcProcessor) Process(hist *History, scores []float32) { f.fn(hist, scores) }
