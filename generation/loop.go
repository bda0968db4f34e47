package generation

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/numeric"
	"github.com/llamaloop/llamaloop/logits"
)

// run is the decoding loop: admit waiting requests into free slots, evaluate
// every active request's new tokens in one Eval, choose each request's next
// token, retire the requests that finished, and repeat.
func (g *Generator) run(ctx context.Context, seqs []*seq, yield func(Event, error) bool) {
	g.free = g.free[:0]
	for s := g.backend.Slots() - 1; s >= 0; s-- {
		g.free = append(g.free, s)
	}
	g.active = g.active[:0]
	pending := seqs
	defer func() {
		// Whatever ends the call, no slot stays filled and the requests go
		// back to the pool. Clear errors are ignored here: the slots are lost
		// anyway, and the next call clears before it writes.
		for _, r := range g.active {
			g.backend.Clear(r.slot)
		}
		g.active = g.active[:0]
		clear(g.fedSeqs)
		g.release(seqs)
	}()

	for len(pending) > 0 || len(g.active) > 0 {
		if ctx.Err() != nil {
			g.cancel(ctx.Err(), pending, yield)
			return
		}
		// Admission, in request order.
		for len(pending) > 0 && len(g.free) > 0 {
			r := pending[0]
			pending = pending[1:]
			slot := g.free[len(g.free)-1]
			if room := g.backend.Room(slot); room < len(r.prompt) {
				err := fmt.Errorf("%w: %d tokens, room for %d", ErrPromptTooLong, len(r.prompt), room)
				if !yield(Event{Request: r.index, Token: -1, Finish: FinishContextFull, Err: err}, nil) {
					return
				}
				continue
			}
			g.free = g.free[:len(g.free)-1]
			r.slot = slot
			g.active = append(g.active, r)
		}

		// One step: every active request's new tokens in one Eval.
		g.feeds, g.fedSeqs = g.feeds[:0], g.fedSeqs[:0]
		for _, r := range g.active {
			toks := r.prompt
			if r.fed {
				toks = r.tokens[len(r.tokens)-1:]
			}
			// A backend whose slots share their cells may lose room to the
			// other requests after the request's last token was chosen.
			if g.backend.Room(r.slot) < len(toks) {
				if !yield(r.end(FinishContextFull, nil), nil) {
					return
				}
				continue
			}
			g.feeds = append(g.feeds, backend.Feed{Slot: r.slot, Tokens: toks})
			g.fedSeqs = append(g.fedSeqs, r)
		}
		if len(g.feeds) > 0 {
			if err := g.backend.Eval(ctx, g.feeds); err != nil {
				switch {
				case ctx.Err() != nil:
					g.cancel(ctx.Err(), pending, yield)
				case errors.Is(err, backend.ErrContextFull):
					// The requests keep what they generated; their slots,
					// whose histories are now undefined, are cleared.
					for _, r := range g.fedSeqs {
						if !yield(r.end(FinishContextFull, err), nil) {
							return
						}
					}
					if err := g.retire(); err != nil {
						yield(Event{}, err)
						return
					}
					continue
				default:
					yield(Event{}, fmt.Errorf("generation: eval: %w", err))
				}
				return
			}
		}
		for i, r := range g.fedSeqs {
			r.fed = true
			if !yield(g.step(r, g.backend.Logits(i)), nil) {
				return
			}
		}
		if err := g.retire(); err != nil {
			yield(Event{}, err)
			return
		}
	}
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
		g.free = append(g.free, r.slot)
	}
	clear(g.active[len(kept):])
	g.active = kept
	return err
}

// cancel ends every unfinished request with FinishCancelled and err, the
// context's error (the cancellation contract of package backend).
func (g *Generator) cancel(err error, pending []*seq, yield func(Event, error) bool) {
	for _, r := range g.active {
		if !r.done && !yield(r.end(FinishCancelled, err), nil) {
			return
		}
	}
	for _, r := range pending {
		if !yield(r.end(FinishCancelled, err), nil) {
			return
		}
	}
}

// step processes the next-token scores of r, chooses its token and returns
// the request's event. scores is the backend's logits row, processed in place.
func (g *Generator) step(r *seq, scores []float32) Event {
	req := r.req
	r.pipe.Process(r.hist, scores)
	if req.ObserveScores != nil {
		req.ObserveScores(scores)
	}
	withLogprobs := req.Logprobs || req.TopLogprobs > 0
	if withLogprobs {
		if cap(g.logprobs) < len(scores) {
			g.logprobs = make([]float32, len(scores))
		}
		g.logprobs = g.logprobs[:len(scores)]
		logits.LogSoftmax(g.logprobs, scores)
		r.top = topLogprobs(r.top[:0], &g.best, g.logprobs, req.TopLogprobs)
	}

	tok, err := r.choose.Choose(r.hist, scores, &r.src)
	if err != nil {
		return r.end(FinishError, err) // wraps logits.ErrNoChoice
	}
	logprob := g.logprobAt(withLogprobs, tok)
	t := int32(tok)
	r.hist.Accept(t)
	r.tokens = append(r.tokens, t)

	ev := Event{Request: r.index, Token: t}
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
	case g.backend.Room(r.slot) < 1:
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
