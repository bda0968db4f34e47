package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// Bounds of a server case.
const (
	neighbourBound  = time.Second
	neighbourPeriod = 250 * time.Millisecond
	shutdownBound   = 10 * time.Second
)

// serveCase starts llamaserve on model (extra flags added), sends body to
// path and, while that request is in flight, a neighbour /tokenize on its
// own connection every 250 ms that must be answered within 1 s. The server
// must survive the request and stop within 10 s of SIGTERM.
func serveCase(cfg config, model, path, body string, extra ...string) outcome {
	args := append([]string{filepath.Join(cfg.bin, "llamaserve"), "-m", model, "--addr", "127.0.0.1:0",
		"--threads", "1", "--parallel", "2", "--ctx", "512", "--shutdown-timeout", "2s"}, extra...)
	c := &child{args: args, limit: cfg.limit, timeout: cfg.startupTimeout + cfg.requestTimeout + 2*shutdownBound}
	ready := make(chan string, 1)
	watch := &lineWatcher{fn: func(line string) {
		if _, addr, ok := strings.Cut(line, "listening on http://"); ok {
			select {
			case ready <- strings.TrimSpace(addr):
			default:
			}
		}
	}}
	if err := c.start(watch); err != nil {
		return outcome{class: classCrash, kind: "cannot start: " + err.Error()}
	}
	var addr string
	select {
	case addr = <-ready:
	case <-c.done:
		return c.outcome() // refused at start-up, or crashed there
	case <-time.After(cfg.startupTimeout):
		c.kill(syscall.SIGKILL)
		o := c.wait()
		o.class, o.kind = classHang, fmt.Sprintf("not listening within %s", cfg.startupTimeout)
		return o
	}
	base := "http://" + addr

	ctx, cancel := context.WithTimeout(context.Background(), cfg.requestTimeout)
	defer cancel()
	type reply struct {
		status int
		body   string
		err    error
	}
	replied := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			replied <- reply{err: err}
			return
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		replied <- reply{status: resp.StatusCode, body: string(b)}
	}()

	neighbour := &http.Client{Timeout: neighbourBound, Transport: &http.Transport{DisableKeepAlives: true}}
	var lat latencies
	ticker := time.NewTicker(neighbourPeriod)
	defer ticker.Stop()
	var r reply
wait:
	for {
		select {
		case r = <-replied:
			break wait
		case <-c.done:
			r = <-replied
			break wait
		case <-ticker.C:
			lat.probe(neighbour, base)
		}
	}
	o := outcome{}
	switch {
	case c.exited():
		o = c.outcome()
		if o.class != classCrash && o.class != classHang {
			o.class, o.kind = classCrash, "server exited during the request: "+firstError(o.output)
		}
		// a dying server answers late: the crash is the finding
		return o
	case r.err != nil && ctx.Err() != nil:
		o.class, o.kind = classHang, fmt.Sprintf("request not answered within %s", cfg.requestTimeout)
	case r.err != nil:
		// the server lives on but the request got no reply: a handler
		// that panicked (net/http recovers it and drops the connection)
		o.class, o.kind = classCrash, "no reply ("+normalise(strings.TrimPrefix(r.err.Error(), "Post \""+base+path+"\": "))+")"
	case r.status == http.StatusOK:
		o.class = classOK
	default:
		o.class, o.kind = classError, fmt.Sprintf("HTTP %d %s", r.status, normalise(firstWords(r.body, 24)))
	}
	if !lat.healthy(neighbour, base) && o.class != classHang {
		o.class, o.kind = classError, "server alive but /health failed after the request"
	}
	c.kill(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(shutdownBound):
		c.kill(syscall.SIGKILL)
		<-c.done
		if o.class != classHang {
			o.class, o.kind = classHang, fmt.Sprintf("no exit within %s of SIGTERM", shutdownBound)
		}
	}
	final := c.outcome()
	o.rss, o.output = final.rss, final.output
	switch {
	case final.class == classCrash:
		o.class, o.kind = classCrash, final.kind
	case o.class == classCrash:
		if p := panicLine(o.output); p != "" {
			o.kind = p
		}
	}
	o.note, o.late = lat.String(), lat.late > 0
	return o
}

// latencies are a server's neighbour requests: late ones were not
// answered within the bound (or timed out), failed ones were refused or
// answered with an error (a server that died fails them all).
type latencies struct {
	n, late, failed int
	worst           time.Duration
}

func (l *latencies) probe(client *http.Client, base string) {
	t0 := time.Now()
	resp, err := client.Post(base+"/tokenize", "application/json", strings.NewReader(`{"content":"hello neighbour"}`))
	d := time.Since(t0)
	l.n++
	l.worst = max(l.worst, d)
	switch {
	case err != nil && d >= neighbourBound:
		l.late++
		return
	case err != nil:
		l.failed++
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case d > neighbourBound:
		l.late++
	case resp.StatusCode != http.StatusOK:
		l.failed++
	}
}

func (l *latencies) healthy(client *http.Client, base string) bool {
	resp, err := client.Get(base + "/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// String is empty when every neighbour was answered in time.
func (l *latencies) String() string {
	if l.late+l.failed == 0 {
		return ""
	}
	return fmt.Sprintf("neighbour: %d of %d late (> %s), %d failed; slowest %s", l.late, l.n, neighbourBound, l.failed, l.worst.Round(time.Millisecond))
}

// lineWatcher calls fn for every complete line written to it.
type lineWatcher struct {
	mu  sync.Mutex
	buf []byte
	fn  func(string)
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.fn(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 1<<16 {
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

// rewriteGGUF writes a copy of the GGUF file src to dst with its metadata
// and tensor list edited; every tensor kept keeps its bytes.
func rewriteGGUF(src, dst string, edit func(md []gguf.KV, ts []gguf.TensorInfo) ([]gguf.KV, []gguf.TensorInfo)) error {
	r, err := gguf.Open(src)
	if err != nil {
		return err
	}
	defer r.Close()
	md := slices.Clone(r.Metadata)
	ts := slices.Clone(r.Tensors)
	md, ts = edit(md, ts)
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := gguf.NewWriter(f, md, ts)
	if err != nil {
		return err
	}
	for _, ti := range ts {
		b, err := r.TensorBytes(ti.Name)
		if err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

// setKV sets key in md, replacing or appending it.
func setKV(md []gguf.KV, key string, v any) []gguf.KV {
	for i := range md {
		if md[i].Key == key {
			md[i].Value = v
			return md
		}
	}
	return append(md, gguf.KV{Key: key, Value: v})
}

// panicLine is the server log's line of a handler panic that net/http
// recovered ("http: panic serving ADDR: VALUE"), without the address.
func panicLine(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if _, v, ok := strings.Cut(line, "http: panic serving "); ok {
			if _, msg, ok := strings.Cut(v, ": "); ok {
				v = msg
			}
			return "handler panic: " + normalise(v)
		}
	}
	return ""
}
