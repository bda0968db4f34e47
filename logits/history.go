package logits

import (
	"slices"

	"github.com/llamaloop/llamaloop/internal/numeric"
)

// History is what the processors know of one sequence being generated: its tokens (prompt plus
// accepted tokens, transformers' row of input_ids) and the state of every stage of the [Pipeline]
// that made it (n-gram tables, seen-token sets, scratch buffers). The scores a pipeline processes
// are the next-token row of one History; the histories of a batch are independent. A History is
// not safe for concurrent use.
type History struct {
	p         *Pipeline
	tokens    []int32
	promptLen int
	encoder   []int32 // the encoder input (NewEncoderHistory), nil for a decoder-only model; read only
	states    []State // parallel to p.stages; nil for stateless stages
	stage     int     // index of the stage being run, for State
	running   bool    // inside Pipeline.Process
	forSample bool    // inside Pipeline.ProcessForSample: top-k may leave a stale row

	cand candidates
	// Scratch reused across steps so that Process does not allocate in steady state.
	best  numeric.Best[float32]
	pairs []scored
	keys  []float32
	dist  []float32
}

// candidates lists, in index order, the only entries of a scores row that are not -inf, once a
// top-k stage has bounded them; later warpers and Pipeline.Sample then work on them alone. A stale
// row (Pipeline.ProcessForSample) still holds its old values outside the list: materialize writes
// the -inf that the list stands for.
type candidates struct {
	idx   []int32
	valid bool
	stale bool
	owner *float32 // &scores[0] of the row they describe
	n     int      // len(scores)
}

// scored is one entry of a row with its sort key.
type scored struct {
	v float32
	i int32
}

// Accept appends token to the history and updates every stage's state incrementally.
func (r *History) Accept(token int32) {
	r.tokens = append(r.tokens, token)
	r.cand.valid = false
	for _, s := range r.states {
		if s != nil {
			s.Accept(r.tokens)
		}
	}
}

// Tokens returns the full history, prompt first. It aliases the history's storage: read only,
// valid until the next Accept or CopyFrom.
func (r *History) Tokens() []int32 { return r.tokens }

// PromptLen returns the prompt length P the history started with: transformers'
// input_ids_seq_length, used by min_new_tokens, max_new_tokens, exponential_decay_length_penalty
// and begin_suppress_tokens.
func (r *History) PromptLen() int { return r.promptLen }

// Len returns the current length of the history, transformers' cur_len (prompt included).
func (r *History) Len() int { return len(r.tokens) }

// Prompt returns the prompt part of the history (read only).
func (r *History) Prompt() []int32 { return r.tokens[:r.promptLen] }

// State returns, inside the Process method of a [StatefulProcessor] run by a pipeline, the state
// that processor's NewState made for this history; nil elsewhere.
func (r *History) State() State {
	if !r.running || r.stage >= len(r.states) {
		return nil
	}
	return r.states[r.stage]
}

// Clone returns an independent copy of r: same history and stage states, fresh scratch.
func (r *History) Clone() *History {
	c := &History{p: r.p, tokens: slices.Clone(r.tokens), promptLen: r.promptLen, encoder: r.encoder}
	c.states = make([]State, len(r.states))
	for i, s := range r.states {
		if s != nil {
			c.states[i] = s.Clone()
		}
	}
	return c
}

// CopyFrom makes r equal to src (tokens and stage states), reusing r's storage: beam search
// reorders its histories this way without allocating in steady state. Both should come from the
// same pipeline; otherwise r takes src's pipeline and clones its states.
func (r *History) CopyFrom(src *History) {
	if r == src {
		return
	}
	r.tokens = append(r.tokens[:0], src.tokens...)
	r.promptLen, r.encoder = src.promptLen, src.encoder
	r.cand.valid = false
	if r.p != src.p || len(r.states) != len(src.states) {
		r.p = src.p
		r.states = make([]State, len(src.states))
	}
	for i, s := range src.states {
		switch d := r.states[i].(type) {
		case nil:
			if s != nil {
				r.states[i] = s.Clone()
			}
		case stateCopier:
			d.CopyFrom(s)
		default:
			r.states[i] = s.Clone()
		}
	}
}

// trustCandidates reports whether the candidate list describes scores as the previous stage of the
// running pipeline left them.
func (r *History) trustCandidates(scores []float32) bool {
	return r.running && r.cand.describes(scores)
}

// warpInput returns the row a warper works in (a scratch one when r is nil)
// and the candidates that hold every finite entry of scores, or nil when the
// whole row must be scanned.
func warpInput(r *History, scores []float32) (*History, []int32) {
	if r == nil {
		return &History{}, nil
	}
	if r.trustCandidates(scores) {
		return r, r.cand.idx
	}
	return r, nil
}

// setCandidates records that only the entries listed in r.cand.idx are not -inf.
func (r *History) setCandidates(scores []float32) {
	r.cand.valid = r.running && len(scores) > 0
	if r.cand.valid {
		r.cand.owner, r.cand.n = &scores[0], len(scores)
	}
}

// materialize sets to -inf the entries of a stale scores row outside its candidates.
func (r *History) materialize(scores []float32) {
	if !r.cand.stale || !r.cand.describes(scores) {
		return
	}
	r.cand.stale = false
	next := 0
	for _, i := range r.cand.idx {
		fillNegInf(scores[next:i])
		next = int(i) + 1
	}
	fillNegInf(scores[next:])
}

func fillNegInf(s []float32) {
	for i := range s {
		s[i] = negInf
	}
}

// describes reports whether the list is valid for this very scores slice.
func (c *candidates) describes(scores []float32) bool {
	return c.valid && len(scores) > 0 && c.owner == &scores[0] && c.n == len(scores)
}

// scratchKeys returns a scratch slice of n float32.
func (r *History) scratchKeys(n int) []float32 {
	if cap(r.keys) < n {
		r.keys = make([]float32, n)
	}
	return r.keys[:n]
}
