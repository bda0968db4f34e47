package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/clitest"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
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

// With --api-key, every endpoint but /health and /metrics needs the key as
// a Bearer token: the SDK with it works, without it (or with another) gets
// 401 and OpenAI's error object.
func TestServeAPIKey(t *testing.T) {
	help := clitest.Run(t, bin, "", "--help")
	require.Equal(t, 0, help.Code)
	assert.Contains(t, help.Stdout, "--api-key KEY")
	assert.Contains(t, help.Stdout, "--cors-origin ORIGIN")
	assert.Contains(t, help.Stdout, "LLAMASERVE_API_KEY")

	s := startServer(t, "--api-key", "s3cret")
	ctx := context.Background()
	good := openai.NewClient(option.WithBaseURL(s.url+"/v1/"), option.WithAPIKey("s3cret"), option.WithMaxRetries(0))
	page, err := good.Models.List(ctx)
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
	res, err := good.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
		MaxTokens: openai.Int(3), Temperature: openai.Float(0),
	})
	require.NoError(t, err)
	assert.NotEmpty(t, res.Choices[0].Message.Content)

	for _, key := range []string{"wrong", "s3cret-and-more", "s3cre"} {
		bad := openai.NewClient(option.WithBaseURL(s.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
		_, err = bad.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
		})
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr, key)
		assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
		assert.Equal(t, "invalid_api_key", apiErr.Code)
		assert.Equal(t, "invalid_request_error", apiErr.Type)
		_, err = bad.Responses.New(ctx, responses.ResponseNewParams{Model: "demo",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hello")}})
		require.ErrorAs(t, err, &apiErr, key)
		assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
	}

	// Without a key, over plain HTTP: the body is OpenAI's error object.
	resp, data := rawDo(t, "POST", s.url+"/v1/completions", `{"prompt":"x","max_tokens":1}`)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, `Bearer realm="llamaserve"`, resp.Header.Get("WWW-Authenticate"))
	var body map[string]map[string]any
	require.NoError(t, json.Unmarshal(data, &body), string(data))
	assert.Equal(t, "invalid_request_error", body["error"]["type"])
	assert.Equal(t, "invalid_api_key", body["error"]["code"])
	assert.Contains(t, body["error"]["message"], "API key")
	for _, path := range []string{"/v1/models", "/models", "/tokenize", "/v1/responses", "/nowhere"} {
		resp, _ = rawDo(t, "POST", s.url+path, `{}`, "Authorization", "Basic czNjcmV0")
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
	}
	resp, _ = rawDo(t, "POST", s.url+"/tokenize", `{"content":"x"}`, "Authorization", "bearer s3cret")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the scheme's name is case-insensitive")
	// Health and metrics stay open.
	for _, path := range []string{"/health", "/metrics"} {
		resp, _ = rawDo(t, "GET", s.url+path, "")
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}

	// The key may come from the environment instead.
	t.Setenv("LLAMASERVE_API_KEY", "from-env")
	s2 := startServer(t)
	resp, _ = rawDo(t, "GET", s2.url+"/v1/models", "")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = rawDo(t, "GET", s2.url+"/v1/models", "", "Authorization", "Bearer from-env")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// --cors-origin lets the pages of the origins given call the server: a
// preflight is answered 204 with what they may send, and the replies carry
// Access-Control-Allow-Origin. Without it there are no CORS headers and
// OPTIONS is 405.
func TestServeCORS(t *testing.T) {
	preflight := func(url, origin string) *http.Response {
		resp, _ := rawDo(t, "OPTIONS", url, "", "Origin", origin, "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "authorization,content-type,x-stainless-os")
		return resp
	}
	s := startServer(t, "--cors-origin", "http://app.example", "--cors-origin", "http://b.example, http://c.example:3000")
	for _, origin := range []string{"http://app.example", "http://b.example", "http://c.example:3000"} {
		resp := preflight(s.url+"/v1/chat/completions", origin)
		assert.Equal(t, http.StatusNoContent, resp.StatusCode)
		assert.Equal(t, origin, resp.Header.Get("Access-Control-Allow-Origin"))
		assert.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), "POST")
		allowed := resp.Header.Get("Access-Control-Allow-Headers")
		for _, h := range []string{"Authorization", "Content-Type", "x-stainless-os"} {
			assert.Contains(t, allowed, h)
		}
		assert.Equal(t, "86400", resp.Header.Get("Access-Control-Max-Age"))
		assert.Contains(t, resp.Header.Values("Vary"), "Origin")
	}
	resp := preflight(s.url+"/v1/chat/completions", "http://evil.example")
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), "an origin not given gets no CORS headers")
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Headers"))

	body := `{"prompt":"The model","max_tokens":2,"temperature":0}`
	resp, _ = rawDo(t, "POST", s.url+"/v1/completions", body, "Origin", "http://c.example:3000")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "http://c.example:3000", resp.Header.Get("Access-Control-Allow-Origin"))
	resp, _ = rawDo(t, "POST", s.url+"/v1/completions", body, "Origin", "http://evil.example")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the server answers; the browser keeps it from the page")
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))

	// Any origin, with an API key: the preflight needs no key (browsers
	// send none), and a 401 carries the CORS headers so that the page can
	// read it.
	any := startServer(t, "--cors-origin", "*", "--api-key", "k")
	resp = preflight(any.url+"/v1/responses", "https://anywhere.example")
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
	resp, _ = rawDo(t, "POST", any.url+"/v1/completions", body, "Origin", "https://anywhere.example")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))

	// Without --cors-origin: same-origin only.
	plain := startServer(t)
	resp = preflight(plain.url+"/v1/chat/completions", "http://app.example")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	resp, _ = rawDo(t, "POST", plain.url+"/v1/completions", body, "Origin", "http://app.example")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}

// The Responses API through the SDK: a text or message items in, the reply
// of the same conversation on chat out, whole or streamed with its named
// events, and the fields that cannot apply refused by name.
func TestServeResponses(t *testing.T) {
	s := startServer(t)
	client := s.client()
	ctx := context.Background()
	msgs := []backend.Message{{Role: "system", Content: "You are a model."}, {Role: "user", Content: "What does the model read?"}}
	want := reference(t, generation.Request{Messages: msgs, Config: greedyConfig(12)})
	require.Equal(t, generation.FinishLength, want.Finish)
	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(msgs[0].Content), openai.UserMessage(msgs[1].Content)},
		MaxTokens: openai.Int(12), Temperature: openai.Float(0),
	})
	require.NoError(t, err)
	require.Equal(t, want.Text, chat.Choices[0].Message.Content)

	t.Run("whole", func(t *testing.T) {
		for _, input := range []responses.ResponseNewParamsInputUnion{
			{OfString: openai.String(msgs[1].Content)},
			{OfInputItemList: responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(msgs[1].Content, responses.EasyInputMessageRoleUser)}},
			{OfInputItemList: responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(
				responses.ResponseInputMessageContentListParam{responses.ResponseInputContentParamOfInputText("What does the model "),
					responses.ResponseInputContentParamOfInputText("read?")}, responses.EasyInputMessageRoleUser)}},
		} {
			res, err := client.Responses.New(ctx, responses.ResponseNewParams{
				Model: "demo", Instructions: openai.String(msgs[0].Content), Input: input,
				MaxOutputTokens: openai.Int(12), Temperature: openai.Float(0),
			})
			require.NoError(t, err)
			assert.Equal(t, want.Text, res.OutputText())
			assert.True(t, strings.HasPrefix(res.ID, "resp_"), res.ID)
			assert.Equal(t, "response", string(res.Object))
			assert.Equal(t, "demo", string(res.Model))
			assert.Equal(t, responses.ResponseStatusIncomplete, res.Status)
			assert.Equal(t, "max_output_tokens", res.IncompleteDetails.Reason)
			require.Len(t, res.Output, 1)
			out := res.Output[0]
			assert.Equal(t, "message", out.Type)
			assert.Equal(t, "assistant", string(out.Role))
			require.Len(t, out.Content, 1)
			assert.Equal(t, "output_text", out.Content[0].Type)
			assert.Equal(t, chat.Usage.PromptTokens, res.Usage.InputTokens)
			assert.Equal(t, int64(len(want.Tokens)), res.Usage.OutputTokens)
			assert.Equal(t, res.Usage.InputTokens+res.Usage.OutputTokens, res.Usage.TotalTokens)
			assert.Equal(t, int64(12), res.MaxOutputTokens)
		}
	})

	t.Run("multi-turn", func(t *testing.T) {
		// The history as the API sends it back: the earlier output message
		// item, output_text part and all, between the user's messages.
		turns := []backend.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello"},
			{Role: "assistant", Content: " the model reads"}, {Role: "user", Content: "And then?"}}
		want := reference(t, generation.Request{Messages: turns, Config: greedyConfig(6)})
		res, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo",
			MaxOutputTokens: openai.Int(6), Temperature: openai.Float(0)},
			option.WithJSONSet("input", []any{
				map[string]any{"type": "message", "role": "developer", "content": "Be brief."},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Hello"}}},
				map[string]any{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
					"content": []any{map[string]any{"type": "output_text", "text": " the model reads", "annotations": []any{}}}},
				map[string]any{"role": "user", "content": "And then?"},
			}))
		require.NoError(t, err)
		assert.Equal(t, want.Text, res.OutputText())
	})

	t.Run("streamed", func(t *testing.T) {
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "demo", Instructions: openai.String(msgs[0].Content),
			Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String(msgs[1].Content)},
			MaxOutputTokens: openai.Int(12), Temperature: openai.Float(0),
		})
		var types []string
		var deltas strings.Builder
		var done, final string
		var last responses.Response
		for stream.Next() {
			ev := stream.Current()
			assert.Equal(t, int64(len(types)), ev.SequenceNumber)
			types = append(types, ev.Type)
			switch ev.Type {
			case "response.output_text.delta":
				d := ev.AsResponseOutputTextDelta()
				assert.Equal(t, int64(0), d.OutputIndex)
				assert.NotEmpty(t, d.ItemID)
				deltas.WriteString(d.Delta)
			case "response.output_text.done":
				done = ev.AsResponseOutputTextDone().Text
			case "response.output_item.done":
				final = ev.AsResponseOutputItemDone().Item.Content[0].Text
			case "response.incomplete":
				last = ev.AsResponseIncomplete().Response
			}
		}
		require.NoError(t, stream.Err())
		require.Greater(t, len(types), 8)
		assert.Equal(t, []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}, types[:4])
		assert.Equal(t, []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.incomplete"}, types[len(types)-4:])
		for _, typ := range types[4 : len(types)-4] {
			assert.Equal(t, "response.output_text.delta", typ)
		}
		assert.Equal(t, want.Text, deltas.String())
		assert.Equal(t, want.Text, done)
		assert.Equal(t, want.Text, final)
		assert.Equal(t, want.Text, last.OutputText())
		assert.Equal(t, "max_output_tokens", last.IncompleteDetails.Reason)
		assert.Equal(t, int64(len(want.Tokens)), last.Usage.OutputTokens)
	})

	t.Run("completed", func(t *testing.T) {
		// A JSON schema's document ends the reply before max_output_tokens:
		// the status is completed, streamed with response.completed.
		params := responses.ResponseNewParams{
			Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Rate a city")},
			MaxOutputTokens: openai.Int(100), Temperature: openai.Float(0),
			Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigParamOfJSONSchema("rating",
				map[string]any{"type": "object", "properties": map[string]any{"score": map[string]any{"type": "integer", "minimum": 0, "maximum": 9}},
					"required": []string{"score"}, "additionalProperties": false})},
			Store:    openai.Bool(true),
			Metadata: map[string]string{"who": "test"},
		}
		res, err := client.Responses.New(ctx, params)
		require.NoError(t, err)
		assert.Equal(t, responses.ResponseStatusCompleted, res.Status)
		var doc struct{ Score *int }
		require.NoError(t, json.Unmarshal([]byte(res.OutputText()), &doc), res.OutputText())
		require.NotNil(t, doc.Score)
		assert.Equal(t, "test", res.Metadata["who"])
		stream := client.Responses.NewStreaming(ctx, params)
		var lastType, text string
		for stream.Next() {
			lastType = stream.Current().Type
			if lastType == "response.completed" {
				text = stream.Current().AsResponseCompleted().Response.OutputText()
			}
		}
		require.NoError(t, stream.Err())
		assert.Equal(t, "response.completed", lastType)
		assert.Equal(t, res.OutputText(), text)
	})

	t.Run("logprobs", func(t *testing.T) {
		res, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(msgs[1].Content)},
			Instructions: openai.String(msgs[0].Content), MaxOutputTokens: openai.Int(12), Temperature: openai.Float(0),
			Include: []responses.ResponseIncludable{responses.ResponseIncludableMessageOutputTextLogprobs}, TopLogprobs: openai.Int(2),
		})
		require.NoError(t, err)
		lps := res.Output[0].Content[0].Logprobs
		require.Len(t, lps, len(want.Tokens))
		var joined strings.Builder
		for _, lp := range lps {
			joined.WriteString(lp.Token)
			assert.Len(t, lp.TopLogprobs, 2)
		}
		assert.Equal(t, want.Text, joined.String())
	})

	t.Run("refused", func(t *testing.T) {
		base := responses.ResponseNewParams{Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}}
		for _, tc := range []struct {
			param string
			opt   option.RequestOption
		}{
			{"previous_response_id", option.WithJSONSet("previous_response_id", "resp_123")},
			{"conversation", option.WithJSONSet("conversation", "conv_123")},
			{"background", option.WithJSONSet("background", true)},
			{"tools[0].type", option.WithJSONSet("tools", []any{map[string]any{"type": "web_search"}})},
			{"truncation", option.WithJSONSet("truncation", "auto")},
			{"max_output_tokens", option.WithJSONSet("max_output_tokens", 0)},
			{"input[0].type", option.WithJSONSet("input", []any{map[string]any{"type": "custom_tool_call_output", "call_id": "c", "output": "x"}})},
			{"input[0].content[0].image_url", option.WithJSONSet("input", []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_image", "image_url": "http://x"}}}})},
			{"frobnicate", option.WithJSONSet("frobnicate", 1)},
		} {
			_, err := client.Responses.New(ctx, base, tc.opt)
			var apiErr *openai.Error
			require.ErrorAs(t, err, &apiErr, tc.param)
			assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode, tc.param)
			assert.Equal(t, tc.param, apiErr.Param)
		}
		// Accepted and ignored.
		_, err := client.Responses.New(ctx, base, option.WithJSONSet("store", false), option.WithJSONSet("user", "u"),
			option.WithJSONSet("service_tier", "auto"), option.WithJSONSet("reasoning", map[string]any{"effort": "low"}),
			option.WithJSONSet("parallel_tool_calls", true), option.WithJSONSet("tools", []any{}),
			option.WithJSONSet("tool_choice", "auto"), option.WithJSONSet("truncation", "disabled"),
			option.WithJSONSet("max_output_tokens", 2))
		require.NoError(t, err)
	})
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
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hello")}, MaxOutputTokens: openai.Int(5),
		Temperature: openai.Float(0)})
	require.NoError(t, err)
	assert.Equal(t, wantChat.Text, r.OutputText())
	// The metrics count the paths as they were asked for.
	// The Responses API runs on the chat path: its reply names the chat
	// template that made the prompt, as chat's does.
	resp, _ := rawDo(t, "POST", s.url+"/responses", `{"input":"Hello","max_output_tokens":1}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "jinja", resp.Header.Get("X-Chat-Template"))
	resp, data := rawDo(t, "GET", s.url+"/metrics", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(data), `path="/chat/completions"`)
}
