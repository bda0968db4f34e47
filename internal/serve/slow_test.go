package serve

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smallBuffers is a listener whose connections have a small send buffer,
// so that a client that reads nothing blocks the server's writes within a
// few kilobytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// newSlowServer is newServer with small send buffers.
func newSlowServer(t *testing.T, slots int, cfg Config) *httptest.Server {
	t.Helper()
	ts, _ := newServer(t, slots, cfg)
	// newServer started ts: make a second one with the same handler on a
	// listener of small buffers.
	slow := httptest.NewUnstartedServer(ts.Config.Handler)
	slow.Listener = smallBuffers{slow.Listener}
	slow.Start()
	t.Cleanup(slow.Close)
	return slow
}

// dialNonReader connects to addr with a small receive buffer and sends a
// POST of body to path; the caller never reads the reply.
func dialNonReader(t *testing.T, addr, path, body string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	require.NoError(t, err)
	return c
}

// metricValue reads one sample of the server's metrics.
func metricValue(t *testing.T, url, sample string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatalf("no sample %s", sample)
	return 0
}

// Clients that send a request and never read its reply hold nothing but
// their connections: once their generation ends their sequences no longer
// count against MaxConcurrent and other clients get 200; a stream whose
// unsent events pass the bound is cut and counted. Nothing here depends on
// time: the write timeout (an hour) cuts nothing, the bound counts bytes.
func TestSlowReadersHoldNothing(t *testing.T) {
	ts := newSlowServer(t, 2, Config{MaxConcurrent: 4, WriteTimeout: time.Hour, MaxBufferedBytes: 32 << 10})
	addr := ts.Listener.Addr().String()
	stream := dialNonReader(t, addr, "/v1/chat/completions", `{`+slowBig+`,"stream":true}`)
	dialNonReader(t, addr, "/v1/chat/completions", `{`+slowBig+`}`)

	// The two requests hold the four sequences while they generate; once
	// they have ended, every other request gets 200 at once, although no
	// byte of their replies was read.
	waitUntil(t, "the non-readers' generation ends", func() bool {
		return metricValue(t, ts.URL, "llamaserve_sequences_finished_total") >= 4 &&
			metricValue(t, ts.URL, "llamaserve_requests_in_flight") == 0
	})
	for i := range 3 {
		resp := post(t, ts.URL+"/v1/completions", `{"prompt":"The model","max_tokens":3,"n":4,"temperature":0}`)
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d: %s", i, data)
	}

	// The stream is cut when its events pass 32 KiB, and its connection
	// ends; the whole reply still waits for its client.
	waitUntil(t, "the stream is cut", func() bool {
		return metricValue(t, ts.URL, `llamaserve_connections_cut_total{reason="buffer"}`) >= 1
	})
	assert.Equal(t, 1.0, metricValue(t, ts.URL, `llamaserve_connections_cut_total{reason="buffer"}`))
	assert.Zero(t, metricValue(t, ts.URL, `llamaserve_connections_cut_total{reason="write_timeout"}`))
	requireCut(t, stream, "the stream")
}

// A whole reply that its client does not read is cut after the write
// timeout and counted; the test waits for it without a bound of its own.
func TestWriteTimeoutCutsNonReader(t *testing.T) {
	ts := newSlowServer(t, 2, Config{MaxConcurrent: 4, WriteTimeout: time.Second, MaxBufferedBytes: 32 << 10})
	whole := dialNonReader(t, ts.Listener.Addr().String(), "/v1/chat/completions", `{`+slowBig+`}`)
	waitUntil(t, "the whole reply is cut", func() bool {
		return metricValue(t, ts.URL, `llamaserve_connections_cut_total{reason="write_timeout"}`) >= 1
	})
	assert.Equal(t, 1.0, metricValue(t, ts.URL, `llamaserve_connections_cut_total{reason="write_timeout"}`))
	assert.Zero(t, metricValue(t, ts.URL, `llamaserve_connections_cut_total{reason="buffer"}`))
	requireCut(t, whole, "the whole reply")
}

// slowBig asks for replies of 150 tokens each (the end token is banned),
// each token with 20 alternatives: over 300 KiB.
var slowBig = fmt.Sprintf(`"messages":[{"role":"user","content":"Hello"}],"n":2,"max_tokens":150,"logprobs":true,"top_logprobs":20,"seed":1,"logit_bias":{"%d":-100}`, testmodel.EOS)

// waitUntil polls until cond holds; only the test's own timeout bounds the
// wait, so that a loaded machine makes the test slower, not failed.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if d, ok := t.Deadline(); ok && time.Until(d) < 5*time.Second {
			t.Fatalf("%s: not by the test's deadline", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requireCut reads what the non-reader c was sent until the server closed
// the connection, and checks it was a 200 cut before its end.
func requireCut(t *testing.T, c net.Conn, name string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(time.Minute)) // a hang guard only: the bytes wait in the kernel's buffers
	data, err := io.ReadAll(c)
	if err != nil {
		assert.NotErrorIs(t, err, syscall.ETIMEDOUT, name)
		var ne net.Error
		if assert.ErrorAs(t, err, &ne, name) {
			assert.False(t, ne.Timeout(), "%s: the connection was not closed", name)
		}
	}
	assert.True(t, strings.HasPrefix(string(data), "HTTP/1.1 200 OK\r\n"), "%s: %.40q", name, data)
	assert.NotContains(t, string(data), "[DONE]", name)
}

// A client that reads a large reply slowly but steadily is not cut: the
// write timeout runs from its last progress, not from the reply's start.
func TestSteadySlowReaderNotCut(t *testing.T) {
	ts := newSlowServer(t, 2, Config{WriteTimeout: time.Second})
	c := dialNonReader(t, ts.Listener.Addr().String(), "/v1/chat/completions",
		fmt.Sprintf(`{"messages":[{"role":"user","content":"Hello"}],"n":4,"max_tokens":100,"logprobs":true,"top_logprobs":20,"seed":2,"logit_bias":{"%d":-100}}`, testmodel.EOS))
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var data []byte
	buf := make([]byte, 4<<10)
	start := time.Now()
	for {
		n, err := resp.Body.Read(buf)
		data = append(data, buf[:n]...)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		time.Sleep(10 * time.Millisecond)
	}
	var body struct {
		Choices []struct {
			Logprobs struct {
				Content []json.RawMessage `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(data, &body))
	require.Len(t, body.Choices, 4)
	for _, c := range body.Choices {
		assert.Len(t, c.Logprobs.Content, 100)
	}
	assert.Greater(t, len(data), 4*writeChunk, "the reply spans several chunks")
	t.Logf("%d bytes read in %v", len(data), time.Since(start))
	assert.Greater(t, time.Since(start), time.Second, "the reading took longer than the write timeout")
	assert.Zero(t, metricValue(t, ts.URL, `llamaserve_connections_cut_total{reason="write_timeout"}`))
}
