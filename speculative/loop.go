package speculative

import (
	"context"
	"errors"
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/logits"
)

// run is the decoding loop: admit waiting requests into free slots (their
// prompts but the last token are evaluated), let each row's generator
// propose candidates, verify every row's candidates in one EvalAll of the
// target, truncate both models to what was kept, retire the rows that
// finished, and repeat.
func (d *Decoder) run(ctx context.Context, rows []*Sequence, yield func(Event, error) bool) {
	free := make([]int, 0, d.slots)
	for s := d.slots - 1; s >= 0; s-- {
		free = append(free, s)
	}
	active := d.rows[:0]
	pending := rows
	defer func() {
		// Whatever ends the call, no slot stays filled. Errors are ignored:
		// the slots are lost anyway, and the next call clears before it writes.
		for _, s := range active {
			d.target.Clear(s.slot)
			s.gen.Release(s)
		}
		d.rows = active[:0]
	}()
	// drop takes s out of the batch and empties its slots.
	drop := func(s *Sequence) {
		for i, a := range active {
			if a == s {
				active = append(active[:i], active[i+1:]...)
				break
			}
		}
		if !s.dropped && s.slot >= 0 {
			s.dropped = true
			d.target.Clear(s.slot)
			s.gen.Release(s)
			free = append(free, s.slot)
		}
	}
	// retire ends s and yields its last event; it reports whether to go on.
	retire := func(s *Sequence, ev Event) bool {
		drop(s)
		ev.Request, ev.Slot, ev.Finish, ev.Err = s.index, s.slot, s.finish, s.err
		return yield(ev, nil)
	}
	// fail ends rows after a failed evaluation; false ends the stream.
	fail := func(rows []*Sequence, err error) bool {
		switch {
		case ctx.Err() != nil:
			return false
		case errors.Is(err, backend.ErrContextFull):
			for _, s := range slicesClone(rows) {
				s.finish, s.err = generation.FinishContextFull, err
				if !retire(s, Event{}) {
					return false
				}
			}
			return true
		}
		yield(Event{}, fmt.Errorf("speculative: %w", err))
		return false
	}
	cancel := func() {
		for _, s := range append(slicesClone(active), pending...) {
			s.finish, s.err = generation.FinishCancelled, ctx.Err()
			if !retire(s, Event{}) {
				return
			}
		}
	}

	for len(pending) > 0 || len(active) > 0 {
		if ctx.Err() != nil {
			cancel()
			return
		}
		// Admission, in request order; the prompts but their last tokens
		// are evaluated together.
		d.feeds, d.fed = d.feeds[:0], d.fed[:0]
		for len(pending) > 0 && len(free) > 0 {
			s := pending[0]
			pending = pending[1:]
			slot := free[len(free)-1]
			if room := d.target.Room(slot); room < len(s.prompt) {
				s.finish = generation.FinishContextFull
				s.err = fmt.Errorf("%w: %d tokens, room for %d", generation.ErrPromptTooLong, len(s.prompt), room)
				if !retire(s, Event{}) {
					return
				}
				continue
			}
			free = free[:len(free)-1]
			s.slot, s.dropped = slot, false
			active = append(active, s)
			if len(s.prompt) > 1 {
				d.feeds = append(d.feeds, backend.Feed{Slot: slot, Tokens: s.prompt[:len(s.prompt)-1]})
				d.fed = append(d.fed, s)
			}
		}
		if len(d.feeds) > 0 {
			if err := d.target.Eval(ctx, d.feeds); err != nil {
				if !fail(d.fed, err) {
					if ctx.Err() != nil {
						cancel()
					}
					return
				}
			}
		}

		// Candidates, each generator for its rows at once.
		for _, g := range d.generators() {
			d.fed = d.fed[:0]
			for _, s := range active {
				if s.gen != g {
					continue
				}
				s.base = s.hist.Len()
				s.maxCand = max(0, min(s.maxLength-s.base-1, d.target.Room(s.slot)-1))
				s.cand, s.q, s.hasQ, s.accepted = s.cand[:0], s.q[:0], false, 0
				d.fed = append(d.fed, s)
			}
			if len(d.fed) == 0 {
				continue
			}
			if err := g.Propose(ctx, d.fed); err != nil {
				if !fail(d.fed, err) {
					if ctx.Err() != nil {
						cancel()
					}
					return
				}
			}
		}

		// Verification: every row's last token and candidates in one EvalAll.
		d.feeds, d.fed = d.feeds[:0], d.fed[:0]
		d.tmp = append(d.tmp[:0], active...)
		for _, s := range d.tmp {
			if d.target.Room(s.slot) < 1+len(s.cand) {
				s.finish, s.err = generation.FinishContextFull, nil
				if !retire(s, Event{}) {
					return
				}
				continue
			}
			toks := s.hist.Tokens()
			s.feed = append(append(s.feed[:0], toks[len(toks)-1]), s.cand...)
			d.feeds = append(d.feeds, backend.Feed{Slot: s.slot, Tokens: s.feed})
			d.fed = append(d.fed, s)
		}
		if len(d.feeds) == 0 {
			continue
		}
		if err := d.all.evalAll(ctx, d.feeds); err != nil {
			if !fail(d.fed, err) {
				if ctx.Err() != nil {
					cancel()
				}
				return
			}
			continue
		}
		verified := append(d.tmp[:0], d.fed...)
		for i, s := range verified {
			start := len(s.tokens)
			d.verify(s, i)
			s.event = Event{Tokens: s.tokens[start:], Drafted: len(s.cand), Accepted: s.accepted}
		}
		// Truncate invalidates the target's logits: only after every row's
		// verification.
		for _, s := range verified {
			if s.finish == generation.NotFinished {
				if err := d.target.Truncate(s.slot, s.hist.Len()-1); err != nil {
					yield(Event{}, fmt.Errorf("speculative: %w", err))
					return
				}
			}
		}
		for _, g := range d.generators() {
			d.fed = d.fed[:0]
			for _, s := range verified {
				if s.gen == g {
					d.fed = append(d.fed, s)
				}
			}
			if err := g.Settle(d.fed); err != nil {
				yield(Event{}, fmt.Errorf("speculative: %w", err))
				return
			}
		}
		// The finished rows' slots are emptied before any event of the step
		// is sent: during the events the backends hold the step's result.
		for _, s := range verified {
			if s.finish != generation.NotFinished {
				drop(s)
			}
		}
		for _, s := range verified {
			ev := s.event
			ev.Request, ev.Slot, ev.Finish, ev.Err = s.index, s.slot, s.finish, s.err
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// generators lists the decoder's candidate generators in a fixed order.
func (d *Decoder) generators() []CandidateGenerator {
	if d.gens == nil {
		d.gens = []CandidateGenerator{d.lookup}
		if d.draft != nil {
			d.gens = append(d.gens, d.draft)
		}
	}
	return d.gens
}

// verify applies the acceptance rule to feed i of the last EvalAll, the
// candidates of s: it appends the accepted candidates and the target's
// token to s, stopping at an EOS token or max_length.
func (d *Decoder) verify(s *Sequence, i int) {
	n := len(s.cand)
	for j := 0; j <= n; j++ {
		scores := d.all.logitsAt(i, j)
		s.pipe.Process(s.hist, scores)
		var t int
		var err error
		accept := false
		if j < n && s.hasQ {
			t, accept = d.speculativeSample(s, j, scores)
			if t < 0 {
				t, err = s.choose.Choose(s.hist, scores, &s.src)
			}
		} else {
			t, err = s.choose.Choose(s.hist, scores, &s.src)
			accept = j < n && int32(t) == s.cand[j]
		}
		if err != nil {
			s.finish, s.err = generation.FinishError, err
			return
		}
		tok := int32(t)
		s.hist.Accept(tok)
		s.tokens = append(s.tokens, tok)
		if accept {
			s.accepted++
		}
		switch {
		case s.isEOS(tok):
			s.finish = generation.FinishEOS
			return
		case s.hist.Len() >= s.maxLength:
			s.finish = generation.FinishLength
			return
		case !accept:
			return
		}
	}
}

// speculativeSample is _speculative_sampling at candidate j of s: keep it
// with probability min(1, p/q), else draw from max(0, p-q) normalised. t is
// -1 when the target's row holds no probabilities (a NaN or +inf score), and
// the chooser then decides (and reports the error).
func (d *Decoder) speculativeSample(s *Sequence, j int, scores []float32) (t int, accept bool) {
	p := d.probs
	logits.Softmax(p, scores)
	x := s.cand[j]
	q := s.q[j*d.vocab : (j+1)*d.vocab]
	if p[x] != p[x] {
		return -1, false
	}
	if u := s.src.Float64(); u*float64(q[x]) <= float64(p[x]) {
		return int(x), true
	}
	u := s.src.Float64()
	var sum float64
	for k, pk := range p {
		if w := float64(pk) - float64(q[k]); w > 0 {
			sum += w
		}
	}
	if sum > 0 {
		target, acc, last := u*sum, 0.0, -1
		for k, pk := range p {
			if w := float64(pk) - float64(q[k]); w > 0 {
				acc += w
				last = k
				if acc > target {
					return k, false
				}
			}
		}
		return last, false
	}
	// p <= q everywhere, which rounding alone allows: p itself.
	k, ok := logits.SampleIndex(scores, u)
	if !ok {
		return -1, false
	}
	return k, false
}

func slicesClone(s []*Sequence) []*Sequence { return append([]*Sequence(nil), s...) }
