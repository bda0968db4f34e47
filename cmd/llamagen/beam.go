package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// beamSearch runs package beam on every prompt (--num-beams > 1) and
// prints the returned sequences when the search ends: a later step can
// replace any token, so beam search cannot stream.
func (s *session) beamSearch(ctx context.Context, prompts []prompt) error {
	switch {
	case s.o.mirostat != 0:
		return cli.Usagef("--mirostat does not combine with --num-beams")
	case s.o.logprobs > 0:
		return cli.Usagef("--logprobs is not available with --num-beams (the result's score is printed instead)")
	case len(s.cfg.StopStrings) > 0:
		return cli.Usagef("--stop-strings is not available with --num-beams")
	}
	cfg := s.cfg // with no eos_token_id, the search takes the model's end-of-generation tokens
	var rows []*row
	var toks [][]int32
	var embd [][][]float32  // with --image or --audio: each prompt's embeddings
	var pos [][]backend.Pos // and an M-RoPE projector's positions
	for i, p := range prompts {
		req := p.request(s.o.chat, s.o.system, s.o.parseSpecial)
		t, err := s.tokenize(&req)
		if err != nil {
			return fmt.Errorf("prompt %q: %w", p.label(), err)
		}
		if s.proj != nil {
			var mreq generation.Request
			if err := s.mediaRequest(s.proj, s.media, p.Text, &mreq); err != nil {
				return fmt.Errorf("prompt %q: %w", p.label(), err)
			}
			t = mreq.Prompt
			embd, pos = append(embd, mreq.PromptEmbeddings), append(pos, mreq.PromptPositions)
		}
		toks = append(toks, t)
		rows = append(rows, &row{promptIndex: i, prompt: p, promptTokens: len(t)})
	}
	searchCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	over := s.overMaxTime()
	res, st, err := s.runBeams(searchCtx, cfg, toks, embd, pos, s.o.ctx, s.o.parallel, func() {
		if over() {
			cancel(errMaxTime)
		}
	})
	if res == nil {
		return err
	}
	// An interrupted search still found hypotheses: print them, with why
	// their search ended early.
	cut := ""
	switch {
	case err == nil:
	case ctx.Err() != nil:
		cut = generation.FinishCancelled.String()
	case context.Cause(searchCtx) == errMaxTime:
		cut = "max_time"
	case errors.Is(err, beam.ErrNoRoom):
		cut = generation.FinishContextFull.String()
	default:
		return err
	}
	out := s.beamRows(res, rows, cut)
	p := s.newPrinter(len(out) > 1)
	for _, r := range out {
		p.finish(r)
	}
	p.close()
	note := fmt.Sprintf("beam search, %d beams", cfg.NumBeams)
	if len(out) == 1 && out[0].score != nil {
		note += fmt.Sprintf(", score %.4f", *out[0].score)
	}
	if cut != "" {
		note += "; stopped early (" + cut + "): the hypotheses found so far"
		if cut == generation.FinishContextFull.String() {
			note += "; raise --ctx"
		}
	}
	s.summary(st, note)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return s.outputErr()
}

// runBeams searches prompts on a unified-cache context sized by beam's
// rule: each prompt once plus NumBeams cells per step, for the prompts
// searched at once. ctxCells, when positive, replaces the per-prompt need.
// errMaxTime is the cause of a beam search that --max-time ends.
var errMaxTime = errors.New("max_time")

// runBeams searches prompts' beams; step, when set, is called after every
// step of every prompt.
func (s *session) runBeams(ctx context.Context, cfg *genconfig.Config, prompts [][]int32, embd [][][]float32, pos [][]backend.Pos, ctxCells, parallel int, step func()) (*beam.Result, stats, error) {
	beams := cfg.NumBeams
	atOnce := max(1, min(len(prompts), parallel, llamacpp.MaxSequences()/beams))
	if beams > llamacpp.MaxSequences() {
		return nil, stats{}, cli.Usagef("--num-beams %d: llama.cpp holds at most %d sequences", beams, llamacpp.MaxSequences())
	}
	need := 0
	for _, p := range prompts {
		maxNew := max(cfg.Resolve(len(p)).MaxLength-len(p), 0)
		need = max(need, len(p)+beams*maxNew)
	}
	if ctxCells > 0 {
		need = ctxCells
	}
	lb, err := s.newBackend(beams*atOnce, atOnce*need, true)
	if err != nil {
		return nil, stats{}, err
	}
	defer closeBackend(lb)

	st := stats{rows: len(prompts)}
	for i := range atOnce {
		st.promptTokens += len(prompts[i])
	}
	var bar *cli.ProgressBar
	if s.stderrTerminal && !s.o.quiet {
		bar = cli.NewProgressBar(s.stderr, fmt.Sprintf("beam search (%d beams)", beams))
	}
	maxNew := max(cfg.Resolve(len(prompts[0])).MaxLength-len(prompts[0]), 1)
	opts := beam.Options{Config: cfg, Seed: s.seed, User: s.procs, PromptEmbeddings: embd, PromptPositions: pos, Progress: func(p beam.Progress) {
		if st.first.IsZero() {
			st.first = time.Now()
		}
		if p.Prompt == 0 {
			bar.Set(float32(p.Step) / float32(maxNew))
		}
		if step != nil {
			step()
		}
	}}
	st.start = time.Now()
	res, err := beam.Search(ctx, contract(lb), prompts, opts)
	st.end = time.Now()
	bar.Done()
	if res == nil {
		return nil, st, err
	}
	for _, hyps := range res.Hypotheses {
		if len(hyps) > 0 {
			st.generated += len(hyps[0].Tokens)
		}
	}
	st.firstTokens = min(atOnce, st.generated)
	// An interruption (cancelled, max_time, a full context) comes with the
	// hypotheses found so far.
	return res, st, err
}

// beamRows turns the hypotheses of every prompt into output rows. cut is
// the finish reason of the hypotheses that an interrupted search left
// unfinished (Partial), and of the prompts it never reached ("" when the
// search ran to its end).
func (s *session) beamRows(res *beam.Result, prompts []*row, cut string) []*row {
	var out []*row
	for i, hyps := range res.Hypotheses {
		if len(hyps) == 0 && cut != "" {
			r := *prompts[i]
			r.index, r.sequences, r.finish = len(out), 1, cut
			out = append(out, &r)
			continue
		}
		for j, h := range hyps {
			r := *prompts[i]
			r.index, r.sequence, r.sequences = len(out), j, len(hyps)
			r.tokens = h.Tokens
			r.text = s.detokenize(h.Tokens)
			score := h.Score
			r.score = &score
			switch {
			case h.Partial:
				r.finish = cut
			case h.Finished:
				r.finish = generation.FinishEOS.String()
			default:
				r.finish = generation.FinishLength.String()
			}
			out = append(out, &r)
		}
	}
	return out
}

// detokenize is the text of tokens as generation renders it: each token's
// bytes, control tokens without text, and with --trim-leading-space
// without the first space.
func (s *session) detokenize(tokens []int32) []byte {
	var b []byte
	for _, t := range tokens {
		b, _ = s.model.Vocab().AppendPiece(b, t, false)
	}
	if s.o.trimLeadingSpace {
		b = generation.TrimLeadingSpace(b)
	}
	return b
}
