package main

import (
	"context"
	"fmt"
	"time"

	"github.com/llamaloop/llamaloop/genconfig"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/llamaloop/llamaloop/speculative"
)

// speculative generates with package speculative: the draft model of
// --assistant-model, or prompt lookup (--prompt-lookup). Greedy output is
// the plain greedy output; sampled output follows the same distribution
// (with other draws). The summary adds the acceptance rate.
func (s *session) speculative(ctx context.Context, prompts []prompt) error {
	switch {
	case s.cfg.NumBeams > 1:
		return cli.Usagef("--assistant-model and --prompt-lookup run greedy search and sampling, not --num-beams %d", s.cfg.NumBeams)
	case s.o.mirostat != 0:
		return cli.Usagef("--assistant-model and --prompt-lookup do not run --mirostat")
	case len(s.procs) > 0:
		return cli.Usagef("--assistant-model and --prompt-lookup take no --grammar, --json-schema or --any-json")
	case s.o.logprobs > 0 || s.o.json:
		return cli.Usagef("--assistant-model and --prompt-lookup print text only: no --logprobs or --json")
	case len(s.cfg.StopStrings) > 0:
		return cli.Usagef("--assistant-model and --prompt-lookup take no --stop-strings")
	}
	rows, greqs, err := s.requests(prompts)
	if err != nil {
		return err
	}
	reqs := make([]speculative.Request, len(greqs))
	maxCells := 0
	for i, g := range greqs {
		reqs[i] = speculative.Request{Prompt: g.Prompt, Config: g.Config, Seed: g.Seed}
		maxCells = max(maxCells, s.cfg.Resolve(rows[i].promptTokens).MaxLength)
	}
	if s.o.ctx > 0 {
		maxCells = s.o.ctx
	}
	slots := min(len(reqs), s.o.parallel)
	target, err := s.newBackend(slots, maxCells, false)
	if err != nil {
		return err
	}
	defer closeBackend(target)
	opts := speculative.Options{Tokenizer: s.tok}
	if s.o.assistantModel != "" {
		draft, closeDraft, err := s.draftBackend(ctx, slots, maxCells)
		if err != nil {
			return err
		}
		defer closeDraft()
		opts.Draft = draft
	}
	dec, err := speculative.New(target, opts)
	if err != nil {
		return fmt.Errorf("--assistant-model: %w", err)
	}

	p := s.newPrinter(len(rows) > 1)
	st, spec, err := s.streamSpeculative(ctx, dec, reqs, rows, slots, p)
	p.close()
	if err == nil || ctx.Err() != nil {
		s.summary(st, fmt.Sprintf("speculative: %d of %d candidates accepted (%.0f%%), %.2f per step",
			spec.Accepted, spec.Drafted, 100*spec.AcceptanceRate(), spec.MeanAccepted()))
	}
	return err
}

// draftBackend loads --assistant-model and makes a backend of slots
// sequences of cells cells over it; closeDraft frees both.
func (s *session) draftBackend(ctx context.Context, slots, cells int) (draft *llamabackend.Backend, closeDraft func(), err error) {
	dm, err := cli.LoadModel(ctx, s.o.assistantModel, s.o.gpuLayers, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("--assistant-model: %w", err)
	}
	size := slots * roundUp(cells, 256)
	dctx, err := cli.NewContext(dm, "--assistant-model, "+s.sizeOptions(slots),
		llamacpp.ContextParams{ContextSize: size, Sequences: slots, Threads: s.o.threads})
	if err != nil {
		dm.Close()
		return nil, nil, err
	}
	if draft, err = llamabackend.New(dctx); err != nil {
		dctx.Close()
		dm.Close()
		return nil, nil, fmt.Errorf("--assistant-model: %w", err)
	}
	return draft, func() { closeBackend(draft); dm.Close() }, nil
}

// streamSpeculative runs the decoder and feeds the printer, as stream does
// for the plain loop.
func (s *session) streamSpeculative(ctx context.Context, dec *speculative.Decoder, reqs []speculative.Request, rows []*row, slots int, p printer) (stats, speculative.Stats, error) {
	genCtx := ctx
	if t := s.cfg.MaxTime; t != nil && *t > 0 {
		var cancel context.CancelFunc
		genCtx, cancel = context.WithTimeout(ctx, time.Duration(*t*float64(time.Second)))
		defer cancel()
	}
	st := stats{rows: len(rows)}
	var spec speculative.Stats
	for i := range min(slots, len(rows)) {
		st.promptTokens += rows[i].promptTokens
	}
	st.start = time.Now()
	vocab := s.model.Vocab()
	firstRows := 0
	for ev, err := range dec.Stream(genCtx, reqs) {
		if err != nil {
			st.end = time.Now()
			return st, spec, err
		}
		if st.first.IsZero() && len(ev.Tokens) > 0 {
			st.first = time.Now()
		}
		// The first step's tokens (the prompts' evaluation gave them) do
		// not count for the generation speed, as in the plain loop.
		if r := rows[ev.Request]; len(r.tokens) == 0 && firstRows < slots {
			firstRows++
			st.firstTokens += len(ev.Tokens)
		}
		spec.Drafted += ev.Drafted
		spec.Accepted += ev.Accepted
		if len(ev.Tokens) > 0 {
			spec.Steps++
		}
		r := rows[ev.Request]
		for _, t := range ev.Tokens {
			st.generated++
			r.tokens = append(r.tokens, t)
			n := len(r.text)
			r.text, _ = vocab.AppendPiece(r.text, t, false)
			p.token(r, &generation.Event{Request: ev.Request, Token: t, Text: r.text[n:]})
		}
		if ev.Finish != generation.NotFinished {
			r.finish, r.err = ev.Finish.String(), ev.Err
			if ev.Finish == generation.FinishCancelled {
				r.err = nil
				if ctx.Err() == nil {
					r.finish = "max_time"
				}
			}
			p.finish(r)
		}
	}
	st.end = time.Now()
	if ctx.Err() != nil {
		return st, spec, ctx.Err()
	}
	for _, r := range rows {
		if r.finish == generation.FinishError.String() || r.finish == generation.FinishContextFull.String() && r.err != nil {
			return st, spec, fmt.Errorf("row %d: %w", r.index+1, r.err)
		}
	}
	return st, spec, nil
}

// demoPromptLookup is the demo's prompt lookup length when neither
// --prompt-lookup nor --assistant-model is given.
const demoPromptLookup = 10

// demoSpeculative is --demo's fifth method: greedy speculative decoding
// with --assistant-model or prompt lookup, whose text is greedy's.
func (s *session) demoSpeculative(ctx context.Context, greedy *genconfig.Config, toks []int32, p prompt) (*demoMethod, error) {
	cfg := greedy.Clone()
	if s.o.assistantModel == "" && !cfg.PromptLookup() {
		n := demoPromptLookup
		cfg.PromptLookupNumTokens = &n
	}
	m := &demoMethod{name: "speculative greedy"}
	m.row = &row{index: 4, sequences: 1, prompt: p, promptTokens: len(toks), method: m.name}
	lb, err := s.newBackend(1, cfg.Resolve(len(toks)).MaxLength, false)
	if err != nil {
		return nil, err
	}
	defer closeBackend(lb)
	opts := speculative.Options{Tokenizer: s.tok}
	var what string
	if cfg.PromptLookup() {
		what = fmt.Sprintf("prompt lookup %d", *cfg.PromptLookupNumTokens)
	} else {
		draft, closeDraft, err := s.draftBackend(ctx, 1, cfg.Resolve(len(toks)).MaxLength)
		if err != nil {
			return nil, err
		}
		defer closeDraft()
		opts.Draft = draft
		what = fmt.Sprintf("draft %s, %d tokens", shortName(s.o.assistantModel), cfg.NumAssistantTokens)
	}
	dec, err := speculative.New(lb, opts)
	if err != nil {
		return nil, fmt.Errorf("--assistant-model: %w", err)
	}
	start := time.Now()
	_, st, err := s.streamSpeculative(ctx, dec, []speculative.Request{{Prompt: toks, Config: cfg}}, []*row{m.row}, 1, nopPrinter{})
	m.elapsed = time.Since(start)
	if err != nil {
		return nil, err
	}
	m.settings = fmt.Sprintf("%s; %d of %d accepted, %d steps", what, st.Accepted, st.Drafted, st.Steps)
	return m, nil
}
