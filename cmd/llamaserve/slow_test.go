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

// Connections that send their request and never read hold nothing but
// themselves: once their generation ends, other clients get 200 although
// the non-readers' replies are still unread, and after --write-timeout (or
// past --max-buffer for a stream) the non-readers are cut and counted.
func TestServeSlowReaders(t *testing.T) {
	// The write timeout is long enough that the whole reply, whose
	// generation can end seconds before the stream's (under make test-asan
	// by more than 3 s), is not cut before both have ended.
	s := startServer(t, "--max-concurrent", "32", "--write-timeout", "10s", "--max-buffer", "65536")
	// Each non-reader asks for 16 choices of 250 tokens with 20 alternatives
	// each (the end token banned): about 6 MB of reply, more than the
	// kernel's socket buffers take (4 MiB at most here), as the issue's
	// n: 64, 100 tokens, top_logprobs: 20.
	big := fmt.Sprintf(`"n":16,"max_tokens":250,"logprobs":true,"top_logprobs":20,"seed":3,"logit_bias":{"%d":-100}`, testmodel.EOS)
	msgs := `"messages":[{"role":"user","content":"Hello"}]`
	conns := []net.Conn{
		nonReader(t, s.url, "/v1/chat/completions", `{`+msgs+`,`+big+`}`),
		nonReader(t, s.url, "/v1/chat/completions", `{`+msgs+`,`+big+`,"stream":true}`),
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		m := s.metrics(t)
		if m["llamaserve_sequences_finished_total"] >= 32 && m["llamaserve_requests_in_flight"] == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the non-readers' generation did not end: %v", m)
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	// Finished replies no longer count against --max-concurrent, although
	// the whole one still waits for its client (cut 10 s after its first
	// blocked write).
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

	cut := func() float64 {
		m := s.metrics(t)
		return m[`llamaserve_connections_cut_total{reason="write_timeout"}`] + m[`llamaserve_connections_cut_total{reason="buffer"}`]
	}
	for cut() < 2 {
		require.True(t, time.Now().Before(deadline), "the non-readers were not cut: %v", s.metrics(t))
		time.Sleep(50 * time.Millisecond)
	}
	m = s.metrics(t)
	t.Logf("cut: %v by the write timeout, %v by the buffer bound",
		m[`llamaserve_connections_cut_total{reason="write_timeout"}`], m[`llamaserve_connections_cut_total{reason="buffer"}`])
	assert.Equal(t, 1.0, m[`llamaserve_connections_cut_total{reason="write_timeout"}`], "the whole reply")
	assert.Equal(t, 1.0, m[`llamaserve_connections_cut_total{reason="buffer"}`], "the stream")
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		data, err := io.ReadAll(c)
		var ne net.Error
		if err != nil && assert.ErrorAs(t, err, &ne, i) {
			assert.False(t, ne.Timeout(), "connection %d was not closed", i)
		}
		assert.True(t, strings.HasPrefix(string(data), "HTTP/1.1 200 OK\r\n"), "connection %d: %.40q", i, data)
		assert.NotContains(t, string(data), "[DONE]", i)
	}
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
	assert.Less(t, chunks, 16000)
	require.NoError(t, cmd.Wait())
	t.Logf("stream ended %v after SIGTERM, %d chunks", time.Since(start), chunks)
	assert.Less(t, time.Since(start), 30*time.Second)
	_, err = http.Get(url + "/health")
	require.Error(t, err, "the server no longer listens")
}
