package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testmodel"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// greedyConfig is a greedy config of n new tokens.
func greedyConfig(n int) *genconfig.Config {
	c := genconfig.Default()
	c.TopK, c.MaxNewTokens = 0, &n
	return c
}

// rawPost posts body to url with the headers given as name, value pairs.
func rawDo(t *testing.T, method, url, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, data
}

// /tokenize and /detokenize as llama.cpp's server has them.
func TestServeTokenize(t *testing.T) {
	s := startServer(t)
	text := "The model reads a prompt"
	tokenize := func(body string) []json.RawMessage {
		resp, data := rawDo(t, "POST", s.url+"/tokenize", body)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
		var out struct{ Tokens []json.RawMessage }
		require.NoError(t, json.Unmarshal(data, &out))
		return out.Tokens
	}
	ids := func(raw []json.RawMessage) []int32 {
		out := make([]int32, len(raw))
		for i, r := range raw {
			require.NoError(t, json.Unmarshal(r, &out[i]))
		}
		return out
	}
	plain := ids(tokenize(`{"content":"` + text + `"}`))
	assert.Equal(t, demo.Spec.Vocab.Tokenize(text, false), plain)
	special := ids(tokenize(`{"content":"` + text + `","add_special":true}`))
	assert.Equal(t, append([]int32{testmodel.BOS}, plain...), special)
	mixed := ids(tokenize(`{"content":["` + text + `", 7, " again"]}`))
	assert.Equal(t, append(append(plain, 7), demo.Spec.Vocab.Tokenize(" again", false)...), mixed)

	pieces := tokenize(`{"content":"` + text + `","with_pieces":true}`)
	require.Len(t, pieces, len(plain))
	var joined strings.Builder
	for i, raw := range pieces {
		var p struct {
			ID    int32
			Piece string
		}
		require.NoError(t, json.Unmarshal(raw, &p), string(raw))
		assert.Equal(t, plain[i], p.ID)
		assert.Equal(t, demo.Spec.Vocab.Piece(p.ID), p.Piece)
		joined.WriteString(p.Piece)
	}

	list, _ := json.Marshal(map[string]any{"tokens": plain})
	resp, data := rawDo(t, "POST", s.url+"/detokenize", string(list))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	var out struct{ Content string }
	require.NoError(t, json.Unmarshal(data, &out))
	assert.Equal(t, joined.String(), out.Content)
	assert.Equal(t, text, strings.TrimPrefix(out.Content, " "), "the round trip gives the text back")

	for _, tc := range []struct{ path, body, param string }{
		{"/detokenize", `{"tokens":[1,2,999999]}`, "tokens"},
		{"/detokenize", `{"tokens":[-1]}`, "tokens"},
		{"/detokenize", `{"tokens":"abc"}`, "tokens"},
		{"/tokenize", `{"content":[1,99999999]}`, "content"},
		{"/tokenize", `{"content":"x","extra":1}`, "extra"},
	} {
		resp, data := rawDo(t, "POST", s.url+tc.path, tc.body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, tc.body)
		var e struct{ Error struct{ Param string } }
		require.NoError(t, json.Unmarshal(data, &e))
		assert.Equal(t, tc.param, e.Error.Param, tc.body)
	}
	resp, _ = rawDo(t, "GET", s.url+"/tokenize", "")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// The endpoints answer without /v1 as well, as llama.cpp's server does:
// the SDK with a base URL that lacks it works.
func TestServeWithoutV1(t *testing.T) {
	s := startServer(t)
	client := openai.NewClient(option.WithBaseURL(s.url+"/"), option.WithAPIKey("none"), option.WithMaxRetries(0))
	ctx := context.Background()
	page, err := client.Models.List(ctx)
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
	m, err := client.Models.Get(ctx, "demo")
	require.NoError(t, err)
	assert.Equal(t, "demo", m.ID)
	res, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model: "demo", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The model")},
		MaxTokens: openai.Int(6), Temperature: openai.Float(0),
	})
	require.NoError(t, err)
	want, _ := greedy("The model", 6)
	assert.Equal(t, want, res.Choices[0].Text)
	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
		MaxTokens: openai.Int(5), Temperature: openai.Float(0),
	})
	require.NoError(t, err)
	wantChat := reference(t, generation.Request{Messages: chatMessages("", "Hello"), Config: greedyConfig(5)})
	assert.Equal(t, wantChat.Text, chat.Choices[0].Message.Content)
	// The metrics count the paths as they were asked for.
	resp, data := rawDo(t, "GET", s.url+"/metrics", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(data), `path="/chat/completions"`)
}
