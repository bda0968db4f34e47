package beam

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/numeric"
	"github.com/llamaloop/llamaloop/logits"
)

// search is the state of one Search call: the prompts, the groups of slots
// that search them, and the path arena of every hypothesis.
type search struct {
	ctx     context.Context
	backend backend.Backend
	opts    Options
	cfg     *genconfig.Config
	pipe    *logits.Pipeline
	choose  logits.Chooser // one beam: the config's greedy or multinomial choice
	src     logits.Source  // the draws of sampling, seeded with Options.Seed

	vocab int
	k     int // beams per prompt
	c     int // candidates ranked per step (Transformers)
	lp    float64
	es    earlyStop
	eos   []int32
	fill  int32 // padding of short output rows

	logSoftmax bool // the processors see log-probabilities, not logits

	prompts [][]int32
	encoder [][]int32 // per prompt: its encoder input (backend.Encoder), nil for a decoder-only backend
	maxLen  []int     // per prompt: total length limit, prompt included
	next    int       // next prompt to admit
	groups  []*group
	pending []pendingFeed
	feeds   []backend.Feed
	slot    []slotState
	nodes   []node
	rows    [][]outRow // Transformers: per prompt, the returned rows
	tokens  []int32    // Progress's token buffer
	work    rowWork    // the step's rows to process
	res     Result
}

// group is a set of NumBeams slots that searches one prompt at a time.
type group struct {
	prompt    int // -1 while idle
	promptLen int
	maxLen    int
	step      int   // tokens generated so far
	slots     []int // the group's NumBeams slots

	beams    []beam                // live beams, in the rule's order
	next     []beam                // scratch for reordering
	free     []beam                // slots (with their history) holding no beam
	children []child               // the step's surviving candidates, in order
	feed     []int                 // per live beam, the index of its feed in search.feeds
	tokens   []int32               // per live beam, the token to evaluate next
	scores   [][]float32           // per live beam, the processed scores of the step
	tables   []table               // scratch: the step's candidate table
	nChild   []int32               // scratch: children per live beam
	taken    []bool                // scratch: parent slot already inherited
	best     numeric.Best[float64] // scratch: the step's best candidates
	tops     rowTops               // scratch: each row's best candidates, found in parallel

	// Transformers beam search.
	cands   []cand
	running []int // indexes into cands of the next running beams
	fin     []finished
	finNext []finished
	unsat   bool

	// Narrowing.
	done []hypRef
}

// beam is one live hypothesis: its slot, its processors' history and its
// path.
type beam struct {
	slot    int
	hist    *logits.History
	node    int32   // last node of the path, -1 for the bare prompt
	score   float32 // Transformers beam search: running score
	logprob float64 // Narrowing, greedy, sampling: summed log-probability
}

// pendingFeed is a feed of the next Eval and the beam it belongs to.
type pendingFeed struct {
	feed backend.Feed
	g    *group
	beam int
}

// child is a candidate that survives a step: the index of its parent among
// the live beams and its token.
type child struct {
	parent  int
	token   int32
	node    int32
	score   float32
	logprob float64
}

// node is one generated token of a path; paths share prefixes, so a step
// costs a node per surviving candidate whatever the length.
type node struct {
	parent int32   // previous node, -1 after the prompt
	token  int32   //
	beam   int32   // flat index prompt*NumBeams+beam of the parent beam
	score  float32 // processed score of token at its step
}

type slotState uint8

const (
	slotUnknown slotState = iota // not used by this search yet
	slotClean                    // cleared by this search
	slotDirty                    // holds a history written by this search
)

type earlyStop int

const (
	earlyFalse earlyStop = iota
	earlyTrue
	earlyNever
)

func newSearch(ctx context.Context, backend backend.Backend, prompts [][]int32, opts Options) (*search, error) {
	if backend == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrInvalid)
	}
	if opts.Rule != Transformers && opts.Rule != Narrowing {
		return nil, fmt.Errorf("%w: unknown rule %d", ErrInvalid, opts.Rule)
	}
	cfg, vocab, k, c, err := checkOptions(backend, opts)
	if err != nil {
		return nil, err
	}
	if len(prompts) == 0 {
		return nil, fmt.Errorf("%w: no prompts", ErrInvalid)
	}
	if err := checkEmbeddings(backend, prompts, opts.PromptEmbeddings); err != nil {
		return nil, err
	}
	if err := checkPositions(backend, prompts, opts.PromptEmbeddings, opts.PromptPositions); err != nil {
		return nil, err
	}
	prompts, encoder, err := splitEncoder(backend, prompts)
	if err != nil {
		return nil, err
	}
	maxLen := make([]int, len(prompts))
	for i, p := range prompts {
		if len(p) == 0 {
			return nil, fmt.Errorf("%w: prompt %d is empty", ErrInvalid, i)
		}
		for _, t := range p {
			if t < 0 || int(t) >= vocab {
				return nil, fmt.Errorf("%w: prompt %d: token %d not in [0,%d)", ErrInvalid, i, t, vocab)
			}
		}
		if _, err := cfg.CheckLengths(len(p)); err != nil {
			return nil, fmt.Errorf("%w: prompt %d: %w", ErrInvalid, i, err)
		}
		maxLen[i] = cfg.Resolve(len(p)).MaxLength
	}
	pipe, err := logits.NewPipeline(cfg, logits.Options{
		VocabSize:  vocab,
		BeamSearch: k > 1 || opts.Rule == Narrowing,
		User:       opts.User,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}

	s := &search{
		ctx:        ctx,
		backend:    backend,
		opts:       opts,
		cfg:        cfg,
		pipe:       pipe,
		choose:     pipe.Chooser(),
		vocab:      vocab,
		k:          k,
		c:          c,
		lp:         cfg.LengthPenalty,
		es:         earlyStopping(cfg),
		eos:        cfg.EOSTokenID,
		fill:       fillToken(cfg, k),
		logSoftmax: k > 1 || opts.Rule == Narrowing,
		prompts:    prompts,
		encoder:    encoder,
		maxLen:     maxLen,
		slot:       make([]slotState, backend.Slots()),
	}
	s.src.Seed(opts.Seed)
	s.res.Hypotheses = make([][]Hypothesis, len(prompts))
	if opts.Rule == Transformers {
		s.rows = make([][]outRow, len(prompts))
	}
	n := min(len(prompts), backend.Slots()/k)
	s.groups = make([]*group, n)
	longest := 0
	for i, p := range prompts {
		longest = max(longest, maxLen[i]-len(p))
	}
	s.nodes = make([]node, 0, n*k*min(longest+1, 1024))
	for i := range s.groups {
		g := newGroup(i, k, c, vocab, opts.Rule)
		s.groups[i] = g
	}
	return s, nil
}

// checkEmbeddings checks a search's PromptEmbeddings against its prompts
// and backend; the backend checks the values at Eval.
func checkEmbeddings(b backend.Backend, prompts [][]int32, embd [][][]float32) error {
	if embd == nil {
		return nil
	}
	in, ok := b.(backend.EmbeddingInput)
	switch {
	case !ok || in.InputEmbeddingSize() == 0:
		return fmt.Errorf("%w: PromptEmbeddings on a backend without input embeddings (%T)", ErrInvalid, b)
	case len(embd) != len(prompts):
		return fmt.Errorf("%w: PromptEmbeddings for %d prompts, %d given", ErrInvalid, len(embd), len(prompts))
	}
	if _, ok := b.(backend.Encoder); ok {
		return fmt.Errorf("%w: PromptEmbeddings on an encoder-decoder backend", ErrInvalid)
	}
	width := in.InputEmbeddingSize()
	for i, e := range embd {
		if e != nil && len(e) != len(prompts[i]) {
			return fmt.Errorf("%w: prompt %d: %d PromptEmbeddings entries for %d tokens", ErrInvalid, i, len(e), len(prompts[i]))
		}
		for j, row := range e {
			if row != nil && len(row) != width {
				return fmt.Errorf("%w: prompt %d: PromptEmbeddings[%d] has width %d, the model's is %d", ErrInvalid, i, j, len(row), width)
			}
		}
	}
	return nil
}

// checkPositions checks a search's PromptPositions against its prompts,
// their embeddings and backend, as generation checks a request's: each
// prompt's whole, as the first feed of an empty slot. An M-RoPE model's
// embeddings need positions.
func checkPositions(b backend.Backend, prompts [][]int32, embd [][][]float32, pos [][]backend.Pos) error {
	in, ok := b.(backend.PositionInput)
	mrope := ok && in.MRoPE()
	switch {
	case pos == nil:
	case len(pos) != len(prompts):
		return fmt.Errorf("%w: %w: PromptPositions for %d prompts, %d given", ErrInvalid, backend.ErrBadPosition, len(prompts), len(pos))
	case !slices.ContainsFunc(pos, func(p []backend.Pos) bool { return p != nil }):
	case !ok:
		return fmt.Errorf("%w: %w: PromptPositions on a backend without input positions (%T)", ErrInvalid, backend.ErrBadPosition, b)
	case !mrope:
		return fmt.Errorf("%w: %w: PromptPositions for a model with one position per input (no M-RoPE)", ErrInvalid, backend.ErrBadPosition)
	}
	for i := range prompts {
		var e [][]float32
		var p []backend.Pos
		if embd != nil {
			e = embd[i]
		}
		if pos != nil {
			p = pos[i]
		}
		switch {
		case p == nil && mrope && slices.ContainsFunc(e, func(row []float32) bool { return row != nil }):
			return fmt.Errorf("%w: %w: prompt %d: the model has multi-position RoPE (M-RoPE): its PromptEmbeddings need PromptPositions (llamacpp.Prompt.Positions)", ErrInvalid, backend.ErrBadPosition, i)
		case p == nil:
		case len(p) != len(prompts[i]):
			return fmt.Errorf("%w: %w: prompt %d: %d PromptPositions entries for %d tokens", ErrInvalid, backend.ErrBadPosition, i, len(p), len(prompts[i]))
		default:
			if _, err := backend.CheckPositions(p, e, 0); err != nil {
				return fmt.Errorf("%w: prompt %d: PromptPositions: %w", ErrInvalid, i, err)
			}
		}
	}
	return nil
}

// checkOptions validates opts against b: the config (genconfig.Default() when nil), its
// vocabulary size, the beam width k and the candidates c kept per step.
func checkOptions(b backend.Backend, opts Options) (cfg *genconfig.Config, vocab, k, c int, err error) {
	cfg = opts.Config
	if cfg == nil {
		cfg = genconfig.Default()
	}
	if eog, ok := b.(backend.EndOfGeneration); ok && cfg.EOSTokenID == nil {
		cfg = cfg.Clone()
		cfg.EOSTokenID = slices.Clone(eog.EOGTokens())
	}
	vocab = b.VocabSize()
	if vocab < 1 {
		return nil, 0, 0, 0, fmt.Errorf("%w: backend vocabulary size %d", ErrInvalid, vocab)
	}
	k = cfg.NumBeams
	if k < 1 {
		return nil, 0, 0, 0, fmt.Errorf("%w: num_beams %d < 1", ErrInvalid, k)
	}
	if opts.Rule == Transformers {
		if cfg.NumReturnSequences < 1 || cfg.NumReturnSequences > k {
			return nil, 0, 0, 0, fmt.Errorf("%w: num_return_sequences %d not in [1, num_beams=%d]", ErrInvalid, cfg.NumReturnSequences, k)
		}
	} else {
		if cfg.DoSample {
			return nil, 0, 0, 0, fmt.Errorf("%w: the narrowing rule does not sample (do_sample)", ErrInvalid)
		}
		if !(cfg.LengthPenalty >= 0) || math.IsInf(cfg.LengthPenalty, 0) {
			return nil, 0, 0, 0, fmt.Errorf("%w: narrowing length_penalty %v must be finite and >= 0", ErrInvalid, cfg.LengthPenalty)
		}
	}
	if math.IsNaN(cfg.LengthPenalty) || math.IsInf(cfg.LengthPenalty, 0) {
		return nil, 0, 0, 0, fmt.Errorf("%w: length_penalty %v", ErrInvalid, cfg.LengthPenalty)
	}
	if _, err := cfg.Validate(vocab); err != nil {
		return nil, 0, 0, 0, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	for _, e := range cfg.EOSTokenID {
		if e < 0 || int(e) >= vocab {
			return nil, 0, 0, 0, fmt.Errorf("%w: eos token %d not in [0,%d)", ErrInvalid, e, vocab)
		}
	}
	c = max(2, 1+len(cfg.EOSTokenID)) * k
	if opts.Rule == Transformers && k > 1 && c > k*vocab {
		return nil, 0, 0, 0, fmt.Errorf("%w: %d candidates per step (num_beams %d, %d eos ids) exceed num_beams*vocabulary %d",
			ErrInvalid, c, k, len(cfg.EOSTokenID), k*vocab)
	}
	if b.Slots() < k {
		return nil, 0, 0, 0, fmt.Errorf("%w: num_beams %d needs %d slots, the backend has %d", ErrTooFewSlots, k, k, b.Slots())
	}
	return cfg, vocab, k, c, nil
}

// newGroup makes the i-th group of k beams (slots i*k to i*k+k-1) with its buffers.
func newGroup(i, k, c, vocab int, rule Rule) *group {
	g := &group{
		prompt:   -1,
		beams:    make([]beam, 0, k),
		next:     make([]beam, 0, k),
		free:     make([]beam, 0, k),
		children: make([]child, 0, k),
		feed:     make([]int, k),
		tokens:   make([]int32, k),
		tables:   make([]table, k),
		scores:   make([][]float32, k),
		nChild:   make([]int32, k),
		taken:    make([]bool, k),
	}
	for j := range k {
		g.free = append(g.free, beam{slot: i*k + j, node: -1})
		g.slots = append(g.slots, i*k+j)
		g.scores[j] = make([]float32, vocab)
	}
	g.best.Reset(max(c, k)) // its storage, before the first step
	if rule == Transformers && k > 1 {
		g.cands = make([]cand, 0, c)
		g.running = make([]int, 0, k)
		g.fin = make([]finished, k)
		g.finNext = make([]finished, k)
	} else {
		g.cands = make([]cand, 0, k)
		g.done = make([]hypRef, 0, k)
	}
	return g
}

// earlyStopping maps the config's early_stopping onto the three behaviours
// of transformers.
func earlyStopping(cfg *genconfig.Config) earlyStop {
	switch cfg.EarlyStopping {
	case genconfig.EarlyStoppingTrue:
		return earlyTrue
	case genconfig.EarlyStoppingNever:
		return earlyNever
	}
	return earlyFalse
}

// fillToken is the padding of short output rows: transformers' beam search
// fills with `pad or eos[0]` (so a pad of 0 gives eos[0]) and -1 without eos;
// its greedy and sampling loop pads with pad, which defaults to eos[0].
func fillToken(cfg *genconfig.Config, k int) int32 {
	if len(cfg.EOSTokenID) == 0 {
		if k == 1 && cfg.PadTokenID != nil {
			return *cfg.PadTokenID
		}
		return -1
	}
	if cfg.PadTokenID != nil && (k == 1 || *cfg.PadTokenID != 0) {
		return *cfg.PadTokenID
	}
	return cfg.EOSTokenID[0]
}

func (s *search) isEOS(t int32) bool {
	for _, e := range s.eos {
		if e == t {
			return true
		}
	}
	return false
}

// run searches every prompt: each round admits waiting prompts into idle
// groups, evaluates one feed per live beam (a whole prompt for a new one) in
// a single Eval, and advances every group by one step.
func (s *search) run() (*Result, error) {
	for {
		if err := s.ctx.Err(); err != nil {
			return s.interrupt(err)
		}
		for _, g := range s.groups {
			if g.prompt < 0 && s.next < len(s.prompts) {
				if err := s.admit(g, s.next); err != nil {
					if cerr := s.ctx.Err(); cerr != nil {
						return s.interrupt(cerr)
					}
					return nil, err
				}
				s.next++
			}
		}
		s.pending = s.pending[:0]
		for _, g := range s.groups {
			if g.prompt < 0 {
				continue
			}
			for j, b := range g.beams {
				f := backend.Feed{Slot: b.slot, Tokens: g.tokens[j : j+1]}
				if g.step == 0 {
					f.Tokens = s.prompts[g.prompt]
					if s.opts.PromptEmbeddings != nil {
						f.Embd = s.opts.PromptEmbeddings[g.prompt]
					}
					if s.opts.PromptPositions != nil {
						f.Pos = s.opts.PromptPositions[g.prompt]
					}
				}
				s.pending = append(s.pending, pendingFeed{feed: f, g: g, beam: j})
			}
		}
		if len(s.pending) == 0 {
			break
		}
		// llama.cpp batches best with the sequences in ascending order.
		slices.SortFunc(s.pending, func(a, b pendingFeed) int { return a.feed.Slot - b.feed.Slot })
		s.feeds = s.feeds[:0]
		for i, p := range s.pending {
			s.feeds = append(s.feeds, p.feed)
			p.g.feed[p.beam] = i
		}
		for _, f := range s.feeds {
			if room := s.backend.Room(f.Slot); room < len(f.Tokens) {
				return s.interrupt(fmt.Errorf("%w: slot %d has room for %d tokens, needs %d", ErrNoRoom, f.Slot, room, len(f.Tokens)))
			}
			s.slot[f.Slot] = slotDirty
			s.res.Stats.Tokens += len(f.Tokens)
		}
		s.res.Stats.Evals++
		if err := s.backend.Eval(s.ctx, s.feeds); err != nil {
			if cerr := s.ctx.Err(); cerr != nil {
				return s.interrupt(cerr)
			}
			if errors.Is(err, backend.ErrContextFull) {
				// The slots' shared store is full: as a slot without room.
				return s.interrupt(fmt.Errorf("%w: eval: %w", ErrNoRoom, err))
			}
			return nil, fmt.Errorf("beam: eval: %w", err)
		}
		// Logits alias the backend's buffer until the next Copy or Clear, so
		// every row is processed before any group reorders.
		if err := s.processAll(); err != nil {
			return nil, err
		}
		for _, g := range s.groups {
			if g.prompt < 0 {
				continue
			}
			var done bool
			var err error
			switch {
			case s.opts.Rule == Narrowing:
				done, err = s.stepNarrowing(g)
			case s.k == 1:
				done, err = s.stepSample(g)
			default:
				done, err = s.stepBeam(g)
			}
			if err != nil {
				return nil, fmt.Errorf("beam: prompt %d, step %d: %w", g.prompt, g.step, err)
			}
			if done {
				if err := s.release(g); err != nil {
					return nil, err
				}
				continue
			}
			if err := s.reorder(g); err != nil {
				return nil, err
			}
			g.step++
		}
	}
	s.assemble()
	return &s.res, nil
}

// admit starts prompt p in the idle group g: its first slot, cleared, will
// hold the prompt for all of its beams.
func (s *search) admit(g *group, p int) error {
	prompt := s.prompts[p]
	g.prompt, g.promptLen, g.maxLen, g.step = p, len(prompt), s.maxLen[p], 0
	g.unsat = true
	g.done = g.done[:0]
	for i := range g.fin {
		g.fin[i] = finished{node: -1, score: neg}
	}
	b := g.free[len(g.free)-1]
	g.free = g.free[:len(g.free)-1]
	if s.slot[b.slot] != slotClean {
		if err := s.clear(b.slot); err != nil {
			return err
		}
	}
	if s.encoder == nil {
		b.hist = s.pipe.NewHistory(prompt)
	} else {
		b.hist = s.pipe.NewEncoderHistory(prompt, s.encoder[p])
	}
	b.node, b.score, b.logprob = -1, 0, 0
	g.beams = append(g.beams[:0], b)
	if s.encoder != nil {
		return s.encode(g, p)
	}
	return nil
}

func (s *search) keepScores(g *group, j int, row []float32) {
	for len(s.res.Scores) <= g.step {
		s.res.Scores = append(s.res.Scores, make([][]float32, len(s.prompts)*s.k))
	}
	out := s.res.Scores[g.step]
	out[g.prompt*s.k+j] = append([]float32(nil), row...)
	if g.step == 0 && s.opts.Rule == Transformers {
		// transformers runs all beams of the prompt at the first step.
		for i := 1; i < s.k; i++ {
			out[g.prompt*s.k+i] = append([]float32(nil), row...)
		}
	}
}

// reorder makes g.children the live beams. A parent with no child frees its
// slot at once; the first child of a parent inherits the parent's slot and
// history; every other child takes a free slot, which never holds a
// history anyone still needs, and copies its parent into it. Tokens are
// accepted only after every copy, so no child sees a sibling's token.
func (s *search) reorder(g *group) error {
	start := time.Now()
	defer func() { s.res.Stats.Reorder += time.Since(start) }()

	nChild, taken := g.nChild[:len(g.beams)], g.taken[:len(g.beams)]
	clear(nChild)
	clear(taken)
	for _, c := range g.children {
		nChild[c.parent]++
	}
	for i, b := range g.beams {
		if nChild[i] == 0 {
			if err := s.clear(b.slot); err != nil {
				return err
			}
			g.free = append(g.free, b)
		}
	}
	next := g.next[:0]
	for _, c := range g.children {
		p := g.beams[c.parent]
		nb := p
		if taken[c.parent] {
			nb = g.free[len(g.free)-1]
			g.free = g.free[:len(g.free)-1]
			if err := s.backend.Copy(nb.slot, p.slot); err != nil {
				return fmt.Errorf("beam: copy slot %d to %d: %w", p.slot, nb.slot, err)
			}
			s.res.Stats.Copies++
			s.slot[nb.slot] = slotDirty
			if nb.hist == nil {
				nb.hist = p.hist.Clone()
			} else {
				nb.hist.CopyFrom(p.hist)
			}
		}
		taken[c.parent] = true
		nb.node, nb.score, nb.logprob = c.node, c.score, c.logprob
		next = append(next, nb)
	}
	for i, c := range g.children {
		next[i].hist.Accept(c.token)
		g.tokens[i] = c.token
	}
	g.next, g.beams = g.beams, next
	return nil
}

// release ends g's prompt: its live beams' slots are cleared and the group
// waits for the next prompt.
func (s *search) release(g *group) error {
	for _, b := range g.beams {
		if err := s.clear(b.slot); err != nil {
			return err
		}
		g.free = append(g.free, b)
	}
	g.beams = g.beams[:0]
	g.prompt = -1
	return nil
}

func (s *search) clear(slot int) error {
	if err := s.backend.Clear(slot); err != nil {
		return fmt.Errorf("beam: clear slot %d: %w", slot, err)
	}
	s.slot[slot] = slotClean
	s.res.Stats.Clears++
	return nil
}

// releaseAll clears every slot that still holds a history of this search.
func (s *search) releaseAll() error {
	var errs []error
	for i, st := range s.slot {
		if st == slotDirty {
			errs = append(errs, s.clear(i))
		}
	}
	return errors.Join(errs...)
}

// newNode appends a path node and returns its index.
func (s *search) newNode(parent int32, token int32, beam int, score float32) int32 {
	s.nodes = append(s.nodes, node{parent: parent, token: token, beam: int32(beam), score: score})
	return int32(len(s.nodes) - 1)
}

// path returns the tokens of the path ending at n, first token first,
// appended to dst.
func (s *search) path(dst []int32, n int32) []int32 {
	start := len(dst)
	for ; n >= 0; n = s.nodes[n].parent {
		dst = append(dst, s.nodes[n].token)
	}
	reverse(dst[start:])
	return dst
}

func reverse[T any](x []T) {
	for i, j := 0, len(x)-1; i < j; i, j = i+1, j-1 {
		x[i], x[j] = x[j], x[i]
	}
}

// report calls the Progress callback, if any, for g's best hypothesis.
func (s *search) report(g *group, n int32, score float64, finished bool) {
	if s.opts.Progress == nil {
		return
	}
	s.tokens = s.path(s.tokens[:0], n)
	s.opts.Progress(Progress{
		Prompt:   g.prompt,
		Step:     g.step + 1,
		Tokens:   s.tokens,
		Score:    score,
		Finished: finished,
	})
}

// interrupt ends the search early with err (a cancellation, or ErrNoRoom):
// every prompt under way gets the hypotheses it has found so far, its
// finished ones and its live beams (Partial), best first, as many as a
// completed search returns at most.
func (s *search) interrupt(err error) (*Result, error) {
	for _, g := range s.groups {
		if g.prompt < 0 {
			continue
		}
		if s.res.Interrupted == nil {
			s.res.Interrupted = make([]bool, len(s.prompts))
		}
		s.res.Interrupted[g.prompt] = true
		if g.step == 0 {
			continue // nothing generated yet
		}
		s.res.Hypotheses[g.prompt] = s.soFar(g)
	}
	return &s.res, err
}

// soFar ranks g's hypotheses at an interruption: those that left the beam
// (finished, or cut by the length limit) and its live beams, each of
// g.step tokens, scored as the rule scores a returned hypothesis.
func (s *search) soFar(g *group) []Hypothesis {
	var hyps []Hypothesis
	most := s.k
	switch {
	case s.opts.Rule == Narrowing:
		for _, h := range g.done {
			hyps = append(hyps, Hypothesis{Tokens: s.path(make([]int32, 0, h.length), h.node), LogProb: h.logprob,
				Score: s.narrowScore(h.logprob, h.length), Finished: h.finished})
		}
		for _, b := range g.beams {
			hyps = append(hyps, Hypothesis{Tokens: s.path(make([]int32, 0, g.step), b.node), LogProb: b.logprob,
				Score: s.narrowScore(b.logprob, g.step), Partial: true})
		}
	case s.k == 1:
		most = 1
		for _, b := range g.beams {
			hyps = append(hyps, Hypothesis{Tokens: s.path(make([]int32, 0, g.step), b.node), LogProb: b.logprob,
				Score: b.logprob, Partial: true})
		}
	default:
		most = s.cfg.NumReturnSequences
		for _, e := range g.fin {
			if !e.done {
				continue
			}
			toks := s.path(nil, e.node)
			hyps = append(hyps, Hypothesis{Tokens: toks, LogProb: float64(e.sum), Score: float64(e.score),
				Finished: len(toks) > 0 && s.isEOS(toks[len(toks)-1])})
		}
		// As sequences_scores: the running score over length^length_penalty, in float32.
		denom := float32(math.Pow(float64(g.step), s.lp))
		for _, b := range g.beams {
			hyps = append(hyps, Hypothesis{Tokens: s.path(make([]int32, 0, g.step), b.node), LogProb: float64(b.score),
				Score: float64(b.score / denom), Partial: true})
		}
	}
	// Best first; among equal scores, hypotheses that left the beam first.
	slices.SortStableFunc(hyps, func(a, b Hypothesis) int { return cmp.Compare(b.Score, a.Score) })
	return hyps[:min(len(hyps), most)]
}
