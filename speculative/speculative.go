package speculative

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/logits"
)

// Request is one sequence to generate.
type Request struct {
	// Prompt is the prompt's tokens; it must not be empty.
	Prompt []int32
	// Config is the request's generation config (genconfig.Default() when
	// nil). Its prompt_lookup_num_tokens selects prompt lookup; otherwise the
	// Decoder's draft model proposes the candidates.
	Config *genconfig.Config
	// Seed seeds the request's draws when Config samples.
	Seed uint64
}

// Stats counts one request's speculation.
type Stats struct {
	Steps    int // evaluations of the target (verification steps)
	Drafted  int // candidate tokens proposed
	Accepted int // candidate tokens accepted
}

// AcceptanceRate is Accepted / Drafted (0 when nothing was drafted).
func (s Stats) AcceptanceRate() float64 {
	if s.Drafted == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Drafted)
}

// MeanAccepted is the mean number of accepted candidates per target step.
func (s Stats) MeanAccepted() float64 {
	if s.Steps == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Steps)
}

// Add returns the sum of s and t.
func (s Stats) Add(t Stats) Stats {
	return Stats{Steps: s.Steps + t.Steps, Drafted: s.Drafted + t.Drafted, Accepted: s.Accepted + t.Accepted}
}

// Event is one step of one request: the tokens it gained (the accepted
// candidates and the target's token), or its end.
type Event struct {
	// Request is the index of the request in the slice given to Stream.
	Request int
	// Slot is the slot that serves the request in the target and in the
	// draft model (-1 when it never had one). During the events of a step
	// the backends hold that step's result: a running request's slot holds
	// its sequence but the last token, a finished request's slot is empty.
	Slot int
	// Tokens are the step's new tokens. The slice aliases the decoder's
	// buffer: valid until the iteration resumes.
	Tokens []int32
	// Drafted and Accepted count the step's candidates.
	Drafted, Accepted int
	// Finish is set on the request's last event.
	Finish generation.FinishReason
	// Err explains FinishError, FinishContextFull and FinishCancelled.
	Err error
}

// Result is the outcome of one request.
type Result struct {
	Tokens []int32 // the generated tokens, prompt excluded
	Finish generation.FinishReason
	Err    error
	Stats  Stats
}

// Add gathers ev, an event of the request, into r, as Generate does: its
// tokens, its candidates, a step when it evaluated anything, and its end.
func (r *Result) Add(ev Event) {
	r.Tokens = append(r.Tokens, ev.Tokens...)
	r.Stats.Drafted += ev.Drafted
	r.Stats.Accepted += ev.Accepted
	if ev.Tokens != nil || ev.Drafted > 0 {
		r.Stats.Steps++
	}
	if ev.Finish != generation.NotFinished {
		r.Finish, r.Err = ev.Finish, ev.Err
	}
}

// Options configures a Decoder.
type Options struct {
	// Draft is the draft model's backend (transformers' assistant_model),
	// with the target's vocabulary; its slot i serves the request in the
	// target's slot i. Requests whose config sets prompt_lookup_num_tokens
	// use prompt lookup instead; without Draft every request must.
	Draft backend.Backend
	// Tokenizer, when set, adds its end-of-generation tokens to each
	// request's eos_token_id, as generation.Generator does.
	Tokenizer backend.Tokenizer
}

// Decoder runs speculative decoding on a target backend. It keeps its
// buffers from one call to the next. A Decoder is not safe for concurrent
// use, and neither are its backends.
type Decoder struct {
	target backend.Backend
	all    allLogits
	vocab  int
	eog    []int32
	draft  *DraftModel
	lookup *PromptLookup
	gens   []CandidateGenerator
	slots  int

	rows  []*Sequence
	feeds []backend.Feed
	fed   []*Sequence
	tmp   []*Sequence
	probs []float32 // softmax of a processed target row
}

// New returns a decoder over target. It fails when the draft model's
// vocabulary differs from the target's.
func New(target backend.Backend, opts Options) (*Decoder, error) {
	d := &Decoder{target: target, vocab: target.VocabSize(), slots: target.Slots(), lookup: &PromptLookup{}}
	d.all = newAllLogits(target)
	if opts.Draft != nil {
		if opts.Draft.VocabSize() != d.vocab {
			return nil, fmt.Errorf("speculative: the draft model's vocabulary has %d tokens, the target's %d",
				opts.Draft.VocabSize(), d.vocab)
		}
		d.draft = &DraftModel{b: opts.Draft}
		d.slots = min(d.slots, opts.Draft.Slots())
	}
	if opts.Tokenizer != nil {
		d.eog = slices.Clone(opts.Tokenizer.EOGTokens())
	}
	d.probs = make([]float32, d.vocab)
	return d, nil
}

// Generate runs Stream to the end and gathers each request's output. On a
// backend failure it returns the outputs so far with the error.
func (d *Decoder) Generate(ctx context.Context, reqs []Request) ([]Result, error) {
	res := make([]Result, len(reqs))
	for ev, err := range d.Stream(ctx, reqs) {
		if err != nil {
			return res, err
		}
		res[ev.Request].Add(ev)
	}
	return res, nil
}

// Stream generates every request and yields, per step, one event for each
// request that took a step (its accepted candidates and the target's token),
// the last one with Finish set. Invalid requests are reported before
// anything runs, as a single error; a backend failure as an error after the
// events before it, and the stream then ends with every slot cleared.
// Cancellation ends every unfinished request with FinishCancelled.
func (d *Decoder) Stream(ctx context.Context, reqs []Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		rows, err := d.prepare(reqs)
		if err != nil {
			yield(Event{}, err)
			return
		}
		d.run(ctx, rows, yield)
	}
}

// prepare validates every request and makes its sequence.
func (d *Decoder) prepare(reqs []Request) ([]*Sequence, error) {
	pipes := map[*genconfig.Config]*logits.Pipeline{}
	rows := make([]*Sequence, len(reqs))
	for i := range reqs {
		s, err := d.prepareOne(&reqs[i], pipes)
		if err != nil {
			return nil, fmt.Errorf("speculative: request %d: %w", i, err)
		}
		s.index = i
		rows[i] = s
	}
	return rows, nil
}

func (d *Decoder) prepareOne(req *Request, pipes map[*genconfig.Config]*logits.Pipeline) (*Sequence, error) {
	if len(req.Prompt) == 0 {
		return nil, generation.ErrEmptyPrompt
	}
	for i, t := range req.Prompt {
		if t < 0 || int(t) >= d.vocab {
			return nil, fmt.Errorf("prompt token %d: %w: %d not in [0,%d)", i, backend.ErrTokenOutOfRange, t, d.vocab)
		}
	}
	cfg := req.Config
	if cfg == nil {
		cfg = genconfig.Default()
	}
	pipe, ok := pipes[cfg]
	if !ok {
		if cfg.NumBeams > 1 {
			return nil, fmt.Errorf("num_beams %d: speculative decoding runs greedy search and sampling only", cfg.NumBeams)
		}
		if cfg.NumReturnSequences > 1 {
			return nil, fmt.Errorf("num_return_sequences %d: send one request per sequence", cfg.NumReturnSequences)
		}
		var err error
		if pipe, err = logits.NewPipeline(cfg, logits.Options{VocabSize: d.vocab}); err != nil {
			return nil, err
		}
		pipes[cfg] = pipe
	}
	maxLength := cfg.Resolve(len(req.Prompt)).MaxLength
	if len(req.Prompt) >= maxLength {
		return nil, fmt.Errorf("prompt of %d tokens reaches max_length %d", len(req.Prompt), maxLength)
	}
	s := &Sequence{
		prompt:    slices.Clone(req.Prompt),
		cfg:       cfg,
		pipe:      pipe,
		hist:      pipe.NewHistory(req.Prompt),
		choose:    pipe.Chooser(),
		sampling:  cfg.DoSample,
		maxLength: maxLength,
		slot:      -1,
	}
	s.src.Seed(req.Seed)
	s.dsrc.Seed(req.Seed ^ draftStream)
	s.eos = slices.Clone(cfg.EOSTokenID)
	for _, t := range d.eog {
		if !slices.Contains(s.eos, t) {
			s.eos = append(s.eos, t)
		}
	}
	switch {
	case cfg.PromptLookup():
		s.gen = d.lookup
	case d.draft != nil:
		s.gen = d.draft
	default:
		return nil, errors.New("no candidate generator: give the Decoder a draft model or set prompt_lookup_num_tokens")
	}
	return s, nil
}
