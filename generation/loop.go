package generation

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/numeric"
	"github.com/llamaloop/llamaloop/logits"
)

// queue gives the decoding loop its requests: the requests of one Stream
// call, or those submitted to an Engine while it runs.
type queue interface {
	// pop returns the next request waiting for a slot, or nil when none
	// waits. With wait the loop has nothing else to do: pop may block until
	// a request comes, and nil then ends the loop.
	pop(wait bool) *seq
}

// sliceQueue is the queue of a Stream call: its requests in order.
type sliceQueue []*seq

func (q *sliceQueue) pop(bool) *seq {
	if len(*q) == 0 {
		return nil
	}
	r := (*q)[0]
	*q = (*q)[1:]
	return r
}

// run is the decoding loop: admit waiting requests into free slots, evaluate
// every active request's new tokens in one Eval (at most g.chunk prompt
// tokens in all when g.chunk > 0, so that long prompts do not hold up the
// requests that are generating), choose each request's next tokens (one, or
// for a speculating request the candidates the target accepts and one of
// its own), retire the requests that finished, and repeat until the queue
// is done. emit delivers each event to its request's consumer; when it
// returns false the loop ends at once. run returns a backend failure or a
// slot it could not clear; whatever ends it, no slot stays filled.
func (g *Generator) run(ctx context.Context, q queue, emit func(*seq, Event) bool) error {
	g.free = g.free[:0]
	for s := g.backend.Slots() - 1; s >= 0; s-- {
		g.free = append(g.free, s)
	}
	g.active, g.admitted = g.active[:0], g.admitted[:0]
	defer func() {
		// Clear errors are ignored here: the slots are lost anyway, and
		// the next call clears before it writes.
		for _, r := range g.active {
			g.backend.Clear(r.slot)
			g.releaseDraft(r)
		}
		clear(g.active)
		g.active = g.active[:0]
		clear(g.fedSeqs)
	}()

	for {
		if ctx.Err() != nil {
			g.cancel(ctx.Err(), q, emit)
			return nil
		}
		more, err := g.admit(ctx, q, emit)
		if !more || err != nil {
			return err
		}
		if len(g.active) == 0 {
			continue // every admitted request failed: admit the next ones
		}
		if more, err = g.gather(ctx, emit); !more || err != nil {
			if ctx.Err() != nil {
				g.cancel(ctx.Err(), q, emit)
				return nil
			}
			return err
		}
		if len(g.feeds) > 0 {
			var start time.Time
			if g.stats != nil {
				start = time.Now()
			}
			if g.verifying {
				err = g.all.EvalAll(ctx, g.feeds)
			} else {
				err = g.backend.Eval(ctx, g.feeds)
			}
			if g.stats != nil {
				g.stats.evalNanos.Add(int64(time.Since(start)))
			}
			if err != nil {
				switch {
				case ctx.Err() != nil:
					g.cancel(ctx.Err(), q, emit)
					return nil
				case errors.Is(err, backend.ErrContextFull):
					// The requests keep what they generated; their slots,
					// whose histories are now undefined, are cleared.
					for _, r := range g.fedSeqs {
						if !emit(r, r.end(FinishContextFull, err)) {
							return nil
						}
					}
					if err := g.retire(); err != nil {
						return err
					}
					continue
				}
				return fmt.Errorf("generation: eval: %w", err)
			}
		}
		for i, r := range g.fedSeqs {
			r.nfed += len(g.feeds[i].Tokens)
			if r.nfed < len(r.prompt) {
				continue // a chunk of the prompt: its logits are not wanted
			}
			if !g.steps(r, i, emit) {
				return nil
			}
		}
		if err := g.settle(); err != nil {
			return err
		}
		if err := g.retire(); err != nil {
			return err
		}
	}
}

// admit retires the requests whose own context ended, gives free slots to
// waiting requests in order and encodes the admitted requests' encoder
// inputs. more is false when the loop is to end: the queue is done, or
// emit stopped it.
func (g *Generator) admit(ctx context.Context, q queue, emit func(*seq, Event) bool) (more bool, err error) {
	left := false
	for _, r := range g.active {
		if r.ctx != nil && r.ctx.Err() != nil {
			if !emit(r, r.end(FinishCancelled, r.ctx.Err())) {
				return false, nil
			}
			left = true
		}
	}
	if left {
		if err := g.retire(); err != nil {
			return false, err
		}
	}
	for len(g.free) > 0 {
		r := q.pop(len(g.active) == 0)
		if r == nil {
			break
		}
		if r.ctx != nil && r.ctx.Err() != nil {
			if !emit(r, r.end(FinishCancelled, r.ctx.Err())) {
				return false, nil
			}
			continue
		}
		slot := g.free[len(g.free)-1]
		if room := g.backend.Room(slot); room < len(r.prompt) {
			err := fmt.Errorf("%w: %d tokens, room for %d", ErrPromptTooLong, len(r.prompt), room)
			if !emit(r, Event{Request: r.index, Token: -1, Finish: FinishContextFull, Err: err}) {
				return false, nil
			}
			continue
		}
		g.free = g.free[:len(g.free)-1]
		r.slot = slot
		if r.spec == specDraft {
			r.prop.Start(slot, r.cfg, r.pipe, r.eos, r.req.Seed)
		}
		g.active = append(g.active, r)
		if g.enc != nil {
			g.admitted = append(g.admitted, r)
		}
	}
	if len(g.admitted) > 0 {
		ok, err := g.encode(ctx, emit)
		if err != nil {
			g.cancel(err, q, emit)
			return false, nil
		}
		if !ok {
			return false, nil
		}
		if err := g.retire(); err != nil {
			return false, err
		}
		if len(g.active) == 0 {
			return true, nil
		}
	}
	return len(g.active) > 0, nil
}

// gather makes the step's feeds: a chunk of each prompt still to evaluate,
// and each generating request's last token, followed by its candidates
// when it speculates (g.verifying is then set). more is false when emit
// stopped the loop; err is a draft model's failure.
func (g *Generator) gather(ctx context.Context, emit func(*seq, Event) bool) (more bool, err error) {
	g.feeds, g.fedSeqs = g.feeds[:0], g.fedSeqs[:0]
	g.verifying = false
	budget := g.chunk
	for _, r := range g.active {
		var toks []int32
		if end := r.promptEnd(); r.nfed < end {
			toks = r.prompt[r.nfed:end]
			if g.chunk > 0 {
				if budget == 0 {
					continue // its prompt goes on at the next step
				}
				held := g.held(r)
				toks = toks[:min(len(toks), held+budget)]
				toks = r.prompt[r.nfed:r.wholeRuns(r.nfed, r.nfed+len(toks))]
				budget = max(0, budget-(len(toks)-held))
			}
		} else {
			toks = r.hist.Tokens()[r.hist.Len()-1:]
		}
		// A backend whose slots share their cells may lose room to the
		// other requests after the request's last token was chosen.
		if g.backend.Room(r.slot) < len(toks) {
			if !emit(r, r.end(FinishContextFull, nil)) {
				return false, nil
			}
			continue
		}
		g.feeds = append(g.feeds, backend.Feed{Slot: r.slot, Tokens: toks, Embd: r.promptEmbd(toks), Pos: r.promptPos(toks), NonCausal: r.promptRuns(toks)})
		g.fedSeqs = append(g.fedSeqs, r)
	}
	if err := g.propose(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// held is how many tokens at the start of r's prompt, still to be fed to
// an empty slot, the backend holds already: they come with the first chunk
// without counting against the chunk's budget, since the backend does not
// evaluate them (and reuses a prefix only from a slot's first feed).
func (g *Generator) held(r *seq) int {
	h, ok := g.backend.(backend.PrefixLookup)
	if !ok || r.nfed > 0 {
		return 0
	}
	_, shared, _ := h.Lookup(r.prompt, r.embd)
	return max(0, min(shared, len(r.prompt)-1))
}

// retire clears the slots of finished requests and drops them from the batch.
// A slot that cannot be cleared would pass its history to the next request, so
// that ends the call.
func (g *Generator) retire() error {
	kept := g.active[:0]
	var err error
	for _, r := range g.active {
		if !r.done {
			kept = append(kept, r)
			continue
		}
		if e := g.backend.Clear(r.slot); e != nil && err == nil {
			err = fmt.Errorf("generation: clear slot %d: %w", r.slot, e)
		}
		if e := g.releaseDraft(r); e != nil && err == nil {
			err = fmt.Errorf("generation: clear slot %d of the draft model: %w", r.slot, e)
		}
		g.free = append(g.free, r.slot)
	}
	clear(g.active[len(kept):])
	g.active = kept
	return err
}

// cancel ends every unfinished request, active or waiting, with
// FinishCancelled and err, the context's error (the cancellation contract of
// package backend).
func (g *Generator) cancel(err error, q queue, emit func(*seq, Event) bool) {
	for _, r := range g.active {
		if !r.done && !emit(r, r.end(FinishCancelled, err)) {
			return
		}
	}
	for r := q.pop(false); r != nil; r = q.pop(false) {
		if !emit(r, r.end(FinishCancelled, err)) {
			return
		}
	}
}

// step processes the next-token scores of r at position j of its feed,
// chooses its token and returns the request's event: the one per-token
// step of every request, speculating or not. scores is the backend's
// logits row, processed in place. At a position j below the step's
// candidates the acceptance rule chooses (see choose).
func (g *Generator) step(r *seq, scores []float32, j int) Event {
	req := r.req
	withLogprobs := req.Logprobs || req.TopLogprobs > 0
	leviathan := r.leviathan(j)
	if r.sampleOnly && !leviathan && req.ObserveScores == nil && !withLogprobs {
		// Only the draw reads the row: top-k may skip writing -inf over it.
		r.pipe.ProcessForSample(r.hist, scores)
	} else {
		r.pipe.Process(r.hist, scores)
	}
	if req.ObserveScores != nil {
		req.ObserveScores(scores)
	}
	if withLogprobs {
		if cap(g.logprobs) < len(scores) {
			g.logprobs = make([]float32, len(scores))
		}
		g.logprobs = g.logprobs[:len(scores)]
		logits.LogSoftmax(g.logprobs, scores)
		r.top = topLogprobs(r.top[:0], &g.best, g.logprobs, req.TopLogprobs)
	}

	tok, accepted, err := g.choose(r, scores, j, leviathan)
	if err != nil {
		return r.end(FinishError, r.failure(err)) // wraps logits.ErrNoChoice or a processor's error
	}
	logprob := g.logprobAt(withLogprobs, tok)
	t := int32(tok)
	r.hist.Accept(t)
	r.tokens = append(r.tokens, t)

	ev := Event{Request: r.index, Token: t, Drafted: len(r.prop.Tokens), Accepted: accepted}
	if req.Logprobs {
		ev.Logprob = logprob
	}
	if req.TopLogprobs > 0 {
		ev.Top = r.top
	}
	start := len(r.text)
	if g.tok != nil {
		var err error
		if r.text, err = g.tok.AppendPiece(r.text, t, req.RenderSpecial); err != nil {
			r.text = r.text[:start]
			ev.Finish, ev.Err = FinishError, fmt.Errorf("generation: piece of token %d: %w", t, err)
		} else if start == 0 && req.TrimLeadingSpace {
			r.text = TrimLeadingSpace(r.text)
		}
	}
	switch {
	case ev.Finish != NotFinished:
	case r.isEOS(t):
		ev.Finish = FinishEOS
	case r.matchStop(start, &ev):
		ev.Finish = FinishStop
	case len(r.tokens) >= r.maxNew:
		ev.Finish = FinishLength
	case g.backend.Room(r.slot) < 1+j-len(r.prop.Tokens): // the rejected candidates' cells are freed
		ev.Finish = FinishContextFull
	}
	end := len(r.text)
	if ev.Finish == NotFinished {
		end = completeUTF8(r.text, r.sent)
	} else {
		r.done = true
	}
	ev.Text = r.text[r.sent:end]
	r.sent = end
	return ev
}

func (g *Generator) logprobAt(withLogprobs bool, tok int) float32 {
	if !withLogprobs {
		return 0
	}
	return g.logprobs[tok]
}

// failure returns the error of the first of r's processors that failed r's row, or err (the
// chooser's) when none did.
func (r *seq) failure(err error) error {
	for _, p := range r.req.Processors {
		if f, ok := p.(logits.Failer); ok {
			if perr := f.Err(r.hist); perr != nil {
				return perr
			}
		}
	}
	return err
}

// end finishes r without a new token: its event carries the text still held
// back.
func (r *seq) end(reason FinishReason, err error) Event {
	r.done = true
	ev := Event{Request: r.index, Token: -1, Finish: reason, Err: err, Text: r.text[r.sent:]}
	r.sent = len(r.text)
	return ev
}

// topLogprobs appends to dst the n entries of logprobs with the largest
// values, largest first and lower ids first among equals, skipping -inf and
// NaN, selected in best.
func topLogprobs(dst []TokenLogprob, best *numeric.Best[float32], logprobs []float32, n int) []TokenLogprob {
	if n <= 0 {
		return dst
	}
	negInf := float32(math.Inf(-1))
	best.Reset(n)
	for i, v := range logprobs {
		if v == negInf || v != v || !best.Admits(v) {
			continue
		}
		best.Offer(numeric.Entry[float32]{Key: v, Index: int32(i)})
	}
	for _, e := range best.Sorted() {
		dst = append(dst, TokenLogprob{Token: e.Index, Logprob: e.Key})
	}
	return dst
}
