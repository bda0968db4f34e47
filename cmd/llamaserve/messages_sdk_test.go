package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// anthropicClientDir holds the npm package of the official SDK's test.
const anthropicClientDir = "testdata/clients/anthropic"

// anthropicError is Anthropic's error object.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// sdkMessage is Message as the SDK gives it to the script.
type sdkMessage struct {
	ID         string  `json:"id"`
	Type       string  `json:"type"`
	Role       string  `json:"role"`
	Model      string  `json:"model"`
	StopReason string  `json:"stop_reason"`
	StopSeq    *string `json:"stop_sequence"`
	Content    []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Thinking string          `json:"thinking"`
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Input    json.RawMessage `json:"input"`
	} `json:"content"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// sdkFailure is what the script saw of a call that failed.
type sdkFailure struct {
	Class  string         `json:"class"`
	Status int            `json:"status"`
	Body   anthropicError `json:"body"`
	Msg    string         `json:"message"`
}

// The official TypeScript SDK (@anthropic-ai/sdk, the version in
// testdata/clients/anthropic/package.json) against llamaserve's
// /v1/messages on the demo model: create (and count_tokens), stream (MessageStream and the raw
// events, equal to the whole reply at temperature 0), a tool round trip
// (a forced tool_use, then its tool_result), a forced call streamed, 400s
// and 401 in Anthropic's shape, the key as x-api-key and as a Bearer
// token, and thinking blocks from Qwen 3's template. Needs node and `npm ci --prefix cmd/llamaserve/testdata/clients/anthropic`.
func TestAnthropicSDK(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the Anthropic SDK test needs node and `npm ci --prefix cmd/llamaserve/" + anthropicClientDir + "`")
	}
	if _, err := os.Stat(anthropicClientDir + "/node_modules/@anthropic-ai/sdk/package.json"); err != nil {
		t.Skip("@anthropic-ai/sdk is not installed: run `npm ci --prefix cmd/llamaserve/" + anthropicClientDir + "`")
	}
	const key = "test-key"
	// One sequence of 1024 tokens: a prompt with tools is long in the
	// demo model's tokens.
	srv := startServer(t, "--api-key", key, "--parallel", "1", "--ctx", "1024")
	// A model that thinks: Qwen 3's template, and a grammar that makes the
	// demo model write its thinking and answer.
	thinker := startServer(t, "--api-key", key, "--parallel", "1", "--chat-template", vendoredTemplate(t, "Qwen-Qwen3-0.6B.jinja"))
	const thought, answer = "The user asks about the weather.", "It is sunny."
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "node", "run.mjs")
	cmd.Dir = anthropicClientDir
	cmd.Env = append(os.Environ(), "LLAMASERVE_URL="+srv.url, "LLAMASERVE_KEY="+key,
		"LLAMASERVE_THINKING_URL="+thinker.url, "LLAMASERVE_THINKING_GRAMMAR="+gbnfLiteral("<think>\n"+thought+"\n</think>\n\n"+answer))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())

	var res map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	var version string
	require.NoError(t, json.Unmarshal(res["sdk"], &version))
	t.Logf("@anthropic-ai/sdk %s, node %s", version, res["node"])

	// caseData decodes the data of case name into v, or fails the case.
	caseData := func(t *testing.T, name string, v any) {
		t.Helper()
		var c struct {
			OK    bool            `json:"ok"`
			Data  json.RawMessage `json:"data"`
			Error json.RawMessage `json:"error"`
		}
		require.NoError(t, json.Unmarshal(res[name], &c))
		require.True(t, c.OK, "%s failed: %s", name, c.Error)
		require.NoError(t, json.Unmarshal(c.Data, v), string(c.Data))
	}
	textMessage := func(t *testing.T, m sdkMessage, maxTokens int) string {
		t.Helper()
		assert.Equal(t, "message", m.Type)
		assert.Equal(t, "assistant", m.Role)
		assert.Equal(t, "demo", m.Model)
		assert.Regexp(t, `^msg_[0-9a-f]{32}$`, m.ID)
		require.Len(t, m.Content, 1)
		assert.Equal(t, "text", m.Content[0].Type)
		assert.NotEmpty(t, m.Content[0].Text)
		assert.Greater(t, m.Usage.InputTokens, 0)
		if m.StopReason == "max_tokens" {
			assert.Equal(t, maxTokens, m.Usage.OutputTokens)
		} else {
			assert.Equal(t, "end_turn", m.StopReason)
			assert.Less(t, m.Usage.OutputTokens, maxTokens)
		}
		return m.Content[0].Text
	}

	t.Run("create", func(t *testing.T) {
		var d struct {
			Msg   sdkMessage `json:"msg"`
			Count struct {
				InputTokens int `json:"input_tokens"`
			} `json:"count"`
		}
		caseData(t, "create", &d)
		textMessage(t, d.Msg, 12)
		assert.Nil(t, d.Msg.StopSeq)
		// count_tokens counts the prompt that create ran.
		assert.Equal(t, d.Msg.Usage.InputTokens, d.Count.InputTokens)
	})

	t.Run("stream", func(t *testing.T) {
		var d struct {
			Text   string     `json:"text"`
			Final  sdkMessage `json:"final"`
			Events []string   `json:"events"`
			Whole  sdkMessage `json:"whole"`
		}
		caseData(t, "stream", &d)
		text := textMessage(t, d.Whole, 12)
		assert.Equal(t, text, d.Text, "the text events make the whole reply's text")
		assert.Equal(t, text, textMessage(t, d.Final, 12), "the message the SDK gathers is the whole reply")
		assert.Equal(t, d.Whole.Usage, d.Final.Usage)
		assert.Equal(t, d.Whole.StopReason, d.Final.StopReason)
		// The raw events in Anthropic's order (the SDK drops ping).
		require.GreaterOrEqual(t, len(d.Events), 5)
		n := len(d.Events)
		assert.Equal(t, []string{"message_start", "content_block_start:0"}, d.Events[:2])
		assert.Equal(t, []string{"content_block_stop:0", "message_delta", "message_stop"}, d.Events[n-3:])
		for _, ev := range d.Events[2 : n-3] {
			assert.Equal(t, "content_block_delta:0", ev)
		}
	})

	t.Run("tools round trip", func(t *testing.T) {
		var d struct {
			First, Second sdkMessage
		}
		caseData(t, "tools", &d)
		assert.Equal(t, "tool_use", d.First.StopReason)
		require.Len(t, d.First.Content, 1)
		use := d.First.Content[0]
		assert.Equal(t, "tool_use", use.Type)
		assert.Equal(t, "get_weather", use.Name)
		assert.Regexp(t, `^toolu_[A-Za-z0-9]+$`, use.ID)
		var input struct {
			City string `json:"city"`
		}
		require.NoError(t, json.Unmarshal(use.Input, &input))
		assert.Contains(t, []string{"Paris", "Rome"}, input.City, "tool_choice tool constrains the input to the schema")
		// The tool_result goes back as a tool message; tool_choice none
		// calls nothing.
		textMessage(t, d.Second, 8)
	})

	t.Run("forced tool streamed", func(t *testing.T) {
		var d struct {
			Final sdkMessage `json:"final"`
			JSON  string     `json:"json"`
		}
		caseData(t, "forced", &d)
		assert.Equal(t, "tool_use", d.Final.StopReason)
		require.Len(t, d.Final.Content, 1)
		use := d.Final.Content[0]
		assert.Equal(t, "get_time", use.Name)
		var input, streamed map[string]any
		require.NoError(t, json.Unmarshal(use.Input, &input))
		require.NoError(t, json.Unmarshal([]byte(d.JSON), &streamed), "the input_json_delta events make the input")
		assert.Equal(t, input, streamed)
		assert.IsType(t, true, input["utc"])
	})

	t.Run("errors", func(t *testing.T) {
		var d map[string]sdkFailure
		caseData(t, "errors", &d)
		for name, want := range map[string]string{
			"missing_max_tokens": "max_tokens: Field required",
			"unknown_field":      `unknown field "frobnicate"`,
			"image":              `messages.0.content.0.source: an image by URL: this server fetches nothing`,
			"server_tool":        `tools.0.type: "web_search_20250305": only custom tools`,
		} {
			f := d[name]
			assert.Equal(t, "BadRequestError", f.Class, name)
			assert.Equal(t, 400, f.Status, name)
			assert.Equal(t, "error", f.Body.Type, name)
			assert.Equal(t, "invalid_request_error", f.Body.Error.Type, name)
			assert.Contains(t, f.Body.Error.Message, want, name)
			assert.Regexp(t, `^req_[0-9a-f]{32}$`, f.Body.RequestID, name)
		}
	})

	t.Run("thinking", func(t *testing.T) {
		var d struct {
			Final, Whole   sdkMessage
			Thinking, Text string
		}
		caseData(t, "thinking", &d)
		for _, m := range []sdkMessage{d.Final, d.Whole} {
			assert.Equal(t, "end_turn", m.StopReason)
			require.Len(t, m.Content, 2)
			assert.Equal(t, "thinking", m.Content[0].Type)
			assert.Equal(t, thought, strings.TrimSpace(m.Content[0].Thinking))
			assert.Equal(t, "text", m.Content[1].Type)
			assert.Equal(t, answer, strings.TrimSpace(m.Content[1].Text))
		}
		assert.Equal(t, d.Whole.Content[0].Thinking, d.Thinking, "the thinking events make the thinking block")
		assert.Equal(t, d.Whole.Content[1].Text, d.Text)
	})

	t.Run("auth", func(t *testing.T) {
		var d struct {
			Wrong  sdkFailure `json:"wrong"`
			Bearer sdkMessage `json:"bearer"`
		}
		caseData(t, "auth", &d)
		assert.Equal(t, "AuthenticationError", d.Wrong.Class)
		assert.Equal(t, 401, d.Wrong.Status)
		assert.Equal(t, "authentication_error", d.Wrong.Body.Error.Type)
		assert.Contains(t, d.Wrong.Body.Error.Message, "Incorrect API key")
		assert.Equal(t, "message", d.Bearer.Type)
	})
}
