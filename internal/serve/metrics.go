package serve

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/llamaloop/llamaloop/prefixcache"
)

// metrics counts the server's responses; the engine counts the rest.
type metrics struct {
	mu       sync.Mutex
	requests map[requestKey]uint64
	cuts     [numCutReasons]uint64
}

// cutReason is why the server cut a connection while writing a reply.
type cutReason int

const (
	cutWriteTimeout cutReason = iota // the client read nothing for the write timeout
	cutBuffer                        // a stream's unsent events exceeded the buffer bound
	numCutReasons
)

var cutReasonNames = [numCutReasons]string{"write_timeout", "buffer"}

func (m *metrics) cut(r cutReason) {
	m.mu.Lock()
	m.cuts[r]++
	m.mu.Unlock()
}

type requestKey struct {
	path string
	code int
}

func (m *metrics) count(path string, code int) {
	m.mu.Lock()
	m.requests[requestKey{path, code}]++
	m.mu.Unlock()
}

// metricsHandler writes the metrics in Prometheus' text format (version
// 0.0.4).
func (s *Server) metricsHandler(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	st := s.cfg.Engine.Stats()
	var cache prefixcache.Stats
	if s.cfg.Cache != nil {
		cache = s.cfg.Cache.Stats()
	}
	var b strings.Builder
	metric := func(name, typ, help string, value any) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n%s %v\n", name, help, name, typ, name, value)
	}
	metric("llamaserve_requests_waiting", "gauge", "Sequences submitted and waiting for a slot (the queue).", st.Waiting)
	metric("llamaserve_requests_active", "gauge", "Sequences holding a slot of the running batch.", st.Active)
	metric("llamaserve_requests_in_flight", "gauge", "Sequences of the HTTP requests in progress.", s.inFlight.Load())
	metric("llamaserve_sequences_submitted_total", "counter", "Sequences accepted by the engine.", st.Submitted)
	metric("llamaserve_sequences_finished_total", "counter", "Sequences that ended, for any reason.", st.Finished)
	metric("llamaserve_prompt_tokens_total", "counter", "Prompt tokens of the accepted sequences.", st.PromptTokens)
	metric("llamaserve_generated_tokens_total", "counter", "Tokens generated.", st.GeneratedTokens)
	metric("llamaserve_eval_seconds_total", "counter", "Seconds spent evaluating batches.", st.EvalTime.Seconds())
	tps := 0.0
	if st.EvalTime > 0 {
		tps = float64(st.GeneratedTokens) / st.EvalTime.Seconds()
	}
	metric("llamaserve_tokens_per_second", "gauge", "Tokens generated per second of evaluation, over the server's life (rate(llamaserve_generated_tokens_total[1m]) gives the recent rate).", tps)
	metric("llamaserve_prefix_cache_lookups_total", "counter", "Prompts looked up in the prefix cache.", cache.Lookups)
	metric("llamaserve_prefix_cache_hits_total", "counter", "Prompts that found a cached prefix.", cache.Hits)
	metric("llamaserve_prefix_cache_tokens_saved_total", "counter", "Prompt tokens not evaluated because the prefix cache held them.", cache.TokensSaved)
	metric("llamaserve_prefix_cache_entries", "gauge", "Finished sequences the prefix cache keeps.", cache.Entries)
	metric("llamaserve_prefix_cache_cells", "gauge", "Tokens the prefix cache keeps.", cache.Cells)

	b.WriteString("# HELP llamaserve_http_requests_total HTTP requests by path and status.\n# TYPE llamaserve_http_requests_total counter\n")
	s.metrics.mu.Lock()
	keys := make([]requestKey, 0, len(s.metrics.requests))
	for k := range s.metrics.requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b requestKey) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return a.code - b.code
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "llamaserve_http_requests_total{path=%q,code=\"%d\"} %d\n", k.path, k.code, s.metrics.requests[k])
	}
	b.WriteString("# HELP llamaserve_connections_cut_total Connections cut while a reply was written: the client read nothing for --write-timeout, or a stream's unsent events exceeded --max-buffer.\n# TYPE llamaserve_connections_cut_total counter\n")
	for r, n := range s.metrics.cuts {
		fmt.Fprintf(&b, "llamaserve_connections_cut_total{reason=%q} %d\n", cutReasonNames[r], n)
	}
	s.metrics.mu.Unlock()
	io.WriteString(w, b.String())
}
