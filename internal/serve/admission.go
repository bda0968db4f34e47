package serve

import (
	"context"
	"fmt"
	"net/http"
	"sync"
)

// holding is a request's sequences counted against Config.MaxConcurrent.
// A request holds one from the moment its body is read, before the work of
// preparing it (decoding, compiling its tools and response_format into a
// grammar, rendering and tokenizing its prompt, tokenizing its embedding
// inputs), and grows to its choices once they are known: a client that
// sends costly requests occupies what the limit allows, and the server
// answers 429 past it rather than preparing them all at once.
type holding struct {
	s    *Server
	n    int64
	once sync.Once
}

// hold counts n sequences, or answers the request itself (shutting down,
// busy) and returns nil.
func (s *Server) hold(w http.ResponseWriter, n int64) *holding {
	if s.stopping.Err() != nil {
		writeError(w, errShuttingDown)
		return nil
	}
	if !s.take(w, n) {
		return nil
	}
	return &holding{s: s, n: n}
}

// take counts n more sequences, or answers 429 and reports false.
func (s *Server) take(w http.ResponseWriter, n int64) bool {
	if s.inFlight.Add(n) > int64(s.cfg.MaxConcurrent) {
		s.inFlight.Add(-n)
		w.Header().Set("Retry-After", "1")
		writeError(w, &requestError{status: http.StatusTooManyRequests, code: "server_busy",
			msg: fmt.Sprintf("the server runs %d sequences at most (--max-concurrent); try again", s.cfg.MaxConcurrent)})
		return false
	}
	return true
}

// grow makes the holding n sequences, or answers 429 (400 for more than
// the server ever runs) and reports false (the holding stays as it was,
// for release).
func (h *holding) grow(w http.ResponseWriter, n int64) bool {
	if n <= h.n {
		return true
	}
	if limit := int64(h.s.cfg.MaxConcurrent); n > limit {
		// More choices than the server ever runs at once would get 429
		// "try again" forever.
		writeError(w, badRequest("n", "n %d: more choices than the %d sequences the server runs at once (--max-concurrent)", n, limit))
		return false
	}
	if !h.s.take(w, n-h.n) {
		return false
	}
	h.n = n
	return true
}

// release stops counting the sequences; later calls do nothing.
func (h *holding) release() {
	h.once.Do(func() { h.s.inFlight.Add(-h.n) })
}

// admit grows h to p's sequences, or answers the request itself (shutting
// down, busy) and reports false. The sequences count until h's release,
// which the caller calls when they end, not when the response is written:
// a client slow to read its reply holds nothing but its connection. ctx
// ends with the client, at shutdown and at cancel, which ends every choice
// still running whatever ends the response.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, h *holding, p *plan) (ctx context.Context, cancel func(), ok bool) {
	if s.stopping.Err() != nil {
		writeError(w, errShuttingDown)
		return nil, nil, false
	}
	if !h.grow(w, int64(len(p.reqs))) {
		return nil, nil, false
	}
	if p.template != "" {
		w.Header().Set("X-Chat-Template", p.template)
	}
	ctx, cancelCtx := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.stopping, cancelCtx)
	return ctx, func() { stop(); cancelCtx() }, true
}

// turns hands out turns at something one at a time, in the order they are
// asked for (sync.Mutex promises no order): the embeddings context, which
// a request takes input by input, so that a neighbour waits for one input
// of a large request, not for all of them.
type turns struct {
	mu    sync.Mutex
	busy  bool
	queue []chan struct{}
	// queued, when set (by tests), is called with the number waiting each
	// time a caller starts to wait.
	queued func(waiting int)
}

// acquire waits for a turn, or for ctx to end (then it returns its error
// and holds no turn).
func (t *turns) acquire(ctx context.Context) error {
	t.mu.Lock()
	if !t.busy {
		t.busy = true
		t.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	t.queue = append(t.queue, ch)
	if t.queued != nil {
		t.queued(len(t.queue))
	}
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	for i, c := range t.queue {
		if c == ch {
			t.queue = append(t.queue[:i], t.queue[i+1:]...)
			t.mu.Unlock()
			return ctx.Err()
		}
	}
	t.mu.Unlock()
	// Handed the turn as ctx ended: pass it on.
	t.release()
	return ctx.Err()
}

// release hands the turn to the first waiting, if any.
func (t *turns) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.queue) == 0 {
		t.busy = false
		return
	}
	ch := t.queue[0]
	t.queue = t.queue[1:]
	close(ch)
}
