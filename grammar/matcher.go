package grammar

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
)

// ErrVocabularyMismatch is returned when rows and vocabulary disagree in size.
var ErrVocabularyMismatch = errors.New("grammar: vocabulary size differs from the rows")

// ErrBudget is wrapped by the error of a sequence whose grammar needs more than its matcher's
// budget ([Options]): more work for one token than Options.StepWork, or more memory than
// Options.MaxBytes.
var ErrBudget = errors.New("grammar: over budget")

// State is where a sequence stands in a grammar: a small handle whose meaning is kept by its
// [Matcher]. The zero State is dead (the sequence left the grammar); a negative State is failed
// (the grammar needed more than the matcher's budget to go on: [Matcher.Err] says which).
type State int32

// Options bounds what a [Matcher] may spend; a zero field takes its default.
type Options struct {
	// StepWork bounds the work of one call, a token accepted or a mask computed, in units of
	// a stack-set node made, a memo entry filled or 32 stacks scanned (0.2 to 2 µs each on a
	// 2-vCPU AMD EPYC, the more the larger the automaton): the bound on how long one
	// sequence's grammar holds the goroutine that generates. Default [DefaultStepWork].
	StepWork int
	// MaxBytes bounds the memory of the matcher: its automaton (states, transitions, stack-set
	// nodes and memo tables) may take all of it, and the kept masks take what the automaton
	// leaves (they are forgotten past it and computed again). Default [DefaultMaxBytes].
	MaxBytes int
}

// The default budgets of a [Matcher]. A warm step of any grammar costs no work; the coldest
// step of the package's tests (the JSON-Schema-Test-Suite's grammars among them) takes about
// 5,000 units, and of the benchmark schemas over a 32000-token vocabulary about 900, so the
// step budget leaves a margin of 200 while bounding a step to about a second or two.
const (
	DefaultStepWork = 1 << 20
	DefaultMaxBytes = 256 << 20
)

// Matcher decides which tokens of a vocabulary may come next under a grammar. It compiles the
// grammar, as the sequences ask for it, into an automaton over bytes whose states are the
// grammar's stack sets, and keeps, per state reached at a token boundary, the mask of the tokens
// that keep a complete sentence possible (a walk of the vocabulary's prefix trie that prunes a
// subtree at the first byte that leaves the grammar). Both are computed once and reused by every
// sequence, so the cost per token after warm-up is a look-up and the writing of the -inf scores.
//
// Every call is bounded by the matcher's [Options]: a grammar that would need more work for one
// token, or more memory in all, gives a failed state (its mask allows nothing, [Matcher.Err]
// says why) instead of holding its goroutine or exhausting memory.
//
// A Matcher is safe for concurrent use.
type Matcher struct {
	g *Grammar
	v *Vocabulary

	mu    sync.Mutex
	d     *dfa
	masks []*mask // by state; nil until asked
	// maskBytes is the memory held by masks; with the automaton's, at most maxBytes.
	maskBytes int
	maxBytes  int
	errs      [3]error // by overrun
	walk      []int32  // trie walk scratch: the state at each depth

	negInf []float32 // a row of -inf, copied over the rows whose masks allow few tokens
}

// mask is the set of tokens allowed in one state, in the form that is cheapest to apply: a sorted
// list of the allowed tokens when they are few (the gaps between them are wiped with block
// copies), of the blocked ones when those are few (a store each), a bitset otherwise (blended into
// the row, 8 scores at a time).
type mask struct {
	allowFew bool     // list holds the allowed tokens
	list     []int32  // sorted: the allowed tokens (allowFew), or the blocked ones (bits nil)
	bits     []uint64 // bit t%64 of word t/64: token t is allowed
	allowed  int      // number of allowed tokens
}

// noTokens is the mask of a failed state.
var noTokens = &mask{allowFew: true}

// NewMatcher pairs a grammar with a vocabulary, with the default budgets.
func NewMatcher(g *Grammar, v *Vocabulary) *Matcher { return NewMatcherWith(g, v, Options{}) }

// NewMatcherWith pairs a grammar with a vocabulary, within the budgets of o.
func NewMatcherWith(g *Grammar, v *Vocabulary, o Options) *Matcher {
	if o.StepWork <= 0 {
		o.StepWork = DefaultStepWork
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	m := &Matcher{g: g, v: v, d: newDFA(g, o.StepWork, o.MaxBytes), maxBytes: o.MaxBytes, walk: make([]int32, v.maxDepth+1)}
	m.errs[overWork] = fmt.Errorf("%w: one token needs more than %d units of work (Options.StepWork); the grammar is too ambiguous here", ErrBudget, o.StepWork)
	m.errs[overBytes] = fmt.Errorf("%w: the grammar's automaton would outgrow %d bytes (Options.MaxBytes)", ErrBudget, o.MaxBytes)
	m.negInf = make([]float32, v.Size())
	for i := range m.negInf {
		m.negInf[i] = float32(math.Inf(-1))
	}
	return m
}

// Footprint returns the bytes that the matcher's automaton and kept masks hold, at most the
// matcher's Options.MaxBytes (plus one mask). The automaton keeps every state that a sequence
// reached, about 1 KiB each, and deeply nested output reaches new states: a long-running
// process that keeps one Matcher for many requests should replace it (NewMatcher over the same
// Grammar and Vocabulary, which are shared) before its footprint nears the budget, past which
// sequences that reach new states fail.
func (m *Matcher) Footprint() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maskBytes + m.d.footprint()
}

// Err returns nil for a state that is not failed, and for a failed one the error, wrapping
// [ErrBudget], that names the budget it needed more of.
func (m *Matcher) Err(s State) error {
	switch {
	case s >= 0:
		return nil
	case s == -State(overBytes):
		return m.errs[overBytes]
	}
	return m.errs[overWork]
}

// failed returns the failed State of err, an error of m.Err.
func (m *Matcher) failed(err error) State {
	if err == m.errs[overBytes] {
		return -State(overBytes)
	}
	return -State(overWork)
}

// begin opens one budgeted call; m.mu is held.
func (m *Matcher) begin() {
	m.d.work, m.d.over = 0, withinBudget
}

// result is the State of a dfa state, the failed State that names the budget when negative.
func (m *Matcher) result(s int32) State {
	if s < 0 {
		return -State(max(m.d.over, overWork))
	}
	return State(s)
}

// Grammar returns the matcher's grammar.
func (m *Matcher) Grammar() *Grammar { return m.g }

// Vocabulary returns the matcher's vocabulary.
func (m *Matcher) Vocabulary() *Vocabulary { return m.v }

// Start returns the state before any token.
func (m *Matcher) Start() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.d.start < 0 {
		return -State(overWork)
	}
	return State(m.d.start)
}

// Complete reports whether the input that led to s is a complete sentence of the grammar, when
// end of generation is allowed.
func (m *Matcher) Complete(s State) bool {
	if s < 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.d.accept[s]
}

// Dead reports whether no continuation of the input that led to s is a sentence.
func (m *Matcher) Dead(s State) bool { return s == 0 }

// Accept returns the state after token t from s. An end-of-generation token keeps a complete
// state and kills any other; a token the grammar does not allow gives the dead state; a failed
// state stays failed, and a token that needs more than the budget fails.
func (m *Matcher) Accept(s State, t int32) State {
	switch {
	case s < 0:
		return s
	case t < 0 || int(t) >= m.v.Size() || s == 0:
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.begin()
	if m.v.IsEOG(t) {
		if m.d.accept[s] {
			return s
		}
		return 0
	}
	b := m.v.Token(t)
	if len(b) == 0 {
		return 0 // as llama.cpp, which rejects every token without text but end of generation
	}
	next := m.advance(int32(s), b)
	return m.result(m.d.union(next, m.d.stepToken(int32(s), t)))
}

// AcceptBytes returns the state after the bytes b from s, within the budget of one call.
func (m *Matcher) AcceptBytes(s State, b []byte) State {
	if s < 0 {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.begin()
	return m.result(m.advance(int32(s), b))
}

// advance returns the state after b from s, negative when over budget.
func (m *Matcher) advance(s int32, b []byte) int32 {
	for _, c := range b {
		if s <= 0 {
			return s
		}
		s = m.d.next(s, c)
	}
	return s
}

// Allowed appends the tokens allowed in state s to dst, in increasing order: none in a failed
// state, or when computing the mask of s needs more than the budget.
func (m *Matcher) Allowed(dst []int32, s State) []int32 {
	mk, _ := m.maskOf(s)
	switch {
	case mk.allowFew:
		return append(dst, mk.list...)
	case mk.bits != nil:
		for t := range int32(m.v.Size()) {
			if mk.bits[t/64]&(1<<(t%64)) != 0 {
				dst = append(dst, t)
			}
		}
		return dst
	}
	j := 0
	for t := range int32(m.v.Size()) {
		if j < len(mk.list) && mk.list[j] == t {
			j++
			continue
		}
		dst = append(dst, t)
	}
	return dst
}

// Apply sets to -inf the scores of the tokens that state s does not allow. Scores beyond the
// vocabulary are set to -inf too; a row shorter than the vocabulary is masked as far as it goes.
// In a failed state, or when computing the mask of s needs more than the budget, every score
// becomes -inf and Apply returns the error (wrapping [ErrBudget]). Apply does not allocate once
// the mask of s is known.
func (m *Matcher) Apply(s State, scores []float32) error {
	mk, err := m.maskOf(s)
	n := min(len(scores), m.v.Size())
	for i := n; i < len(scores); i++ {
		scores[i] = float32(math.Inf(-1))
	}
	row := scores[:n]
	switch {
	case mk.bits != nil:
		applyAllowed(row, mk.bits, m.negInf)
		return nil
	case !mk.allowFew:
		for _, t := range mk.list {
			if int(t) < n {
				row[t] = float32(math.Inf(-1))
			}
		}
		return nil
	}
	// Few allowed: wipe the gaps between them with block copies of a -inf row, which the
	// runtime's memmove does several times faster than a store per score.
	prev := 0
	for _, t := range mk.list {
		if int(t) >= n {
			break
		}
		if gap := row[prev:t]; len(gap) < 16 {
			for i := range gap { // a call to memmove costs more than a few stores
				gap[i] = float32(math.Inf(-1))
			}
		} else {
			copy(gap, m.negInf)
		}
		prev = int(t) + 1
	}
	copy(row[prev:], m.negInf)
	return err
}

// maskOf returns the mask of s, computing it the first time; in a failed state, or past the
// budget, the mask that allows nothing and the error.
func (m *Matcher) maskOf(s State) (*mask, error) {
	if s < 0 {
		return noTokens, m.Err(s)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for int(s) >= len(m.masks) {
		m.masks = append(m.masks, nil)
	}
	if mk := m.masks[s]; mk != nil {
		return mk, nil
	}
	m.begin()
	mk := m.compute(int32(s))
	if mk == nil {
		return noTokens, m.Err(m.result(-1))
	}
	// Masks of a grammar that keeps reaching new states (deep nesting) would grow without
	// bound: past the budget, forget them all and compute again what is asked.
	size := 4*len(mk.list) + 8*len(mk.bits)
	if m.maskBytes+size+m.d.footprint() > m.maxBytes {
		clear(m.masks)
		m.maskBytes = 0
	}
	m.maskBytes += size
	m.masks[s] = mk
	return mk, nil
}

// tokenRefsAllow appends the tokens that the token references on top of s's stacks take: a
// token with text (llama.cpp rejects the others) that is not an end-of-generation token, which
// only a complete sentence allows.
func (m *Matcher) tokenRefsAllow(allowed []int32, s int32) []int32 {
	v := m.v
	takes := func(t int32) bool {
		if len(v.Token(t)) == 0 || v.IsEOG(t) {
			return false
		}
		for _, e := range m.d.tokenTops[s] {
			if m.d.matchesToken(e, t) {
				return true
			}
		}
		return false
	}
	var not []int32
	for _, top := range m.d.tokenTops[s] {
		e := m.g.elems[top.pos]
		switch {
		case e.kind == kTokenNot:
			not = append(not, e.arg)
		case int(e.arg) < v.Size() && takes(e.arg):
			allowed = append(allowed, e.arg)
		}
	}
	if len(not) > 0 {
		for t := range int32(v.Size()) {
			if takes(t) {
				allowed = append(allowed, t)
			}
		}
	}
	return allowed
}

// compute walks the vocabulary trie from state s: a node whose byte leads to the dead state
// prunes its whole subtree; the tokens of every node reached are allowed. End-of-generation
// tokens are allowed when s is complete, and the dead state allows them alone so that a
// sequence forced out of the grammar can still end. It returns nil past the budget.
func (m *Matcher) compute(s int32) *mask {
	v, d := m.v, m.d
	var allowed []int32
	if s != 0 {
		walk := m.walk
		walk[0] = s
		for i, n := 0, len(v.tbyte); i < n; {
			depth := int(v.tdepth[i])
			from := walk[depth-1]
			t := d.trans[int(from)<<8|int(v.tbyte[i])]
			if t < 0 {
				if t = d.step(from, v.tbyte[i]); t < 0 {
					return nil
				}
			}
			if t == 0 {
				i = int(v.tend[i])
				continue
			}
			walk[depth] = t
			allowed = append(allowed, v.ttok[v.tfirst[i]:v.tfirst[i+1]]...)
			i++
		}
	}
	if s != 0 && len(d.tokenTops[s]) > 0 {
		allowed = m.tokenRefsAllow(allowed, s)
	}
	if s == 0 || d.accept[s] {
		allowed = append(allowed, v.eog...)
	}
	slices.Sort(allowed)
	allowed = slices.Compact(allowed) // a token may be allowed by its bytes and by its id
	mk := &mask{allowed: len(allowed)}
	// Wiping the gaps between allowed tokens costs a call per gap, setting blocked tokens a store
	// each (about 1 ns), and the vector blend of the bitset a pass over the row (about 0.25 ns a
	// token, measured side by side at 128256): the allowed list wins below one token in 16
	// allowed, the blocked list below one in 4 blocked. Without the vector blend the bitset costs
	// what the blocked list does.
	blocked := v.Size() - len(allowed)
	switch {
	case len(allowed) <= v.Size()/16:
		mk.allowFew, mk.list = true, allowed
	case blocked <= v.Size()/4 || !vectorMask:
		mk.list = make([]int32, 0, blocked)
		j := 0
		for t := range int32(v.Size()) {
			if j < len(allowed) && allowed[j] == t {
				j++
				continue
			}
			mk.list = append(mk.list, t)
		}
	default:
		mk.bits = make([]uint64, (v.Size()+63)/64)
		for _, t := range allowed {
			mk.bits[t/64] |= 1 << (t % 64)
		}
	}
	return mk
}
