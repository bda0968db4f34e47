package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/llamaloop/llamaloop/internal/quote"
)

// responsesRequest is the body of /v1/responses, OpenAI's Responses API
// (openai-go's responses.ResponseNewParams, and stream): the fields the
// server implements, then the extensions. It runs as a chat request.
type responsesRequest struct {
	Model           string          `json:"model"`
	Input           json.RawMessage `json:"input"`
	Instructions    *string         `json:"instructions"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Temperature     *float64        `json:"temperature"`
	TopP            *float64        `json:"top_p"`
	TopLogprobs     *int            `json:"top_logprobs"`
	Stream          bool            `json:"stream"`
	Include         []string        `json:"include"`
	Text            json.RawMessage `json:"text"`
	Metadata        json.RawMessage `json:"metadata"`
	User            *string         `json:"user"`
	ToolChoice      json.RawMessage `json:"tool_choice"`
	Tools           json.RawMessage `json:"tools"`
	ParallelCalls   *bool           `json:"parallel_tool_calls"`

	// Extensions, as on chat: seed, Mirostat.
	Seed        *int64   `json:"seed"`
	Mirostat    *int     `json:"mirostat"`
	MirostatTau *float64 `json:"mirostat_tau"`
	MirostatEta *float64 `json:"mirostat_eta"`
	// ParseSpecial reads control-token text in the input as those tokens
	// (see apiRequest.ParseSpecial).
	ParseSpecial bool `json:"parse_special"`
	// ReasoningFormat keeps the model's thinking inline ("none"; see
	// apiRequest.ReasoningFormat) instead of a reasoning item.
	ReasoningFormat string `json:"reasoning_format"`
	// Grammar constrains the output to a GBNF grammar (see
	// apiRequest.Grammar).
	Grammar string `json:"grammar"`

	config map[string]json.RawMessage // the GenerationConfig fields
}

// The fields of the Responses API by what the server does with them.
var (
	responsesFields = []string{"model", "input", "instructions", "max_output_tokens", "temperature", "top_p",
		"top_logprobs", "stream", "include", "text", "tools", "tool_choice", "parallel_tool_calls",
		"seed", "mirostat", "mirostat_tau", "mirostat_eta", "parse_special", "reasoning_format", "grammar"}
	// ignoredResponsesFields change nothing here: OpenAI's accounting,
	// storage (store: nothing is stored, whatever its value), routing,
	// caching, reasoning and access controls, the stream's obfuscation, and
	// max_tool_calls (the server runs no tool: a reply holds the calls the
	// model writes in one turn).
	ignoredResponsesFields = []string{"user", "metadata", "store", "service_tier", "safety_identifier",
		"prompt_cache_key", "prompt_cache_retention", "prompt_cache_options", "reasoning",
		"max_tool_calls", "stream_options", "access_programs"}
	// checkedResponsesFields are accepted when they ask for nothing the
	// server lacks; each check returns the reason of a refusal.
	checkedResponsesFields = map[string]func(raw json.RawMessage) string{
		"previous_response_id": func(raw json.RawMessage) string {
			if s, ok := jsonString(raw); ok && s == "" {
				return ""
			}
			return "previous_response_id: this server stores no responses; send the whole conversation as input"
		},
		"conversation": func(json.RawMessage) string {
			return "conversation: this server stores no conversations; send the whole conversation as input"
		},
		"prompt": func(json.RawMessage) string {
			return "prompt: this server has no stored prompt templates; send instructions and input"
		},
		"background": func(raw json.RawMessage) string {
			if string(raw) == "false" {
				return ""
			}
			return "background: a background response is fetched later, and this server stores no responses"
		},
		"moderation": func(json.RawMessage) string {
			return "moderation is not available on this server: it has no moderation model"
		},
		"image": func(json.RawMessage) string {
			return "image: this server generates text only"
		},
		"context_management": func(raw json.RawMessage) string {
			var list []json.RawMessage
			if json.Unmarshal(raw, &list) == nil && len(list) == 0 {
				return ""
			}
			return "context_management: this server does not compact the context"
		},
		"truncation": func(raw json.RawMessage) string {
			if s, ok := jsonString(raw); ok && s == "disabled" {
				return ""
			}
			return fmt.Sprintf("truncation %s: the input is never truncated here (an input longer than a sequence is 400, as with \"disabled\")", raw)
		},
	}
)

// logprobsInclude asks for the log-probabilities of the output text.
const logprobsInclude = "message.output_text.logprobs"

func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// decodeResponsesRequest reads the body of /v1/responses: the first field
// in the body's order that is unknown or refused is named.
func decodeResponsesRequest(body []byte) (*responsesRequest, error) {
	req := &responsesRequest{config: map[string]json.RawMessage{}}
	if err := responsesTable.decode(body, req, req.config); err != nil {
		return nil, err
	}
	return req, nil
}

// responsesText is the Responses API's text option: its format is
// response_format's, flattened.
type responsesText struct {
	Format *struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	} `json:"format"`
	Verbosity *string `json:"verbosity"` // accepted and ignored
}

// inputItem is an item of the Responses API's input: a message (the only
// kind the server reads).
type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// A function_call item (an earlier output) and the
	// function_call_output that answers it.
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// chatRequest is the chat request that runs req.
func (req *responsesRequest) chatRequest() (*apiRequest, error) {
	out := &apiRequest{
		Model: req.Model, MaxCompletionTokens: req.MaxOutputTokens, Temperature: req.Temperature, TopP: req.TopP,
		Stream: req.Stream, Seed: req.Seed, Mirostat: req.Mirostat, MirostatTau: req.MirostatTau,
		MirostatEta: req.MirostatEta, ParseSpecial: req.ParseSpecial, ReasoningFormat: req.ReasoningFormat, Grammar: req.Grammar, config: req.config,
	}
	if m := req.MaxOutputTokens; m != nil && *m < 1 {
		return nil, badRequest("max_output_tokens", "max_output_tokens %d: must be at least 1", *m)
	}
	if req.Instructions != nil && *req.Instructions != "" {
		out.Messages = append(out.Messages, textMessage("system", *req.Instructions))
	}
	msgs, err := inputMessages(req.Input)
	if err != nil {
		return nil, err
	}
	out.Messages = append(out.Messages, msgs...)
	if len(bytes.TrimSpace(req.Text)) > 0 && string(bytes.TrimSpace(req.Text)) != "null" {
		var t responsesText
		if err := json.Unmarshal(req.Text, &t); err != nil {
			return nil, badRequest("text", "text: %v", err)
		}
		if f := t.Format; f != nil {
			out.ResponseFormat = &responseFormat{Type: f.Type}
			if f.Type == "json_schema" {
				out.ResponseFormat.JSONSchema = &jsonSchema{Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}
			}
		}
	}
	if err := req.chatTools(out); err != nil {
		return nil, err
	}
	top := 0
	if req.TopLogprobs != nil {
		top = *req.TopLogprobs
	}
	if top != 0 || slices.Contains(req.Include, logprobsInclude) {
		out.Logprobs = json.RawMessage("true")
		out.TopLogprobs = &top
	}
	return out, nil
}

func textMessage(role, text string) apiMessage {
	content, _ := json.Marshal(text)
	return apiMessage{Role: role, Content: content}
}

// inputMessages reads input: a text (one user message) or a list of
// message items whose content is a text or a list of text parts.
func inputMessages(raw json.RawMessage) ([]apiMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("input", "input is required")
	}
	if text, ok := jsonString(raw); ok {
		return []apiMessage{textMessage("user", text)}, nil
	}
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("input", "input must be a string or an array of message items")
	}
	if len(items) == 0 {
		return nil, badRequest("input", "input is empty")
	}
	var out []apiMessage
	for i, it := range items {
		switch it.Type {
		case "", "message":
		case "function_call", "function_call_output":
			var err error
			if out, err = appendCallItem(out, i, it); err != nil {
				return nil, err
			}
			continue
		case "custom_tool_call", "custom_tool_call_output":
			return nil, badRequest(fmt.Sprintf("input[%d].type", i), "input[%d]: an item of type %s: only function tools are supported", i, quote.String(it.Type))
		case "reasoning":
			// An earlier output's thinking, which the templates leave out
			// of the prompt.
			continue
		case "item_reference":
			return nil, badRequest(fmt.Sprintf("input[%d].type", i), "input[%d]: an item reference: this server stores no items; send the item itself", i)
		default:
			return nil, badRequest(fmt.Sprintf("input[%d].type", i), "input[%d]: an item of type %s: this server reads message items only", i, quote.String(it.Type))
		}
		switch it.Role {
		case "user", "system", "developer", "assistant":
		default:
			return nil, badRequest(fmt.Sprintf("input[%d].role", i), "input[%d]: role %s is not user, system, developer or assistant", i, quote.String(it.Role))
		}
		content, err := inputContent(it.Content)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("input[%d].content", i), "input[%d]: %v", i, err)
		}
		m := textMessage(it.Role, "")
		m.Content = content
		out = append(out, m)
	}
	return out, nil
}

// inputContent reads an input message's content as a chat message's: its
// text, or, when it has input_image or input_audio parts, OpenAI chat
// content parts (image_url, input_audio and text), which the chat's
// reader reads.
func inputContent(raw json.RawMessage) (json.RawMessage, error) {
	var parts []struct {
		Type       string          `json:"type"`
		Text       string          `json:"text"`
		Refusal    string          `json:"refusal"`
		ImageURL   *string         `json:"image_url"`
		FileID     *string         `json:"file_id"`
		InputAudio json.RawMessage `json:"input_audio"`
	}
	media := false
	if json.Unmarshal(raw, &parts) == nil {
		for _, p := range parts {
			media = media || p.Type == "input_image" || p.Type == "input_audio"
		}
	}
	if !media {
		text, err := inputText(raw)
		if err != nil {
			return nil, err
		}
		return json.Marshal(text)
	}
	out := make([]map[string]any, len(parts))
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			out[j] = map[string]any{"type": "text", "text": p.Text}
		case "refusal":
			out[j] = map[string]any{"type": "text", "text": p.Refusal}
		case "input_image":
			if p.ImageURL == nil {
				if p.FileID != nil {
					return nil, fmt.Errorf("content[%d]: an input_image by file_id: this server stores no files; send the image in a data URL", j)
				}
				return nil, fmt.Errorf("content[%d]: input_image needs image_url, a data URL", j)
			}
			out[j] = map[string]any{"type": "image_url", "image_url": map[string]string{"url": *p.ImageURL}}
		case "input_audio":
			out[j] = map[string]any{"type": "input_audio", "input_audio": p.InputAudio}
		default:
			return nil, fmt.Errorf("content part of type %s: only text, input_image and input_audio are read", quote.String(p.Type))
		}
	}
	return json.Marshal(out)
}

// inputText reads an input message's content: a string, or text parts
// (input_text, and output_text or refusal in an assistant's earlier
// output) whose texts are joined.
func inputText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if s, ok := jsonString(raw); ok {
		return s, nil
	}
	var parts []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content must be a string or an array of input_text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			b.WriteString(p.Text)
		case "refusal":
			b.WriteString(p.Refusal)
		default:
			return "", fmt.Errorf("content part of type %s: only text is supported", quote.String(p.Type))
		}
	}
	return b.String(), nil
}

// responsesParam renames the chat request's fields in an error to the
// Responses API's.
func responsesParam(err error) error {
	var re *requestError
	if !errors.As(err, &re) {
		return err
	}
	out := *re
	for _, r := range [][2]string{{"max_completion_tokens", "max_output_tokens"}, {"max_tokens", "max_output_tokens"},
		{"response_format", "text.format"}, {"messages", "input"}} {
		if strings.HasPrefix(out.param, r[0]) {
			out.param = r[1] + strings.TrimPrefix(out.param, r[0])
		}
		out.msg = strings.ReplaceAll(out.msg, r[0], r[1])
	}
	// input_image's image_url is the URL itself, chat's part holds it in url.
	if strings.HasSuffix(out.param, ".image_url.url") {
		out.msg = strings.ReplaceAll(out.msg, out.param, strings.TrimSuffix(out.param, ".url"))
		out.param = strings.TrimSuffix(out.param, ".url")
	}
	return &out
}

// The objects of the Responses API the server writes.
type (
	responseObject struct {
		ID                 string             `json:"id"`
		Object             string             `json:"object"`
		CreatedAt          int64              `json:"created_at"`
		Status             string             `json:"status"`
		CompletedAt        *int64             `json:"completed_at"`
		Error              *responseError     `json:"error"`
		IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
		Instructions       *string            `json:"instructions"`
		MaxOutputTokens    *int               `json:"max_output_tokens"`
		Model              string             `json:"model"`
		Output             []any              `json:"output"` // outputMessage and functionCallItem
		ParallelToolCalls  bool               `json:"parallel_tool_calls"`
		PreviousResponseID *string            `json:"previous_response_id"`
		Reasoning          map[string]any     `json:"reasoning"`
		Store              bool               `json:"store"`
		Temperature        float64            `json:"temperature"`
		Text               json.RawMessage    `json:"text"`
		ToolChoice         json.RawMessage    `json:"tool_choice"`
		Tools              json.RawMessage    `json:"tools"`
		TopP               float64            `json:"top_p"`
		TopLogprobs        int                `json:"top_logprobs"`
		Truncation         string             `json:"truncation"`
		Usage              *responseUsage     `json:"usage"`
		User               *string            `json:"user"`
		Metadata           json.RawMessage    `json:"metadata"`
	}
	responseError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	incompleteDetails struct {
		Reason string `json:"reason"`
	}
	outputMessage struct {
		Type    string       `json:"type"`
		ID      string       `json:"id"`
		Status  string       `json:"status"`
		Role    string       `json:"role"`
		Content []outputText `json:"content"`
	}
	outputText struct {
		Type        string         `json:"type"`
		Text        string         `json:"text"`
		Annotations []any          `json:"annotations"`
		Logprobs    []tokenLogprob `json:"logprobs"`
	}
	responseUsage struct {
		InputTokens         int            `json:"input_tokens"`
		InputTokensDetails  map[string]int `json:"input_tokens_details"`
		OutputTokens        int            `json:"output_tokens"`
		OutputTokensDetails map[string]int `json:"output_tokens_details"`
		TotalTokens         int            `json:"total_tokens"`
	}
)

// newResponseObject is the response to req, in progress.
func (s *Server) newResponseObject(req *responsesRequest, p *plan) *responseObject {
	cfg := p.reqs[0].Config
	temp := cfg.Temperature
	if !cfg.DoSample {
		temp = 0
	}
	o := &responseObject{
		ID: fmt.Sprintf("resp_%016x%016x", rand.Uint64(), rand.Uint64()), Object: "response",
		CreatedAt: time.Now().Unix(), Status: "in_progress", Instructions: req.Instructions,
		MaxOutputTokens: req.MaxOutputTokens, Model: s.cfg.ModelID, Output: []any{},
		ParallelToolCalls: req.ParallelCalls == nil || *req.ParallelCalls, Reasoning: map[string]any{"effort": nil, "summary": nil},
		Temperature: temp, Text: json.RawMessage(`{"format":{"type":"text"}}`), ToolChoice: json.RawMessage(`"auto"`),
		Tools: json.RawMessage(`[]`), TopP: cfg.TopP, TopLogprobs: p.topLogprobs, Truncation: "disabled", User: req.User,
		Metadata: json.RawMessage(`{}`),
	}
	if t := bytes.TrimSpace(req.Text); len(t) > 0 && string(t) != "null" {
		o.Text = t
	}
	if tc := bytes.TrimSpace(req.ToolChoice); len(tc) > 0 && string(tc) != "null" {
		o.ToolChoice = tc
	}
	if m := bytes.TrimSpace(req.Metadata); len(m) > 0 && string(m) != "null" {
		o.Metadata = m
	}
	if t := bytes.TrimSpace(req.Tools); len(t) > 0 && string(t) != "null" {
		o.Tools = t
	}
	return o
}

// finish completes o with the choice's output.
func (o *responseObject) finish(output []any, c *choice, promptTokens int) {
	now := time.Now().Unix()
	o.CompletedAt = &now
	o.Status = "completed"
	if c.finish == "length" {
		o.Status = "incomplete"
		o.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	o.Output = output
	o.Usage = &responseUsage{InputTokens: promptTokens, InputTokensDetails: map[string]int{"cached_tokens": 0},
		OutputTokens: c.tokens, OutputTokensDetails: map[string]int{"reasoning_tokens": 0},
		TotalTokens: promptTokens + c.tokens}
}

// itemStatus is an output item's status once its choice ended.
func itemStatus(c *choice) string {
	if c.finish == "length" {
		return "incomplete"
	}
	return "completed"
}

// responses serves /v1/responses.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	body := s.readBody(w, r)
	if body == nil {
		return
	}
	h := s.hold(w, 1)
	if h == nil {
		return
	}
	defer h.release()
	req, err := decodeResponsesRequest(body)
	var p *plan
	if err == nil {
		var chat *apiRequest
		if chat, err = req.chatRequest(); err == nil {
			ctx, done := s.planContext(r)
			p, err = s.params.plan(ctx, chat, true)
			done()
			err = responsesParam(err)
		}
	}
	if err != nil {
		var re *requestError
		if !errors.As(err, &re) {
			re = &requestError{status: http.StatusInternalServerError, msg: err.Error()}
		}
		writeError(w, re)
		return
	}
	s.runResponse(w, r, h, req, p)
}
