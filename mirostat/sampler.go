package mirostat

import (
	"math"
	"slices"

	"github.com/llamaloop/llamaloop/internal/numeric"
)

// Step is what one draw produced.
type Step struct {
	// Token is the chosen token id, an index into the row.
	Token int32
	// Prob is the token's probability under the original distribution,
	// before truncation and renormalization.
	Prob float64
	// Surprise is -log2(Prob) in bits, computed in log space so that it stays
	// finite when Prob underflows.
	Surprise float64
	// Kept is the number of candidates the draw chose among.
	Kept int
	// K is V1's adaptive k clamped to the vocabulary, or 0 for V2. Kept is
	// smaller when fewer than K tokens are unmasked.
	K int
	// Mu is mu after the update MuBefore - Eta*(Surprise - Tau).
	Mu float64
	// MuBefore is mu when the candidates were selected.
	MuBefore float64
	// S is V1's estimated Zipf exponent, or 0 for V2 and for rows with fewer
	// than two unmasked tokens.
	S float64
}

// State is a sampler's portable feedback state: everything that changes
// between steps. Store it with the Config to resume a session elsewhere.
type State struct {
	Mu    float64 // bits
	Steps int     // successful steps since New or the last Reset
}

// Validate reports whether st can be restored: Mu finite, Steps >= 0.
func (st State) Validate() error {
	if !finite(st.Mu) {
		return paramError("state mu must be finite, got %v", st.Mu)
	}
	if st.Steps < 0 {
		return paramError("state steps must be >= 0, got %d", st.Steps)
	}
	return nil
}

// Checkpoint is a snapshot of a sampler: its configuration (defaults
// applied) and its state. It restores only into a sampler with the same
// configuration.
type Checkpoint struct {
	Config Config
	State  State
}

// Sampler is one Mirostat session: a configuration, the feedback state mu,
// and scratch space that makes steady-state steps allocation-free. A step
// changes the state only when it succeeds. A Sampler is not safe for
// concurrent use; Clone gives each goroutine or branch its own.
type Sampler struct {
	cfg   Config // defaults applied
	mu    float64
	steps int
	cands []cand                // scratch: candidates of the current row
	probs []float64             // scratch: their original probabilities
	hist  histogram             // scratch: the row's candidates by band
	best  numeric.Best[float64] // scratch: the best tokens of a row
	lv    []float64             // scratch: V1's top log scores, for the Zipf fit
}

// New returns a sampler at mu = cfg.Mu (2*Tau when 0).
func New(cfg Config) (*Sampler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Sampler{cfg: cfg, mu: cfg.Mu}, nil
}

// NewFromState returns a sampler that resumes a session from its portable
// state.
func NewFromState(cfg Config, st State) (*Sampler, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.SetState(st); err != nil {
		return nil, err
	}
	return s, nil
}

// Config returns the configuration with defaults applied (Mu and M never 0).
func (s *Sampler) Config() Config { return s.cfg }

// Mu returns the current mu in bits.
func (s *Sampler) Mu() float64 { return s.mu }

// Steps returns the number of successful steps since New or Reset.
func (s *Sampler) Steps() int { return s.steps }

// State returns the portable feedback state.
func (s *Sampler) State() State { return State{Mu: s.mu, Steps: s.steps} }

// SetState replaces the feedback state after validating it.
func (s *Sampler) SetState(st State) error {
	if err := st.Validate(); err != nil {
		return err
	}
	s.mu, s.steps = st.Mu, st.Steps
	return nil
}

// Reset restores the initial mu and zero steps.
func (s *Sampler) Reset() { s.mu, s.steps = s.cfg.Mu, 0 }

// Checkpoint snapshots the configuration and state, for Restore.
func (s *Sampler) Checkpoint() Checkpoint { return Checkpoint{Config: s.cfg, State: s.State()} }

// Restore rolls the sampler back (or forward) to c. It fails without
// changing anything when c was taken from a sampler with another
// configuration or holds an invalid state.
func (s *Sampler) Restore(c Checkpoint) error {
	if c.Config != s.cfg {
		return paramError("checkpoint config %+v does not match sampler config %+v", c.Config, s.cfg)
	}
	return s.SetState(c.State)
}

// Clone forks the session: the copy starts with the same configuration and
// state and evolves independently.
func (s *Sampler) Clone() *Sampler { return &Sampler{cfg: s.cfg, mu: s.mu, steps: s.steps} }

// Row is a next-token distribution a Sampler selects candidates from: Logits,
// Weights or *PreparedRow.
type Row interface {
	// Len is the vocabulary size, the number of entries of the row.
	Len() int
	selectFor(s *Sampler) (selection, error)
}

// Logits is a row of logits; the distribution is their softmax. -Inf masks a
// token; NaN and +Inf are errors.
type Logits []float32

// Weights is a row of non-negative weights, normalized by their sum; 0
// masks a token. Negative, NaN or infinite weights are errors.
type Weights []float64

// Len returns len(l).
func (l Logits) Len() int { return len(l) }

// Len returns len(w).
func (w Weights) Len() int { return len(w) }

func (l Logits) selectFor(s *Sampler) (selection, error) { return s.selectLogits(l) }

func (w Weights) selectFor(s *Sampler) (selection, error) { return s.selectWeights(w) }

// SampleLogits draws one token from a row of logits with the uniform u in
// [0, 1) and updates mu. It is Sample(Logits(logits), u) without the
// interface conversion, and allocates nothing once the sampler's scratch has
// grown to the row's size.
func (s *Sampler) SampleLogits(logits []float32, u float64) (Step, error) {
	if err := checkUniform(u); err != nil {
		return Step{}, err
	}
	return s.drawLogits(logits, u)
}

// SampleWeights draws one token from a row of non-negative weights.
func (s *Sampler) SampleWeights(weights []float64, u float64) (Step, error) {
	return s.Sample(Weights(weights), u)
}

// Sample draws one token from row with the uniform u in [0, 1) and updates
// mu: the candidates are ranked by probability (ties by smaller id), and the
// token is the first whose cumulative renormalized probability exceeds u.
func (s *Sampler) Sample(row Row, u float64) (Step, error) {
	if err := checkUniform(u); err != nil {
		return Step{}, err
	}
	if l, ok := row.(Logits); ok {
		return s.drawLogits(l, u)
	}
	sel, err := row.selectFor(s)
	if err != nil {
		return Step{}, err
	}
	return s.commitAt(&sel, sel.pick(u))
}

// Observe updates mu for a token the caller drew itself from the candidates
// that Candidates(row) returns. A token outside that set is an error wrapping
// ErrNotCandidate, and mu stays unchanged.
func (s *Sampler) Observe(row Row, token int32) (Step, error) {
	if token < 0 || int(token) >= row.Len() {
		return Step{}, paramError("token %d outside vocabulary of %d", token, row.Len())
	}
	sel, err := row.selectFor(s)
	if err != nil {
		return Step{}, err
	}
	i := sel.index(token)
	if i < 0 {
		return Step{}, ErrNotCandidate
	}
	return s.commitAt(&sel, i)
}

// Candidates is the candidate set of one row under the current mu, for a
// host that makes the categorical draw itself and reports it with Observe.
// The slices align by index and are in rank order.
type Candidates struct {
	Tokens       []int32
	Original     []float64 // probability under the original distribution
	Renormalized []float64 // probability within the candidate set; sums to 1
	K            int       // V1's k, or 0
	Mu           float64   // the mu the set was selected with
}

// Index returns the position of token in c.Tokens, or -1.
func (c *Candidates) Index(token int32) int { return slices.Index(c.Tokens, token) }

// Candidates returns the candidate set of row under the current mu without
// drawing or changing state. The slices are newly allocated.
func (s *Sampler) Candidates(row Row) (Candidates, error) {
	sel, err := row.selectFor(s)
	if err != nil {
		return Candidates{}, err
	}
	c := Candidates{
		Tokens:       make([]int32, len(sel.kept)),
		Original:     slices.Clone(sel.probs),
		Renormalized: make([]float64, len(sel.kept)),
		K:            sel.k,
		Mu:           s.mu,
	}
	mass := sel.mass()
	for i, k := range sel.kept {
		c.Tokens[i] = k.id
		c.Renormalized[i] = sel.probs[i] / mass
	}
	return c, nil
}

// Preview describes the candidate set a draw would use.
type Preview struct {
	Vocabulary       int     // entries in the row
	Kept             int     // candidates
	K                int     // V1's k, or 0
	RetainedMass     float64 // original probability of the candidates
	ExpectedSurprise float64 // bits: mean surprise of a draw from the candidates
	Mu               float64 // the current mu
}

// Preview inspects the candidate set of row without drawing or changing
// state.
func (s *Sampler) Preview(row Row) (Preview, error) {
	sel, err := row.selectFor(s)
	if err != nil {
		return Preview{}, err
	}
	mass := sel.mass()
	var expected float64
	for i, c := range sel.kept {
		expected += sel.probs[i] * sel.st.surpriseBits(c.lv)
	}
	return Preview{
		Vocabulary:       sel.st.n,
		Kept:             len(sel.kept),
		K:                sel.k,
		RetainedMass:     mass,
		ExpectedSurprise: expected / mass,
		Mu:               s.mu,
	}, nil
}

func checkUniform(u float64) error {
	if !(u >= 0 && u < 1) {
		return ErrInvalidUniform
	}
	return nil
}

// selection is the candidate set of one row under the current mu.
type selection struct {
	st    rowStats
	kept  []cand    // rank order
	probs []float64 // original probability of kept[i]
	cum   []float64 // prepared rows: running sums of probs; nil otherwise
	k     int       // V1's k; 0 for V2
	s     float64   // V1's Zipf exponent
}

// pick maps u to a candidate by inverse CDF in rank order (the reference
// draw, numeric.InverseCDF; drawLogits reaches the same index without
// ranking the candidates, see draw.go); prepared rows binary-search their running sums, which are the
// same sums.
func (sel *selection) pick(u float64) int {
	if sel.cum == nil {
		return numeric.InverseCDF(sel.probs, u)
	}
	target := u * sel.cum[len(sel.cum)-1]
	i, _ := slices.BinarySearchFunc(sel.cum, target, func(c, t float64) int {
		if c > t {
			return 1
		}
		return -1
	})
	if i < len(sel.cum) {
		return i
	}
	return numeric.LastWithMass(sel.probs)
}

// mass sums the candidates' original probabilities in rank order.
func (sel *selection) mass() float64 {
	if sel.cum != nil {
		return sel.cum[len(sel.cum)-1]
	}
	var m float64
	for _, p := range sel.probs {
		m += p
	}
	return m
}

func (sel *selection) index(token int32) int {
	for i, c := range sel.kept {
		if c.id == token {
			return i
		}
	}
	return -1
}

// commitAt builds the step for candidate i and commits it.
func (s *Sampler) commitAt(sel *selection, i int) (Step, error) {
	return s.commit(sel.st, sel.kept[i], sel.probs[i], len(sel.kept), sel.k, sel.s)
}

// commit builds the step for candidate c of probability p, drawn among kept
// candidates, and commits it.
func (s *Sampler) commit(rs rowStats, c cand, p float64, kept, k int, exponent float64) (Step, error) {
	surprise := rs.surpriseBits(c.lv)
	mu := s.mu - s.cfg.Eta*(surprise-s.cfg.Tau)
	if !finite(mu) {
		return Step{}, ErrNumerical
	}
	st := Step{
		Token:    c.id,
		Prob:     p,
		Surprise: surprise,
		Kept:     kept,
		K:        k,
		Mu:       mu,
		MuBefore: s.mu,
		S:        exponent,
	}
	s.mu = mu
	s.steps++
	return st, nil
}

func (s *Sampler) selectLogits(row []float32) (selection, error) {
	ninf := float32(math.Inf(-1))
	if s.cfg.Version == V1 {
		top := newTopSet(s.cands, &s.best, min(s.cfg.M, len(row)), float64(ninf))
		st, err := logitStats(row, &top)
		if err != nil {
			return selection{}, err
		}
		return selectV1(s, row, st, top.ranked(), ninf, false)
	}
	st, err := logitStats(row, nil)
	if err != nil {
		return selection{}, err
	}
	// surprise <= mu  ⇔  logit >= shift + lnZ - mu·ln2. The float32 threshold
	// is a little low so that the pass collects a superset; finishV2 applies
	// the exact test.
	thr := st.shift + st.lnZ - s.mu*math.Ln2
	slack := 1e-9 * (math.Abs(st.shift) + st.lnZ + math.Abs(s.mu*math.Ln2) + 1)
	c := collectAtLeast(s.cands[:0], row, float32Below(thr-slack))
	for i := range c {
		c[i].lv = c[i].v
	}
	x := float64(row[st.top])
	return s.finishV2(st, c, cand{v: x, lv: x, id: int32(st.top)}), nil
}

func (s *Sampler) selectWeights(row []float64) (selection, error) {
	st, err := weightStats(row)
	if err != nil {
		return selection{}, err
	}
	if s.cfg.Version == V1 {
		return selectV1(s, row, st, topK(s.cands[:0], &s.best, row, s.cfg.M, 0), 0, true)
	}
	// surprise <= mu  ⇔  w >= W·2^-mu, with the same margin as for logits.
	lnThr := st.lnZ - s.mu*math.Ln2
	lnThr -= 1e-9 * (math.Abs(st.lnZ) + math.Abs(s.mu*math.Ln2) + 1)
	c := collectAtLeast(s.cands[:0], row, math.Exp(lnThr))
	for i := range c {
		c[i].lv = numeric.Log(c[i].v)
	}
	w := row[st.top]
	return s.finishV2(st, c, cand{v: w, lv: numeric.Log(w), id: int32(st.top)}), nil
}

// finishV2 keeps the collected candidates whose surprise is at most mu (the
// top token when none is) and ranks them.
func (s *Sampler) finishV2(st rowStats, c []cand, top cand) selection {
	c = slices.DeleteFunc(c, func(c cand) bool { return !(st.surpriseBits(c.lv) <= s.mu) })
	if len(c) == 0 {
		c = append(c, top)
	}
	slices.SortFunc(c, byRank)
	s.cands = c
	return selection{st: st, kept: c, probs: s.fillProbs(st, c)}
}

// selectV1 keeps the adaptive top k of Algorithm 1: fit the Zipf exponent to
// top, the best M tokens in rank order, compute k, then take the top k
// (selected again when k exceeds M).
func selectV1[F float32 | float64](s *Sampler, row []F, st rowStats, top []cand, masked F, weights bool) (selection, error) {
	setLogScores(top, weights)
	s.cands = top
	exponent := s.zipfExponent(top)
	k, err := adaptiveK(s.mu, exponent, len(row))
	if err != nil {
		return selection{}, err
	}
	kept := top
	switch {
	case k <= len(top):
		kept = top[:k]
	case len(top) == min(s.cfg.M, len(row)): // more unmasked tokens than M
		kept = topK(s.cands[:0], &s.best, row, k, masked)
		setLogScores(kept, weights)
		s.cands = kept
	}
	return selection{st: st, kept: kept, probs: s.fillProbs(st, kept), k: k, s: exponent}, nil
}

func setLogScores(c []cand, weights bool) {
	for i := range c {
		if weights {
			c[i].lv = numeric.Log(c[i].v)
		} else {
			c[i].lv = c[i].v
		}
	}
}

func (s *Sampler) fillProbs(st rowStats, c []cand) []float64 {
	s.probs = slices.Grow(s.probs[:0], len(c))[:len(c)]
	for i, k := range c {
		s.probs[i] = st.prob(k.lv)
	}
	return s.probs
}
