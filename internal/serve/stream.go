package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llamaloop/llamaloop/internal/quote"
)

// stream writes the choices' events as server-sent events, each choice
// from its own goroutine, then the usage chunk when asked and [DONE]; a
// stream that Abort ends gets an error event instead. The events go
// through a streamWriter: the choices never wait for the client, and
// release is called as soon as they end.
func (s *Server) stream(ctx, client context.Context, cancel context.CancelFunc, w http.ResponseWriter, resp *response, choices []*choice, includeUsage bool, release func()) {
	out := s.openStream(w, "text/event-stream", cancel)
	send := func(v any) {
		data, err := json.Marshal(v)
		if err != nil {
			s.logf("stream: %v", err)
			return
		}
		out.send(fmt.Appendf(nil, "data: %s\n\n", data))
	}
	var wg sync.WaitGroup
	for _, c := range choices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp.chat {
				send(resp.firstChunk(c.index))
			}
			offset := 0 // text_offset of the chunk's first token
			for ev := range c.reply() {
				if ev.Err != nil {
					if ctx.Err() == nil {
						send(s.streamError(ev.Err))
					}
					break
				}
				for _, b := range resp.eventChunks(ev, &offset) {
					send(b)
				}
			}
		}()
	}
	wg.Wait()
	release()
	switch {
	case ctx.Err() == nil:
		if includeUsage {
			send(resp.usageChunk(choices))
		}
		out.send([]byte("data: [DONE]\n\n"))
	case client.Err() == nil && s.stopping.Err() != nil:
		var e apiError
		e.Error.Message, e.Error.Type = errShuttingDown.msg, "server_error"
		e.Error.Code = &errShuttingDown.code
		send(e)
	}
	out.close()
}

// streamWriter writes a stream's events from a goroutine of its own, each
// write within the write timeout; events wait in memory, up to the
// server's MaxBufferedBytes. A failure or an overflow cuts the stream:
// its choices are cancelled and what waits is dropped.
type streamWriter struct {
	s      *Server
	w      http.ResponseWriter
	rc     *http.ResponseController
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	wake    chan struct{} // capacity 1: something was queued or the stream closed
	queue   [][]byte
	waiting int64 // bytes queued and not yet written
	closed  bool
	failed  bool
	cut     atomic.Bool // failed, read by run without the lock
}

// errCut ends the writes of a stream that send cut.
var errCut = errors.New("the stream was cut")

// openStream answers w with a stream of contentType (server-sent events,
// or NDJSON) and returns the writer of its events; cancel ends the
// stream's choices when it is cut.
func (s *Server) openStream(w http.ResponseWriter, contentType string, cancel context.CancelFunc) *streamWriter {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return s.newStreamWriter(w, cancel)
}

func (s *Server) newStreamWriter(w http.ResponseWriter, cancel context.CancelFunc) *streamWriter {
	sw := &streamWriter{s: s, w: w, rc: http.NewResponseController(w), cancel: cancel,
		done: make(chan struct{}), wake: make(chan struct{}, 1)}
	// The status and headers go out before any event, so that a client
	// learns its stream began even when the stream is cut before its first
	// event is written (a failure shows in the first event's write).
	sw.rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	_ = sw.rc.Flush()
	go sw.run()
	return sw
}

// send queues data, or cuts the stream when the queue would exceed the
// bound.
func (sw *streamWriter) send(data []byte) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.failed || sw.closed {
		return
	}
	if sw.waiting+int64(len(data)) > sw.s.cfg.MaxBufferedBytes {
		sw.failLocked()
		sw.s.metrics.cut(cutBuffer)
		// A write that waits for the client ends now.
		sw.rc.SetWriteDeadline(time.Now())
		return
	}
	sw.queue = append(sw.queue, data)
	sw.waiting += int64(len(data))
	sw.signal()
}

func (sw *streamWriter) signal() {
	select {
	case sw.wake <- struct{}{}:
	default:
	}
}

// failLocked marks the stream cut and ends its choices.
func (sw *streamWriter) failLocked() {
	sw.failed = true
	sw.cut.Store(true)
	sw.queue = nil
	sw.cancel()
}

// close writes what waits and returns when the writer is done.
func (sw *streamWriter) close() {
	sw.mu.Lock()
	sw.closed = true
	sw.signal()
	sw.mu.Unlock()
	<-sw.done
}

// run writes the queued events, all that wait at once, then flushes them.
func (sw *streamWriter) run() {
	defer close(sw.done)
	var batch [][]byte
	for {
		sw.mu.Lock()
		for len(sw.queue) == 0 && !sw.closed && !sw.failed {
			sw.mu.Unlock()
			<-sw.wake
			sw.mu.Lock()
		}
		if sw.failed || len(sw.queue) == 0 {
			sw.mu.Unlock()
			return
		}
		batch, sw.queue = sw.queue, batch[:0]
		sw.mu.Unlock()
		var err error
		written := 0
		for _, data := range batch {
			for len(data) > 0 && err == nil {
				n := min(len(data), writeChunk)
				if err = sw.armDeadline(); err != nil {
					break
				}
				_, err = sw.w.Write(data[:n])
				data = data[n:]
				written += n
			}
		}
		if err == nil {
			if err = sw.armDeadline(); err == nil {
				err = sw.rc.Flush()
			}
		}
		clear(batch)
		sw.mu.Lock()
		sw.waiting -= int64(written)
		if err != nil && !sw.failed {
			sw.failLocked()
			sw.s.writeFailed(err)
		}
		sw.mu.Unlock()
	}
}

// armDeadline gives the next write --write-timeout, or returns errCut when
// the stream was cut: then the deadline is put back in the past, since a
// cut (send) may have set its past deadline just before this one replaced
// it, and net/http's own last flush after the handler would otherwise wait
// the whole timeout for a client that reads nothing, keeping its
// connection open.
func (sw *streamWriter) armDeadline() error {
	sw.rc.SetWriteDeadline(time.Now().Add(sw.s.cfg.WriteTimeout))
	if sw.cut.Load() {
		sw.rc.SetWriteDeadline(time.Now())
		return errCut
	}
	return nil
}

// streamError is the error event of a choice that failed mid-stream.
func (s *Server) streamError(err error) apiError {
	re := s.choiceError("stream", err)
	var e apiError
	e.Error.Message, e.Error.Type = quote.Message(re.msg), "server_error"
	if re.status < 500 {
		e.Error.Type = "invalid_request_error"
	}
	return e
}
