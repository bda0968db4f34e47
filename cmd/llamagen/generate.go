package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/cli"
)

// row is the output of one generated sequence so far.
type row struct {
	index        int // row number in the output
	promptIndex  int // which prompt
	sequence     int // which of the prompt's return sequences
	sequences    int // how many the prompt has
	prompt       prompt
	promptTokens int
	text         []byte
	tokens       []int32
	finish       string
	stopString   string
	err          error
	score        *float64 // beam search
	method       string   // --demo
}

// stats measures a run for the summary line.
type stats struct {
	start, first, end time.Time
	promptTokens      int // tokens of the prompts evaluated before the first token
	cachedTokens      int // of those, tokens a prefix cache held (not evaluated)
	firstTokens       int // tokens produced by that evaluation
	generated         int
	rows              int
	spec              generation.SpeculationStats
}

// generate streams the continuations of prompts (greedy, sampling or
// Mirostat) through one batch.
func (s *session) generate(ctx context.Context, prompts []prompt) error {
	rows, reqs, err := s.requests(prompts)
	if err != nil {
		return err
	}
	maxCells := 0
	for i := range reqs {
		maxNew := s.cfg.Resolve(rows[i].promptTokens).MaxLength - rows[i].promptTokens
		maxCells = max(maxCells, rows[i].promptTokens+max(maxNew, 0))
	}
	if s.o.ctx > 0 {
		maxCells = s.o.ctx
	}
	slots := min(len(reqs), s.o.parallel)
	lb, err := s.newBackend(slots, maxCells, false)
	if err != nil {
		return err
	}
	defer closeBackend(lb)

	gen, closeDraft, err := s.generator(ctx, contract(lb), slots, maxCells)
	if err != nil {
		return err
	}
	defer closeDraft()
	p := s.newPrinter(len(rows) > 1)
	st, err := s.stream(ctx, gen, reqs, rows, slots, p)
	p.close()
	if err == nil {
		s.contextFullNotice(rows, roundUp(maxCells, 256))
	}
	if err == nil || ctx.Err() != nil {
		note := ""
		if s.speculating() {
			note = speculationNote(st.spec)
		}
		s.summary(st, note)
	}
	return err
}

// contextFullNotice says on stderr (unless --quiet or --json, whose
// result lines say "context full") that rows stopped because their
// sequence of cells KV cells was full: the text ends there, with exit
// status 0, as it does at the length limit.
func (s *session) contextFullNotice(rows []*row, cells int) {
	if s.o.quiet || s.o.json {
		return
	}
	full := 0
	for _, r := range rows {
		if r.finish == generation.FinishContextFull.String() {
			full++
		}
	}
	what := "generation stopped"
	switch {
	case full == 0:
		return
	case len(rows) > 1:
		what = fmt.Sprintf("%d of %d sequences stopped", full, len(rows))
	}
	fmt.Fprintf(s.stderr, "llamagen: %s: the context is full (%d cells per sequence: --ctx rounded up to a multiple of 256, or sized for the prompt and --max-new-tokens); raise --ctx\n", what, cells)
}

// requests builds one request per output row; --num-return-sequences N
// sends each prompt N times with consecutive seeds.
func (s *session) requests(prompts []prompt) ([]*row, []generation.Request, error) {
	cfg := s.cfg
	n := max(cfg.NumReturnSequences, 1)
	if n > 1 {
		if !cfg.DoSample && s.o.mirostat == 0 {
			return nil, nil, cli.Usagef("--num-return-sequences %d needs --do-sample, --mirostat or --num-beams", n)
		}
		cfg = cfg.Clone()
		cfg.NumReturnSequences = 1
	}
	var rows []*row
	var reqs []generation.Request
	for pi, p := range prompts {
		base := p.request(s.o.chat, s.o.system, s.o.parseSpecial)
		toks, err := s.tokenize(&base)
		if err != nil {
			return nil, nil, fmt.Errorf("prompt %q: %w", p.label(), err)
		}
		var mreq generation.Request
		if s.proj != nil {
			if err := s.mediaRequest(s.proj, s.media, p.Text, &mreq); err != nil {
				return nil, nil, fmt.Errorf("prompt %q: %w", p.label(), err)
			}
			toks = mreq.Prompt
		}
		for j := range n {
			req := generation.Request{
				Prompt: toks, PromptEmbeddings: mreq.PromptEmbeddings, PromptPositions: mreq.PromptPositions,
				PromptNonCausal: mreq.PromptNonCausal, Config: cfg, Seed: s.seed + uint64(len(reqs)),
				StopStrings: cfg.StopStrings,
				Logprobs:    s.o.logprobs > 0, TopLogprobs: s.o.logprobs,
				Processors:       s.procs,
				TrimLeadingSpace: s.o.trimLeadingSpace,
			}
			if s.o.mirostat != 0 {
				req.Mirostat = s.o.mirostatConfig()
			}
			reqs = append(reqs, req)
			rows = append(rows, &row{index: len(rows), promptIndex: pi, sequence: j, sequences: n, prompt: p, promptTokens: len(toks)})
		}
	}
	return rows, reqs, nil
}

// stream runs the generator and feeds the printer. slots is how many rows
// run at once (their prompts count as prompt evaluation).
func (s *session) stream(ctx context.Context, gen *generation.Generator, reqs []generation.Request, rows []*row, slots int, p printer) (stats, error) {
	genCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	over := s.overMaxTime()
	st := stats{start: time.Now(), rows: len(rows)}
	for i := range min(slots, len(rows)) {
		st.promptTokens += rows[i].promptTokens
	}
	var streamErr error
	for ev, err := range gen.Stream(genCtx, reqs) {
		if err != nil {
			streamErr = err
			break
		}
		if err := s.outputErr(); err != nil {
			// No one sees the rest: stop generating.
			streamErr = err
			break
		}
		now := time.Now()
		if st.first.IsZero() {
			st.first = now
		}
		if ev.Token >= 0 && over() {
			cancel() // the rows still running end with max_time
		}
		r := rows[ev.Request]
		st.spec.Add(ev)
		if ev.Token >= 0 {
			st.generated++
			r.tokens = append(r.tokens, ev.Token)
			r.text = append(r.text, ev.Text...)
			p.token(r, &ev)
		} else {
			r.text = append(r.text, ev.Text...)
		}
		if ev.Finish != generation.NotFinished {
			r.finish = ev.Finish.String()
			if ev.Finish == generation.FinishCancelled && ctx.Err() == nil {
				r.finish = "max_time"
			}
			r.stopString = ev.StopString
			if ev.Finish != generation.FinishCancelled {
				// A cancelled row's Err is the context's error, which
				// the finish reason already says.
				r.err = ev.Err
			}
			p.finish(r)
		}
	}
	st.end = time.Now()
	st.firstTokens = min(slots, len(rows), st.generated)
	if streamErr != nil {
		return st, streamErr
	}
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	for _, r := range rows {
		if r.finish == generation.FinishError.String() {
			return st, fmt.Errorf("row %d: %w", r.index+1, r.err)
		}
		if r.finish == generation.FinishContextFull.String() && errors.Is(r.err, generation.ErrPromptTooLong) {
			return st, fmt.Errorf("prompt %q: %w (raise --ctx)", r.prompt.label(), r.err)
		}
	}
	return st, nil
}

// outputErr is the error of a failed write to stdout, or nil.
func (s *session) outputErr() error {
	if out, ok := s.stdout.(*cli.Output); ok {
		return out.Err()
	}
	return nil
}

// summary writes the speed line to stderr (unless --quiet); note ends it.
func (s *session) summary(st stats, note string) {
	if s.o.quiet || st.start.IsZero() {
		return
	}
	line := ""
	if !st.first.IsZero() {
		pd := st.first.Sub(st.start)
		if st.cachedTokens > 0 {
			line = fmt.Sprintf("prompt: %d tokens, %d of them cached, in %s (%s tokens/s evaluated)",
				st.promptTokens, st.cachedTokens, seconds(pd), rate(st.promptTokens-st.cachedTokens, pd))
		} else {
			line = fmt.Sprintf("prompt: %d tokens in %s (%s tokens/s)", st.promptTokens, seconds(pd), rate(st.promptTokens, pd))
		}
		gd := st.end.Sub(st.first)
		n := st.generated - st.firstTokens
		line += fmt.Sprintf("; generation: %d tokens in %s (%s tokens/s)", st.generated, seconds(gd), rate(n, gd))
	} else {
		line = fmt.Sprintf("no token generated in %s", seconds(time.Since(st.start)))
	}
	if st.rows > 1 {
		line += fmt.Sprintf("; %d sequences", st.rows)
	}
	line += fmt.Sprintf("; %s, %s", cli.DeviceSummary(s.o.gpuLayers, s.model.Info().Layers), threads(s.o.threads))
	if s.seedShown {
		line += fmt.Sprintf(", seed %d", s.seed)
	}
	if note != "" {
		line += "; " + note
	}
	fmt.Fprintln(s.stderr, line)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// rate is n per d, formatted; "-" when d is zero.
func rate(n int, d time.Duration) string {
	if d <= 0 || n <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(n)/d.Seconds())
}

func threads(n int) string {
	if n == 1 {
		return "1 thread"
	}
	return fmt.Sprintf("%d threads", n)
}
