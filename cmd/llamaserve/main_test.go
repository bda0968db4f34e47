package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/clitest"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The binary and the demo model every test uses, made once by TestMain.
var (
	bin       string
	demoModel string
	demo      *testmodel.Demo
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "llamaserve-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if bin, err = clitest.Build(dir, "llamaserve"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if demo, err = testmodel.NewDemo(); err == nil {
			demoModel = filepath.Join(dir, "demo.gguf")
			err = demo.Write(demoModel)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// server is a running llamaserve process.
type server struct {
	url    string
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr strings.Builder
	exited chan struct{}
}

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// startServer runs llamaserve on the demo model on a free port, with one
// thread, an f32 cache in batch-invariant mode (replies equal generation
// alone, bit for bit), 4
// sequences of 512 tokens and args; it is stopped with SIGINT at the end of
// the test, which must see it exit with status 0.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	return startProcess(t, append([]string{"-m", demoModel, "--addr", "127.0.0.1:0", "--threads", "1", "--cache-type", "f32",
		"--batch-invariant", "--parallel", "4", "--ctx", "512"}, args...))
}

// startProcess runs llamaserve with the arguments all, as startServer does.
func startProcess(t *testing.T, all []string) *server {
	t.Helper()
	s := &server{cmd: exec.Command(bin, all...), exited: make(chan struct{})}
	pipe, err := s.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, s.cmd.Start())
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			s.mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	url, ok := <-found
	require.True(t, ok, "llamaserve did not start: %s", s.log())
	s.url = url
	t.Cleanup(func() {
		s.cmd.Process.Signal(os.Interrupt)
		err := s.cmd.Wait()
		assert.NoError(t, err, "llamaserve exit; stderr:\n%s", s.log())
	})
	return s
}

func (s *server) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

func (s *server) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(s.url+"/v1/"), option.WithAPIKey("none"), option.WithMaxRetries(0))
}

// metrics reads the server's metrics as name -> value (unlabelled ones).
func (s *server) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get(s.url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		require.True(t, ok, line)
		v, err := strconv.ParseFloat(value, 64)
		require.NoError(t, err, line)
		out[name] = v
	}
	return out
}

// greedy is the demo model's greedy continuation of text (prompt with BOS)
// from its exact logits: the argmax after the last token, lowest id among
// ties, until n tokens or EOS. It returns the text and the token count.
func greedy(text string, n int) (string, int) {
	prompt := demo.Spec.Vocab.Tokenize(text, true)
	prev := prompt[len(prompt)-1]
	out := ""
	for i := range n {
		row := demo.Logits(prev)
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		prev = int32(best)
		if prev == testmodel.EOS {
			return out, i + 1
		}
		out += demo.Spec.Vocab.Piece(prev)
	}
	return out, n
}

// reference generates req alone in this process, on the same model with an
// f32 cache: what the server must reply.
var (
	refOnce sync.Once
	refGen  *generation.Generator
	refErr  error
	refMu   sync.Mutex
)

func reference(t *testing.T, req generation.Request) generation.Result {
	t.Helper()
	refOnce.Do(func() {
		var m *llamacpp.Model
		if m, refErr = llamacpp.LoadModel(demoModel, llamacpp.ModelParams{}); refErr != nil {
			return
		}
		var c *llamacpp.Context
		c, refErr = m.NewContext(llamacpp.ContextParams{ContextSize: 512, Threads: 1,
			TypeK: llamacpp.KVF32, TypeV: llamacpp.KVF32, FlashAttention: llamacpp.FlashAttentionOff})
		if refErr != nil {
			return
		}
		var b *llamabackend.Backend
		if b, refErr = llamabackend.New(c); refErr == nil {
			refGen = generation.NewGenerator(b, llamabackend.Tokenizer{Vocab: m.Vocab()})
		}
	})
	require.NoError(t, refErr)
	refMu.Lock()
	defer refMu.Unlock()
	res, err := refGen.Generate(context.Background(), []generation.Request{req})
	require.NoError(t, err)
	return res[0]
}

// sampling is the config of a request with OpenAI's defaults and
// max_tokens n: sampling at temperature 1, no top-k.
func sampling(n int) *genconfig.Config {
	c := genconfig.Default()
	c.DoSample, c.TopK, c.MaxNewTokens = true, 0, &n
	return c
}

// The OpenAI SDK talks to the server as a user's program does: the model
// list, completions and chat completions, streamed and not, with n, seed,
// stop and logprobs, and the transformers fields as extensions.
func TestServeWithOpenAISDK(t *testing.T) {
	s := startServer(t)
	client := s.client()
	ctx := context.Background()

	t.Run("models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		require.NoError(t, err)
		require.Len(t, page.Data, 1)
		assert.Equal(t, "demo", page.Data[0].ID)
		m, err := client.Models.Get(ctx, "demo")
		require.NoError(t, err)
		assert.Equal(t, "demo", m.ID)
		_, err = client.Models.Get(ctx, "gpt-4")
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusNotFound, apiErr.StatusCode)
	})

	t.Run("greedy completion", func(t *testing.T) {
		res, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model:       "demo",
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("The model")},
			MaxTokens:   openai.Int(12),
			Temperature: openai.Float(0),
		})
		require.NoError(t, err)
		want, n := greedy("The model", 12)
		require.Len(t, res.Choices, 1)
		assert.Equal(t, want, res.Choices[0].Text)
		assert.Equal(t, openai.CompletionChoiceFinishReasonLength, res.Choices[0].FinishReason)
		assert.Equal(t, int64(n), res.Usage.CompletionTokens)
		assert.Equal(t, int64(len(demo.Spec.Vocab.Tokenize("The model", true))), res.Usage.PromptTokens)
		assert.Equal(t, "demo", res.Model)
	})

	t.Run("stop string is left out", func(t *testing.T) {
		full, _ := greedy("The model", 30)
		stop := " every"
		cut := strings.Index(full, stop)
		require.Positive(t, cut, full)
		res, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model: "demo", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The model")},
			MaxTokens: openai.Int(30), Temperature: openai.Float(0),
			Stop: openai.CompletionNewParamsStopUnion{OfStringArray: []string{"zzz", stop}},
		})
		require.NoError(t, err)
		assert.Equal(t, full[:cut], res.Choices[0].Text)
		assert.Equal(t, openai.CompletionChoiceFinishReasonStop, res.Choices[0].FinishReason)

		// Streamed, the text that might begin the stop string is held back
		// and never shown.
		stream := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
			Model: "demo", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The model")},
			MaxTokens: openai.Int(30), Temperature: openai.Float(0),
			Stop: openai.CompletionNewParamsStopUnion{OfString: openai.String(stop)},
		})
		var text strings.Builder
		var finish string
		for stream.Next() {
			c := stream.Current()
			require.Len(t, c.Choices, 1)
			text.WriteString(c.Choices[0].Text)
			if c.Choices[0].FinishReason != "" {
				finish = string(c.Choices[0].FinishReason)
			}
		}
		require.NoError(t, stream.Err())
		assert.Equal(t, full[:cut], text.String())
		assert.Equal(t, "stop", finish)
	})

	t.Run("chat with seed, n and logprobs", func(t *testing.T) {
		msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a model."), openai.UserMessage("What does the model read?")}
		res, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "demo", Messages: msgs, MaxTokens: openai.Int(20), Seed: openai.Int(7), N: openai.Int(3),
			Logprobs: openai.Bool(true), TopLogprobs: openai.Int(3),
		})
		require.NoError(t, err)
		require.Len(t, res.Choices, 3)
		completion := 0
		for j, c := range res.Choices {
			want := reference(t, generation.Request{
				Messages: chatMessages("You are a model.", "What does the model read?"),
				Config:   sampling(20), Seed: uint64(7 + j), Logprobs: true, TopLogprobs: 3,
			})
			assert.Equal(t, int64(j), c.Index)
			assert.Equal(t, "assistant", string(c.Message.Role))
			assert.Equal(t, want.Text, c.Message.Content, "choice %d", j)
			listed := len(want.Tokens) // the logprobs list the text's tokens, not the end token
			if want.Finish == generation.FinishEOS {
				listed--
			}
			require.Len(t, c.Logprobs.Content, listed)
			for i, lp := range c.Logprobs.Content {
				assert.InDelta(t, want.Logprobs[i], lp.Logprob, 1e-6)
				require.Len(t, lp.TopLogprobs, 3)
				assert.InDelta(t, want.TopLogprobs[i][0].Logprob, lp.TopLogprobs[0].Logprob, 1e-6)
				if piece := demo.Spec.Vocab.Piece(want.Tokens[i]); piece != "" { // control tokens are spelled
					assert.Equal(t, piece, lp.Token)
				}
			}
			completion += len(want.Tokens)
		}
		assert.Equal(t, int64(completion), res.Usage.CompletionTokens)
	})

	t.Run("streamed chat equals the whole reply", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{
			Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
			MaxCompletionTokens: openai.Int(25), Seed: openai.Int(3), Temperature: openai.Float(0.8),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		require.NoError(t, stream.Err())
		cfg := sampling(25)
		cfg.Temperature = 0.8
		want := reference(t, generation.Request{Messages: chatMessages("", "Hello"), Config: cfg, Seed: 3})
		require.Len(t, acc.Choices, 1)
		assert.Equal(t, want.Text, acc.Choices[0].Message.Content)
		assert.Greater(t, chunks, len(want.Tokens), "one chunk per token, the role and the usage")
		assert.Equal(t, int64(len(want.Tokens)), acc.Usage.CompletionTokens)

		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
		whole, err := client.Chat.Completions.New(ctx, params)
		require.NoError(t, err)
		assert.Equal(t, want.Text, whole.Choices[0].Message.Content)
	})

	t.Run("transformers fields as extensions", func(t *testing.T) {
		res, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model: "demo", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The model")},
			MaxTokens: openai.Int(16), Seed: openai.Int(5),
		}, option.WithJSONSet("top_k", 3), option.WithJSONSet("repetition_penalty", 1.3),
			option.WithJSONSet("no_repeat_ngram_size", 2))
		require.NoError(t, err)
		cfg := sampling(16)
		cfg.TopK, cfg.RepetitionPenalty, cfg.NoRepeatNGramSize = 3, 1.3, 2
		want := reference(t, generation.Request{Text: "The model", Config: cfg, Seed: 5})
		assert.Equal(t, want.Text, res.Choices[0].Text)

		_, err = client.Completions.New(ctx, openai.CompletionNewParams{
			Model: "demo", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")},
		}, option.WithJSONSet("top_k", -1))
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
		assert.Equal(t, "top_k", apiErr.Param)
	})

	t.Run("prompt longer than a sequence", func(t *testing.T) {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(strings.Repeat("The model reads ", 300))},
		})
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
		assert.Equal(t, "context_length_exceeded", apiErr.Code)
	})
}

// chatMessages is a conversation of an optional system message and a user
// message.
func chatMessages(system, user string) []backend.Message {
	var out []backend.Message
	if system != "" {
		out = append(out, backend.Message{Role: "system", Content: system})
	}
	return append(out, backend.Message{Role: "user", Content: user})
}

// Many clients at once, streaming and not, with different prompts, lengths
// and settings: each gets exactly its reply alone, and afterwards no
// sequence is held and nothing waits.
func TestServeConcurrentClients(t *testing.T) {
	s := startServer(t)
	client := s.client()
	ctx := context.Background()
	prompts := []string{"The model", "A prompt", "The loop", "Every token", "The tests", "Go"}
	const clients = 16
	type reply struct {
		text   string
		tokens int64
		err    error
	}
	replies := make([]reply, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			params := openai.CompletionNewParams{
				Model:     "demo",
				Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompts[i%len(prompts)])},
				MaxTokens: openai.Int(int64(8 + 5*i)), Seed: openai.Int(int64(i)),
			}
			if i%2 == 0 {
				res, err := client.Completions.New(ctx, params)
				if err == nil {
					replies[i] = reply{text: res.Choices[0].Text, tokens: res.Usage.CompletionTokens}
				}
				replies[i].err = err
				return
			}
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := client.Completions.NewStreaming(ctx, params)
			var b strings.Builder
			for stream.Next() {
				c := stream.Current()
				for _, ch := range c.Choices {
					b.WriteString(ch.Text)
				}
				if c.Usage.CompletionTokens > 0 {
					replies[i].tokens = c.Usage.CompletionTokens
				}
			}
			replies[i].text, replies[i].err = b.String(), stream.Err()
		}()
	}
	wg.Wait()
	for i, r := range replies {
		require.NoError(t, r.err, "client %d", i)
		want := reference(t, generation.Request{Text: prompts[i%len(prompts)], Config: sampling(8 + 5*i), Seed: uint64(i)})
		assert.Equal(t, want.Text, r.text, "client %d", i)
		assert.Equal(t, int64(len(want.Tokens)), r.tokens, "client %d", i)
	}
	m := s.metrics(t)
	assert.Zero(t, m["llamaserve_requests_active"])
	assert.Zero(t, m["llamaserve_requests_waiting"])
	assert.Zero(t, m["llamaserve_requests_in_flight"])
	assert.Equal(t, float64(clients), m["llamaserve_sequences_finished_total"])
}

// A client that goes away in the middle of a streamed reply frees its
// sequence: the engine ends it at its next step, and the server goes on.
func TestServeClientDisconnect(t *testing.T) {
	s := startServer(t, "--parallel", "1")
	client := s.client()
	ctx, cancel := context.WithCancel(context.Background())
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
		Temperature: openai.Float(0),
	})
	for range 3 {
		require.True(t, stream.Next(), "%v", stream.Err())
	}
	cancel()
	for stream.Next() {
	}
	require.ErrorIs(t, stream.Err(), context.Canceled)
	stream.Close()

	// The one sequence is free again: the next request runs to its end
	// (without a free sequence it would wait forever), and the metrics show
	// no sequence held.
	res, err := client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: "demo", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The model")},
		MaxTokens: openai.Int(5), Temperature: openai.Float(0),
	})
	require.NoError(t, err)
	want, _ := greedy("The model", 5)
	assert.Equal(t, want, res.Choices[0].Text)
	m := s.metrics(t)
	assert.Zero(t, m["llamaserve_requests_active"])
	assert.Zero(t, m["llamaserve_requests_in_flight"])
	assert.Equal(t, 2.0, m["llamaserve_sequences_finished_total"])
}

// The errors of a request reach the client with OpenAI's status codes and
// error object, over plain HTTP as curl sends it.
func TestServeErrorStatuses(t *testing.T) {
	s := startServer(t, "--max-body", "2000", "--max-concurrent", "2")
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		param                    string
	}{
		{"bad JSON", "POST", "/v1/completions", `{"prompt": "x",`, 400, ""},
		{"not an object", "POST", "/v1/completions", `[1]`, 400, ""},
		{"unknown field", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tool":[]}`, 400, "tool"},
		{"first unknown field", "POST", "/v1/completions", `{"prompt":"x","zz":1,"aa":2,"mm":3}`, 400, "zz"},
		{"tools", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f g"}}]}`, 400, "tools[0].function.name"},
		{"audio modality", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"modalities":["text","audio"]}`, 400, "modalities"},
		{"wrong type", "POST", "/v1/completions", `{"prompt":"x","max_tokens":"ten"}`, 400, "max_tokens"},
		{"no prompt", "POST", "/v1/completions", `{"model":"demo"}`, 400, "prompt"},
		{"bad role", "POST", "/v1/chat/completions", `{"messages":[{"role":"robot","content":"x"}]}`, 400, "messages[0].role"},
		{"tool without id", "POST", "/v1/chat/completions", `{"messages":[{"role":"tool","content":"x"}]}`, 400, "messages[0].tool_call_id"},
		{"too many stops", "POST", "/v1/completions", `{"prompt":"x","stop":["a","b","c","d","e"]}`, 400, "stop"},
		{"token out of range", "POST", "/v1/completions", `{"prompt":[1,2,999999]}`, 400, "prompt"},
		{"body too large", "POST", "/v1/completions", `{"prompt":"` + strings.Repeat("a", 3000) + `"}`, 413, ""},
		{"n above the limit", "POST", "/v1/completions", `{"prompt":"x","n":3}`, 400, "n"},
		{"wrong method", "GET", "/v1/completions", ``, 405, ""},
		{"no such endpoint", "POST", "/v1/images/generations", `{}`, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, s.url+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tc.status, resp.StatusCode)
			var body struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			assert.NotEmpty(t, body.Error.Message)
			if tc.param != "" {
				require.NotNil(t, body.Error.Param)
				assert.Equal(t, tc.param, *body.Error.Param)
			}
		})
	}
	// The body's encoding: a type that is not JSON is 415, invalid UTF-8
	// is 400.
	for _, tc := range []struct {
		ctype, body string
		status      int
	}{
		{"text/plain", `{"prompt":"x","max_tokens":1}`, 415},
		{"application/x-www-form-urlencoded", `{"prompt":"x","max_tokens":1}`, 415},
		{"application/json; charset=utf-8", `{"prompt":"x","max_tokens":1}`, 200},
		{"application/json", "{\"prompt\":\"\xff\xfe\"}", 400},
	} {
		resp, err := http.Post(s.url+"/v1/completions", tc.ctype, strings.NewReader(tc.body))
		require.NoError(t, err)
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.ctype, data)
	}
	resp, err := http.Get(s.url + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// llamaserve's command line: help, and errors before anything loads.
func TestCommandLine(t *testing.T) {
	res := clitest.Run(t, bin, "", "--help")
	require.Equal(t, 0, res.Code)
	for _, opt := range []string{"--addr HOST:PORT", "127.0.0.1:8080", "--parallel", "--max-concurrent", "--cache-type",
		"--write-timeout DURATION", "--max-buffer BYTES"} {
		assert.Contains(t, res.Stdout, opt)
	}
	res = clitest.Run(t, bin, "")
	assert.Equal(t, 2, res.Code)
	assert.Equal(t, "llamaserve: no model: give one with -m FILE.gguf (see llamaserve --help)\n", res.Stderr)
	res = clitest.Run(t, bin, "", "-m", demoModel, "--parallel", "0")
	assert.Equal(t, 2, res.Code)
	assert.Contains(t, res.Stderr, "--parallel 0: must be at least 1")
	res = clitest.Run(t, bin, "", "-m", demoModel, "--write-timeout", "0s")
	assert.Equal(t, 2, res.Code)
	assert.Contains(t, res.Stderr, "--write-timeout 0s: must be positive")
	res = clitest.Run(t, bin, "", "-m", demoModel, "--max-buffer", "0")
	assert.Equal(t, 2, res.Code)
	assert.Contains(t, res.Stderr, "--max-buffer 0: must be at least 1")
	res = clitest.Run(t, bin, "", "-m", demoModel, "--poll", "101")
	assert.Equal(t, 2, res.Code)
	assert.Contains(t, res.Stderr, "--poll 101: must be from 0 to 100")
	res = clitest.Run(t, bin, "", "-m", demoModel, "--prefix-cache=false", "--cache-slots", "2")
	assert.Equal(t, 2, res.Code)
	assert.Contains(t, res.Stderr, "--prefix-cache=false turns off")
	res = clitest.Run(t, bin, "", "-m", filepath.Join(t.TempDir(), "none.gguf"))
	assert.Equal(t, 1, res.Code)
	assert.Contains(t, res.Stderr, "does not exist")
	res = clitest.Run(t, bin, "", "-m", demoModel, "--addr", "256.0.0.1:99999", "--threads", "1")
	assert.Equal(t, 1, res.Code)
	assert.Contains(t, res.Stderr, "--addr 256.0.0.1:99999")
}

// Streamed choices of one request (n = 2) arrive interleaved, each with its
// index, and each equals its request alone with seed, seed+1.
func TestServeStreamedChoices(t *testing.T) {
	s := startServer(t)
	client := s.client()
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about the loop")},
		MaxTokens: openai.Int(15), Seed: openai.Int(11), N: openai.Int(2),
	})
	texts := make([]strings.Builder, 2)
	finishes := make([]string, 2)
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			require.Less(t, c.Index, int64(2))
			texts[c.Index].WriteString(c.Delta.Content)
			if c.FinishReason != "" {
				finishes[c.Index] = c.FinishReason
			}
		}
	}
	require.NoError(t, stream.Err())
	for j := range 2 {
		want := reference(t, generation.Request{Messages: chatMessages("", "Tell me about the loop"), Config: sampling(15), Seed: uint64(11 + j)})
		assert.Equal(t, want.Text, texts[j].String(), "choice %d", j)
		assert.NotEmpty(t, finishes[j])
	}
}

// SIGTERM stops the server after the requests in progress: a reply being
// streamed runs to its end, new connections are refused, and the process
// exits with status 0.
func TestServeGracefulShutdown(t *testing.T) {
	// A reply long enough to be in progress when the signal comes, and a
	// grace period long enough for it even under AddressSanitizer.
	all := []string{"-m", demoModel, "--addr", "127.0.0.1:0", "--threads", "1", "--parallel", "1", "--ctx", "4096",
		"--shutdown-timeout", "5m"}
	cmd := exec.Command(bin, all...)
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
	stream := client.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{
		Model: "demo", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The model")},
		MaxTokens: openai.Int(3000), Temperature: openai.Float(0),
	})
	require.True(t, stream.Next(), "%v", stream.Err())
	text := stream.Current().Choices[0].Text
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text += c.Text
		}
	}
	require.NoError(t, stream.Err())
	want, _ := greedy("The model", 3000)
	assert.Equal(t, want, text)
	require.NoError(t, cmd.Wait())
	_, err = http.Get(url + "/health")
	require.Error(t, err, "the server no longer listens")
}

// The second turn of a chat reuses the first, by default (the cells stay
// in the finished request's sequence) as with sequences of the cache's own:
// the metrics count a hit and the tokens it saved, and the reply is what
// the request gives alone. --prefix-cache=false evaluates every prompt.
func TestServePrefixCache(t *testing.T) {
	for name, args := range map[string][]string{
		"defaults":             {"--parallel", "2"},
		"cache slots":          {"--parallel", "2", "--cache-slots", "2"},
		"prefix cache off":     {"--parallel", "2", "--prefix-cache=false"},
		"llama-server's -cram": {"--parallel", "2", "-cram", "0"},
	} {
		t.Run(name, func(t *testing.T) {
			servePrefixCache(t, !strings.Contains(name, "off") && !strings.Contains(name, "cram"), args...)
		})
	}
}

func servePrefixCache(t *testing.T, on bool, args ...string) {
	s := startServer(t, args...)
	client := s.client()
	ctx := context.Background()
	system := "You are the demo model. The model reads a prompt and returns new logits for every token."
	first, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage("Hello")},
		MaxTokens: openai.Int(12), Temperature: openai.Float(0),
	})
	require.NoError(t, err)
	reply := first.Choices[0].Message.Content
	second, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage("Hello"),
			openai.AssistantMessage(reply), openai.UserMessage("And then?")},
		MaxTokens: openai.Int(12), Temperature: openai.Float(0),
	})
	require.NoError(t, err)
	greedy := genconfig.Default()
	n := 12
	greedy.TopK, greedy.MaxNewTokens = 0, &n
	want := reference(t, generation.Request{Config: greedy, Messages: []backend.Message{
		{Role: "system", Content: system}, {Role: "user", Content: "Hello"}, {Role: "assistant", Content: reply}, {Role: "user", Content: "And then?"}}})
	assert.Equal(t, want.Text, second.Choices[0].Message.Content)
	m := s.metrics(t)
	if !on {
		assert.Zero(t, m["llamaserve_prefix_cache_lookups_total"])
		assert.Zero(t, m["llamaserve_prefix_cache_tokens_saved_total"])
		return
	}
	assert.Equal(t, 2.0, m["llamaserve_prefix_cache_lookups_total"])
	assert.Equal(t, 1.0, m["llamaserve_prefix_cache_hits_total"])
	assert.GreaterOrEqual(t, m["llamaserve_prefix_cache_tokens_saved_total"], float64(first.Usage.PromptTokens))
}

// Structured output through the SDK: a json_schema response format makes the
// demo model, whose own output is prose, answer documents of the schema,
// streamed or not.
func TestServeResponseFormat(t *testing.T) {
	s := startServer(t)
	client := s.client()
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"city":  map[string]any{"type": "string", "maxLength": 12},
			"score": map[string]any{"type": "integer", "minimum": 0, "maximum": 10},
		},
		"required":             []string{"city", "score"},
		"additionalProperties": false,
	}
	params := openai.ChatCompletionNewParams{
		Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Rate a city")},
		MaxTokens: openai.Int(100), Seed: openai.Int(5), N: openai.Int(3),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "rating", Schema: schema, Strict: openai.Bool(true)},
		}},
	}
	res, err := client.Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	require.Len(t, res.Choices, 3)
	for _, c := range res.Choices {
		var doc struct {
			City  *string `json:"city"`
			Score *int    `json:"score"`
		}
		dec := json.NewDecoder(strings.NewReader(c.Message.Content))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&doc), c.Message.Content)
		require.NotNil(t, doc.City, c.Message.Content)
		require.NotNil(t, doc.Score, c.Message.Content)
		assert.LessOrEqual(t, len([]rune(*doc.City)), 12)
		assert.True(t, *doc.Score >= 0 && *doc.Score <= 10, c.Message.Content)
		assert.Equal(t, "stop", string(c.FinishReason))
	}
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	texts := make([]strings.Builder, 3)
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			texts[c.Index].WriteString(c.Delta.Content)
		}
	}
	require.NoError(t, stream.Err())
	for i, c := range res.Choices {
		assert.Equal(t, c.Message.Content, texts[i].String(), "streamed choice %d", i)
	}
}
