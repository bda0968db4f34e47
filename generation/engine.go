package generation

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/testhook"
)

// ErrClosed reports a request submitted to an Engine that was closed.
var ErrClosed = errors.New("generation: engine closed")

// DefaultPromptChunk is the PromptChunk of an Engine whose options give none.
const DefaultPromptChunk = 512

// EngineOptions are the settings of an Engine.
type EngineOptions struct {
	// PromptChunk is the most prompt tokens evaluated in one step, over all
	// requests: a long prompt is evaluated in chunks, one per step, so that
	// the requests already generating get a token at every step meanwhile.
	// 0 means DefaultPromptChunk; a negative value, no limit.
	PromptChunk int
	// Draft is the draft model of speculative decoding (Options.Draft):
	// every request that does not ask for prompt lookup drafts with it.
	Draft backend.Backend
}

// Engine is the decoding loop of a Generator kept running: requests join
// the running batch as they are submitted and leave it when they finish,
// each with its own settings, event stream and cancellation (continuous
// batching). A request depends on the others of the batch, and on how its
// prompt is chunked, only as far as its logits do (see Batch invariance):
// on backend.MemoryBackend, and on llama.cpp with
// llamacpp.ContextParams.BatchInvariant, its tokens are those
// it gets alone through Generator.Stream.
//
// An Engine owns its backend until Close: nothing else may use the backend
// meanwhile. Its methods are safe for concurrent use; Submit tokenizes on
// its caller's goroutine, so the tokenizer must be safe for concurrent use
// too (llamabackend.Tokenizer is).
type Engine struct {
	gen    *Generator
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	waiting []*seq // submitted, not yet admitted
	closed  bool
	wake    chan struct{} // a request was submitted (capacity 1)

	room  int                // room of an empty slot
	live  map[*Task]struct{} // admitted and unfinished; loop goroutine only
	stats engineStats
}

// engineStats are the counters of EngineStats, written by the loop.
type engineStats struct {
	submitted, finished atomic.Uint64
	promptTokens        atomic.Uint64
	generatedTokens     atomic.Uint64
	evalNanos           atomic.Int64
	active              atomic.Int64
}

// EngineStats are an Engine's counters since it started.
type EngineStats struct {
	Waiting         int           // requests submitted and not yet given a slot
	Active          int           // requests given a slot and not yet ended
	Submitted       uint64        // requests accepted by Submit
	Finished        uint64        // requests that ended, for whatever reason
	PromptTokens    uint64        // prompt tokens (encoder inputs) of the accepted requests
	GeneratedTokens uint64        // tokens generated
	EvalTime        time.Duration // time spent in Backend.Eval
}

// NewEngine starts the decoding loop of a new Generator over b and tok (see
// NewGenerator) and returns it. The slots of b must be empty. Close stops
// the loop.
func NewEngine(b backend.Backend, tok backend.Tokenizer, opts EngineOptions) (*Engine, error) {
	if b.Slots() < 1 {
		return nil, errors.New("generation: the backend has no slot")
	}
	g, err := New(b, tok, Options{Draft: opts.Draft})
	if err != nil {
		return nil, err
	}
	// Submit prepares requests on its callers' goroutines: the default
	// config is made here, before they share it.
	g.defaultConfig = genconfig.Default()
	g.chunk = opts.PromptChunk
	switch {
	case g.chunk == 0:
		g.chunk = DefaultPromptChunk
	case g.chunk < 0:
		g.chunk = 0
	}
	g.busy = true
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{
		gen: g, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		wake: make(chan struct{}, 1), live: map[*Task]struct{}{},
		room: b.Room(0),
	}
	g.stats = &e.stats
	go e.loop()
	return e, nil
}

// VocabSize is the width of the backend's logits rows: token ids are in
// [0, VocabSize()).
func (e *Engine) VocabSize() int { return e.gen.vocab }

// loop runs the decoding loop until Close. A backend failure ends the
// requests of the batch with FinishError; the loop then goes on with the
// requests that wait.
func (e *Engine) loop() {
	defer close(e.done)
	for {
		err := e.gen.run(e.ctx, e, e.emit)
		if err == nil {
			return
		}
		for t := range e.live {
			e.emit(t.r, t.r.end(FinishError, err))
		}
	}
}

// pop implements queue for the decoding loop.
func (e *Engine) pop(wait bool) *seq {
	for {
		e.mu.Lock()
		if len(e.waiting) > 0 {
			r := e.waiting[0]
			e.waiting[0] = nil
			e.waiting = e.waiting[1:]
			e.mu.Unlock()
			e.live[r.task] = struct{}{}
			e.stats.active.Add(1)
			return r
		}
		closed := e.closed
		e.mu.Unlock()
		if !wait || closed {
			return nil
		}
		select {
		case <-e.wake:
		case <-e.ctx.Done():
		}
	}
}

// emit hands ev to the task of r.
func (e *Engine) emit(r *seq, ev Event) bool {
	t := r.task
	if ev.Token >= 0 {
		e.stats.generatedTokens.Add(1)
		testhook.Generated()
	}
	if ev.Finish != NotFinished {
		// The counters change before the consumer sees the end.
		if _, ok := e.live[t]; ok {
			delete(e.live, t)
			e.stats.active.Add(-1)
		}
		e.stats.finished.Add(1)
	}
	t.put(ev)
	return true
}

// Submit validates req (as Generator.Stream does) and adds it to the
// running batch, or to the requests waiting for a slot. Its events come
// from the returned Task, whose Events must be iterated, or ctx cancelled,
// for the request to end before its length limit. Cancelling ctx ends the
// request with FinishCancelled at the next step and frees its slot.
//
// A prompt longer than a slot can hold is an error wrapping
// ErrPromptTooLong, reported here rather than as an event. The engine reads
// req's slices while the request runs: the caller must not change them.
func (e *Engine) Submit(ctx context.Context, req Request) (*Task, error) {
	// A seq of its own, not one of the loop's pool: this runs on the
	// caller's goroutine.
	r, err := e.gen.prepareSeq(&req, map[*genconfig.Config]*config{}, newSeq())
	if err != nil {
		return nil, fmt.Errorf("generation: %w", err)
	}
	if e.room < len(r.prompt) {
		return nil, fmt.Errorf("generation: %w: %d tokens, room for %d", ErrPromptTooLong, len(r.prompt), e.room)
	}
	t := &Task{r: r, wake: make(chan struct{}, 1), promptTokens: r.inputTokens()}
	t.ctx, t.cancel = context.WithCancel(ctx)
	r.ctx, r.task = t.ctx, t

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		t.cancel()
		return nil, ErrClosed
	}
	e.waiting = append(e.waiting, r)
	e.mu.Unlock()
	e.stats.submitted.Add(1)
	e.stats.promptTokens.Add(uint64(r.inputTokens()))
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return t, nil
}

// Stats returns the engine's counters.
func (e *Engine) Stats() EngineStats {
	e.mu.Lock()
	waiting := len(e.waiting)
	e.mu.Unlock()
	return EngineStats{
		Waiting:         waiting,
		Active:          int(e.stats.active.Load()),
		Submitted:       e.stats.submitted.Load(),
		Finished:        e.stats.finished.Load(),
		PromptTokens:    e.stats.promptTokens.Load(),
		GeneratedTokens: e.stats.generatedTokens.Load(),
		EvalTime:        time.Duration(e.stats.evalNanos.Load()),
	}
}

// Close ends every request, running or waiting, with FinishCancelled
// (context.Canceled), waits for the loop to stop with every slot cleared,
// and refuses later submissions. The backend is the caller's again.
func (e *Engine) Close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	<-e.done
	return nil
}

// Task is a request submitted to an Engine: its prompt length and its
// events.
type Task struct {
	r            *seq
	ctx          context.Context
	cancel       context.CancelFunc
	promptTokens int
	wake         chan struct{} // an event was queued (capacity 1)

	// The loop appends events, copying their text and alternatives, under
	// mu; the consumer swaps these buffers with its own, so that neither
	// side allocates once they have grown, and a slow consumer never holds
	// up the batch.
	mu       sync.Mutex
	evs      []queuedEvent
	text     []byte
	top      []TokenLogprob
	iterated bool
}

// queuedEvent is an event whose Text and Top are ranges of the task's
// buffers.
type queuedEvent struct {
	ev                               Event
	textFrom, textTo, topFrom, topTo int
}

// PromptTokens is the number of tokens of the request's prompt: of its
// encoder input on an encoder-decoder backend.
func (t *Task) PromptTokens() int { return t.promptTokens }

// put queues ev; the loop calls it.
func (t *Task) put(ev Event) {
	t.mu.Lock()
	q := queuedEvent{ev: ev, textFrom: len(t.text), topFrom: len(t.top)}
	t.text = append(t.text, ev.Text...)
	t.top = append(t.top, ev.Top...)
	q.textTo, q.topTo = len(t.text), len(t.top)
	q.ev.Text, q.ev.Top = nil, nil
	t.evs = append(t.evs, q)
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Events yields the request's events as Generator.Stream does for one
// request, ending with its final event; Event.Request is 0. The slices of an
// event are valid until the iteration resumes. Stopping the iteration early
// cancels the request. When the request's context ends, the iteration ends
// at once with a FinishCancelled event, and the loop frees the request's
// slot at its next step. Events may be iterated once.
func (t *Task) Events() iter.Seq[Event] {
	return func(yield func(Event) bool) {
		defer t.cancel()
		t.mu.Lock()
		if t.iterated {
			t.mu.Unlock()
			return
		}
		t.iterated = true
		t.mu.Unlock()
		var evs []queuedEvent
		var text []byte
		var top []TokenLogprob
		cancelled := false
		for {
			select {
			case <-t.wake:
			case <-t.ctx.Done():
				cancelled = true
			}
			t.mu.Lock()
			evs, t.evs = t.evs, evs[:0]
			text, t.text = t.text, text[:0]
			top, t.top = t.top, top[:0]
			t.mu.Unlock()
			for _, q := range evs {
				ev := q.ev
				ev.Text = text[q.textFrom:q.textTo]
				if q.topTo > q.topFrom {
					ev.Top = top[q.topFrom:q.topTo]
				}
				if !yield(ev) || ev.Finish != NotFinished {
					return
				}
			}
			if cancelled {
				yield(Event{Token: -1, Finish: FinishCancelled, Err: t.ctx.Err()})
				return
			}
		}
	}
}

// Generate submits every request of reqs at once, as that many concurrent
// clients would, and waits for their results, in the order of reqs. A
// request that Submit refuses keeps a zero Result; the refusals are
// returned together (errors.Join) beside the others' results.
func (e *Engine) Generate(ctx context.Context, reqs []Request) ([]Result, error) {
	results := make([]Result, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task, err := e.Submit(ctx, reqs[i])
			if err != nil {
				errs[i] = fmt.Errorf("request %d: %w", i, err)
				return
			}
			results[i] = task.Result()
		}()
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// Result iterates Events to the end and gathers the request's output, as
// Generator.Generate does.
func (t *Task) Result() Result {
	var res Result
	var text []byte
	for ev := range t.Events() {
		res.add(t.r.req, ev, &text)
	}
	res.Text = string(text)
	return res
}
