package generation

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/llamaloop/llamaloop/speculative"
)

// seq is the state of one request while it runs. They are reused from one
// call to the next, with their buffers.
type seq struct {
	index  int // in the requests of the call
	req    *Request
	prompt []int32
	// encoder is the encoder input (encoder-decoder backends); encSlot
	// is the slot list of its EncoderFeed
	encoder []int32
	encSlot [1]int
	embd    [][]float32   // Request.PromptEmbeddings, or nil
	pos     []backend.Pos // Request.PromptPositions, or nil
	pipe    *logits.Pipeline
	hist    *logits.History
	maxNew  int     // new tokens allowed by max_length
	eos     []int32 // stop tokens
	stops   [][]byte
	choose  logits.Chooser // the config's (greedy or multinomial), or Mirostat
	src     logits.Source  // the request's draws, seeded with Request.Seed
	cfg     *genconfig.Config
	// sampleOnly: the chooser reads the row only through Pipeline.Sample
	sampleOnly bool
	spec       specKind
	prop       speculative.Proposal // the step's candidates
	feed       []int32              // the step's feed when it has candidates
	feedEmbd   [][]float32          // the Embd of feed when its prompt token has one
	feedPos    []backend.Pos        // the Pos of feed when its prompt token has one
	accepted   int                  // candidates accepted in the step

	// runs are the non-causal runs of the step's feed (promptRuns)
	runs []backend.Span

	ctx    context.Context // the request's own (Engine), or nil
	task   *Task           // the Engine's handle of the request, or nil
	slot   int
	nfed   int  // prompt tokens evaluated
	done   bool // finished; its slot is cleared at the end of the step
	tokens []int32
	text   []byte
	sent   int // bytes of text already in events
	top    []TokenLogprob
}

func (r *seq) isEOS(t int32) bool {
	for _, e := range r.eos {
		if e == t {
			return true
		}
	}
	return false
}

// PromptTokens returns the prompt tokens of req as Stream evaluates them:
// Prompt as it is; Text tokenized with special tokens added; Messages
// rendered by the chat template and tokenized with no special token added,
// where only the template's markers become control tokens when the
// tokenizer is a backend.ChatTokenizer (the messages' texts stay text unless
// ParseSpecial), and the whole text's special-token text otherwise. An empty prompt becomes the model's
// BOS token alone when the tokenizer adds one, and is ErrEmptyPrompt
// otherwise. Every token must be in the vocabulary.
func (g *Generator) PromptTokens(req *Request) ([]int32, error) {
	var toks []int32
	var err error
	switch {
	case req.Prompt != nil && (req.Text != "" || req.Messages != nil),
		req.Text != "" && req.Messages != nil:
		return nil, errors.New("more than one of Prompt, Text and Messages")
	case len(req.Prompt) > 0:
		toks = slices.Clone(req.Prompt)
	case req.Messages != nil:
		if g.tok == nil {
			return nil, fmt.Errorf("chat prompt: %w", ErrNoTokenizer)
		}
		tmpl, ok := g.tok.(backend.ChatTemplater)
		if !ok {
			return nil, errors.New("chat prompt: the tokenizer has no chat template")
		}
		if ct, ok := g.tok.(backend.ChatTokenizer); ok {
			contents := make([]string, len(req.Messages))
			for i, m := range req.Messages {
				contents[i] = m.Content
			}
			toks, err = ct.TokenizeChat(func(cs []string) (string, error) {
				msgs := slices.Clone(req.Messages)
				for i := range msgs {
					msgs[i].Content = cs[i]
				}
				return tmpl.ApplyChatTemplate(msgs, true)
			}, contents, req.ParseSpecial)
			if err != nil {
				return nil, fmt.Errorf("chat template: %w", err)
			}
			break
		}
		text, err := tmpl.ApplyChatTemplate(req.Messages, true)
		if err != nil {
			return nil, fmt.Errorf("chat template: %w", err)
		}
		if toks, err = g.tok.Tokenize(text, false, true); err != nil {
			return nil, fmt.Errorf("tokenize: %w", err)
		}
	case req.Text != "":
		if g.tok == nil {
			return nil, fmt.Errorf("text prompt: %w", ErrNoTokenizer)
		}
		if toks, err = g.tok.Tokenize(req.Text, true, req.ParseSpecial); err != nil {
			return nil, fmt.Errorf("tokenize: %w", err)
		}
	}
	if len(toks) == 0 {
		if g.tok == nil || !g.tok.AddsBOS() {
			return nil, ErrEmptyPrompt
		}
		if toks, err = g.tok.Tokenize("", true, false); err != nil {
			return nil, fmt.Errorf("tokenize: %w", err)
		}
		if len(toks) == 0 {
			return nil, ErrEmptyPrompt
		}
	}
	for i, t := range toks {
		if t < 0 || int(t) >= g.vocab {
			return nil, fmt.Errorf("prompt token %d: %w: %d not in [0,%d)", i, backend.ErrTokenOutOfRange, t, g.vocab)
		}
	}
	return toks, nil
}

// config is a request config made ready to run, shared by the requests that
// give the same *genconfig.Config.
type config struct {
	cfg  *genconfig.Config
	pipe *logits.Pipeline
	err  error
}

// prepare validates every request and makes its seq. Nothing is sent to the
// backend, so a failure leaves it untouched.
func (g *Generator) prepare(reqs []Request) ([]*seq, error) {
	configs := map[*genconfig.Config]*config{}
	seqs := make([]*seq, 0, len(reqs))
	for i := range reqs {
		r, err := g.prepareSeq(&reqs[i], configs, nil)
		if err != nil {
			g.release(seqs)
			return nil, fmt.Errorf("generation: request %d: %w", i, err)
		}
		r.index = i
		seqs = append(seqs, r)
	}
	return seqs, nil
}

// prepareSeq validates req and fills a seq for it: r, or one of the pool
// when r is nil.
func (g *Generator) prepareSeq(req *Request, configs map[*genconfig.Config]*config, r *seq) (*seq, error) {
	prompt, encoder, err := g.requestTokens(req)
	if err != nil {
		return nil, err
	}
	if err := g.checkEmbeddings(req); err != nil {
		return nil, err
	}
	if err := g.checkPositions(req); err != nil {
		return nil, err
	}
	c, err := g.config(req, configs)
	if err != nil {
		return nil, err
	}
	maxLength := c.cfg.Resolve(len(prompt)).MaxLength
	if len(prompt) >= maxLength {
		return nil, fmt.Errorf("prompt of %d tokens reaches max_length %d", len(prompt), maxLength)
	}
	if req.TopLogprobs < 0 {
		return nil, fmt.Errorf("TopLogprobs %d < 0", req.TopLogprobs)
	}
	if len(req.StopStrings) > 0 && g.tok == nil {
		return nil, fmt.Errorf("stop strings: %w", ErrNoTokenizer)
	}
	for _, s := range req.StopStrings {
		if s == "" {
			return nil, errors.New("empty stop string")
		}
	}
	spec, err := g.speculation(req, c.cfg)
	if err != nil {
		return nil, err
	}
	choose := c.pipe.Chooser()
	if req.Mirostat != nil {
		miro, err := mirostat.New(*req.Mirostat)
		if err != nil {
			return nil, err
		}
		choose = mirostatChooser{miro}
	}

	if r == nil {
		r = g.newSeq()
	}
	r.req = req
	r.prompt = append(r.prompt[:0], prompt...)
	r.embd, r.pos = req.PromptEmbeddings, req.PromptPositions
	r.pipe = c.pipe
	r.encoder = append(r.encoder[:0], encoder...)
	if g.enc != nil {
		r.hist = c.pipe.NewEncoderHistory(r.prompt, r.encoder)
	} else {
		r.hist = c.pipe.NewHistory(r.prompt)
	}
	r.maxNew = maxLength - len(prompt)
	r.choose = choose
	_, r.sampleOnly = choose.(logits.SampleReader)
	r.cfg, r.spec = c.cfg, spec
	r.src.Seed(req.Seed)
	r.eos = append(r.eos[:0], c.cfg.EOSTokenID...)
	if g.tok != nil {
		for _, t := range g.tok.EOGTokens() {
			if !slices.Contains(r.eos, t) {
				r.eos = append(r.eos, t)
			}
		}
	}
	for _, s := range req.StopStrings {
		r.stops = append(r.stops, []byte(s))
	}
	return r, nil
}

// config returns the ready form of req.Config, made once per call for each
// config given (per request when it has its own processors).
func (g *Generator) config(req *Request, configs map[*genconfig.Config]*config) (*config, error) {
	cfg := req.Config
	if cfg == nil {
		if g.defaultConfig == nil {
			g.defaultConfig = genconfig.Default()
		}
		cfg = g.defaultConfig
	}
	if c, ok := configs[cfg]; ok && req.Processors == nil {
		return c, c.err
	}
	c := &config{cfg: cfg}
	c.err = g.makeConfig(c, req.Processors)
	if req.Processors == nil {
		configs[cfg] = c
	}
	return c, c.err
}

func (g *Generator) makeConfig(c *config, user []logits.Processor) error {
	if _, err := c.cfg.Validate(g.vocab); err != nil {
		return err
	}
	if c.cfg.NumBeams > 1 {
		return fmt.Errorf("num_beams %d: beam search is package beam", c.cfg.NumBeams)
	}
	if c.cfg.NumReturnSequences > 1 {
		return fmt.Errorf("num_return_sequences %d: send one request per sequence, each with its seed", c.cfg.NumReturnSequences)
	}
	if c.cfg.EOSTokenID == nil && g.tok != nil {
		c.cfg = c.cfg.Clone()
		c.cfg.EOSTokenID = slices.Clone(g.tok.EOGTokens())
	}
	pipe, err := logits.NewPipeline(c.cfg, logits.Options{VocabSize: g.vocab, User: user})
	if err != nil {
		return err
	}
	c.pipe = pipe
	return nil
}

// release returns seqs to the pool, dropping their references to the
// caller's data.
func (g *Generator) release(seqs []*seq) {
	for _, r := range seqs {
		r.req, r.pipe, r.hist, r.choose, r.cfg = nil, nil, nil, nil, nil
		r.ctx, r.task = nil, nil
	}
	g.pool = append(g.pool, seqs...)
}

func (g *Generator) newSeq() *seq {
	if n := len(g.pool); n > 0 {
		var r *seq
		r, g.pool = g.pool[n-1], g.pool[:n-1]
		return r.reset()
	}
	return newSeq()
}

func newSeq() *seq { return new(seq).reset() }

// reset makes r an unused seq, keeping its buffers.
func (r *seq) reset() *seq {
	r.req, r.pipe, r.hist, r.choose, r.cfg = nil, nil, nil, nil, nil
	r.ctx, r.task = nil, nil
	r.spec, r.prop.Tokens, r.prop.Probs = specNone, r.prop.Tokens[:0], r.prop.Probs[:0]
	r.nfed, r.done, r.sent, r.slot = 0, false, 0, -1
	r.tokens, r.text, r.top, r.stops = r.tokens[:0], r.text[:0], r.top[:0], r.stops[:0]
	return r
}

// mirostatChooser ends a request's chain with a Mirostat sampler of its own:
// one uniform of the request's Source per token, passed to the sampler's draw.
type mirostatChooser struct{ s *mirostat.Sampler }

// Choose implements logits.Chooser.
func (c mirostatChooser) Choose(_ *logits.History, scores []float32, src *logits.Source) (int, error) {
	// Mirostat fails on a row with a NaN (its normalizer becomes NaN) and
	// then leaves its state as it was, so the row is searched for the NaN
	// only then: a pass of its own would cost a tenth of the step at a
	// vocabulary of 128256.
	st, err := c.s.SampleLogits(scores, src.Float64())
	if err != nil {
		for i, x := range scores {
			if x != x {
				return -1, fmt.Errorf("%w: NaN score at %d", logits.ErrNoChoice, i)
			}
		}
		return -1, fmt.Errorf("%w: mirostat: %w", logits.ErrNoChoice, err)
	}
	return int(st.Token), nil
}
