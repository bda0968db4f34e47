package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nonReader sends a POST of body to path over a raw TCP connection with a
// small receive buffer, and never reads the reply.
func nonReader(t *testing.T, url, path, body string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	c, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	require.NoError(t, err)
	return c
}

// waitFor polls until cond holds; only the test's own timeout bounds the
// wait, so that a loaded machine makes the test slower, not failed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if d, ok := t.Deadline(); ok && time.Until(d) < 5*time.Second {
			t.Fatalf("%s: not by the test's deadline", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slowReadersBig asks for 16 choices of 250 tokens with 20 alternatives
// each (the end token banned): about 6 MB of reply, more than the kernel's
// socket buffers take (4 MiB at most here), as the n: 64, 100
// tokens, top_logprobs: 20.
var slowReadersBig = fmt.Sprintf(`"messages":[{"role":"user","content":"Hello"}],"n":16,"max_tokens":250,"logprobs":true,"top_logprobs":20,"seed":3,"logit_bias":{"%d":-100}`, testmodel.EOS)

// readClosed reads what a non-reader was sent until the server closed the
// connection, and checks it was a 200 cut before its end.
func readClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	// a hang guard only: the bytes wait in the kernel's buffers
	c.SetReadDeadline(time.Now().Add(time.Minute))
	data, err := io.ReadAll(c)
	var ne net.Error
	if err != nil && assert.ErrorAs(t, err, &ne, what) {
		assert.False(t, ne.Timeout(), "%s: the connection was not closed", what)
	}
	assert.True(t, strings.HasPrefix(string(data), "HTTP/1.1 200 OK\r\n"), "%s: %.40q", what, data)
	assert.NotContains(t, string(data), "[DONE]", what)
}

// Connections that send their request and never read hold nothing but
// themselves: once their generation ends, other clients get 200 although
// the non-readers' replies are still unread; a stream past --max-buffer is
// cut and counted. Nothing here depends on time: the write timeout (an
// hour) cuts nothing, the buffer bound counts bytes.
func TestServeSlowReaders(t *testing.T) {
	s := startServer(t, "--max-concurrent", "32", "--write-timeout", "1h", "--max-buffer", "65536")
	nonReader(t, s.url, "/v1/chat/completions", `{`+slowReadersBig+`}`)
	stream := nonReader(t, s.url, "/v1/chat/completions", `{`+slowReadersBig+`,"stream":true}`)
	waitFor(t, "the non-readers' generation ends", func() bool {
		m := s.metrics(t)
		return m["llamaserve_sequences_finished_total"] >= 32 && m["llamaserve_requests_in_flight"] == 0
	})
	start := time.Now()
	// Finished replies no longer count against --max-concurrent, although
	// the whole one still waits for its client.
	m := s.metrics(t)
	assert.Zero(t, m[`llamaserve_connections_cut_total{reason="write_timeout"}`])

	// 32 sequences at once, the whole limit, while the replies wait.
	client := s.client()
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
		MaxTokens: openai.Int(2), N: openai.Int(32), Seed: openai.Int(1),
	})
	require.NoError(t, err)
	assert.Len(t, res.Choices, 32)
	for range 3 {
		_, err := client.Completions.New(context.Background(), openai.CompletionNewParams{
			Model: "demo", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The model")},
			MaxTokens: openai.Int(3), Temperature: openai.Float(0),
		})
		require.NoError(t, err)
	}
	t.Logf("4 requests served in %v after the non-readers' generation ended", time.Since(start))

	waitFor(t, "the stream is cut", func() bool {
		return s.metrics(t)[`llamaserve_connections_cut_total{reason="buffer"}`] >= 1
	})
	m = s.metrics(t)
	assert.Equal(t, 1.0, m[`llamaserve_connections_cut_total{reason="buffer"}`], "the stream")
	assert.Zero(t, m[`llamaserve_connections_cut_total{reason="write_timeout"}`], "the whole reply waits")
	readClosed(t, stream, "the stream")
}

// A whole reply that its client does not read is cut after --write-timeout
// and counted; the test waits for it without a bound of its own.
func TestServeWriteTimeoutCutsNonReader(t *testing.T) {
	s := startServer(t, "--write-timeout", "1s")
	whole := nonReader(t, s.url, "/v1/chat/completions", `{`+slowReadersBig+`}`)
	waitFor(t, "the whole reply is cut", func() bool {
		return s.metrics(t)[`llamaserve_connections_cut_total{reason="write_timeout"}`] >= 1
	})
	m := s.metrics(t)
	assert.Equal(t, 1.0, m[`llamaserve_connections_cut_total{reason="write_timeout"}`])
	assert.Zero(t, m[`llamaserve_connections_cut_total{reason="buffer"}`])
	readClosed(t, whole, "the whole reply")
}

// When --shutdown-timeout expires, a stream still running ends with an
// error event, which the SDK reports, and the process exits with status 0.
func TestServeShutdownTimeoutEndsStreams(t *testing.T) {
	// A reply of 16000 tokens: many seconds of work, still running when
	// the 1 s are up.
	cmd := exec.Command(bin, "-m", demoModel, "--addr", "127.0.0.1:0", "--threads", "1", "--parallel", "1", "--ctx", "16384",
		"--shutdown-timeout", "1s")
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(pipe)
	var url string
	for url == "" && sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	require.NotEmpty(t, url)
	go func() {
		for sc.Scan() {
		}
	}()
	client := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("none"), option.WithMaxRetries(0))
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
		MaxTokens: openai.Int(16000), Temperature: openai.Float(0),
	}, option.WithJSONSet("logit_bias", map[string]int{fmt.Sprint(testmodel.EOS): -100}))
	require.True(t, stream.Next(), "%v", stream.Err())
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	chunks := 0
	for stream.Next() {
		chunks++
	}
	err = stream.Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the server is shutting down: the request was cut")
	assert.Contains(t, err.Error(), "server_shutting_down")
	// Counted, not timed: the cut came before the reply's end, and the
	// process exits without finishing it.
	assert.Less(t, chunks, 16000)
	require.NoError(t, cmd.Wait())
	t.Logf("stream ended %v after SIGTERM, %d chunks", time.Since(start), chunks)
	_, err = http.Get(url + "/health")
	require.Error(t, err, "the server no longer listens")
}
