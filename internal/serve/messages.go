package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/llamaloop/llamaloop/internal/quote"
)

// Anthropic's Messages API (https://docs.claude.com/en/api/messages, and
// the types of the official SDKs): POST /v1/messages runs as a chat
// request, as the Responses API does; the reply is written by
// messages_reply.go. Its errors have Anthropic's shape.

// messagesRequest is the body of /v1/messages (the SDKs'
// MessageCreateParams): the fields the server implements, then the
// extensions it shares with chat.
type messagesRequest struct {
	Model         string          `json:"model"`
	Messages      json.RawMessage `json:"messages"`
	System        json.RawMessage `json:"system"`
	MaxTokens     *int            `json:"max_tokens"`
	StopSequences []string        `json:"stop_sequences"`
	Stream        bool            `json:"stream"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	Tools         json.RawMessage `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	Thinking      json.RawMessage `json:"thinking"`
	OutputConfig  json.RawMessage `json:"output_config"`

	// Extensions, as on chat: seed, Mirostat, parse_special, grammar,
	// reasoning_format (top_k and the other GenerationConfig fields go to
	// config).
	Seed            *int64   `json:"seed"`
	Mirostat        *int     `json:"mirostat"`
	MirostatTau     *float64 `json:"mirostat_tau"`
	MirostatEta     *float64 `json:"mirostat_eta"`
	ParseSpecial    bool     `json:"parse_special"`
	Grammar         string   `json:"grammar"`
	ReasoningFormat string   `json:"reasoning_format"`

	config map[string]json.RawMessage
	// showThinking is false when thinking is disabled: the reasoning the
	// reader separates is left out of the reply.
	showThinking bool
}

// The fields of the Messages API by what the server does with them.
var (
	messagesFields = []string{"model", "messages", "system", "max_tokens", "stop_sequences", "stream",
		"temperature", "top_p", "tools", "tool_choice", "thinking", "output_config",
		"seed", "mirostat", "mirostat_tau", "mirostat_eta", "parse_special", "grammar", "reasoning_format"}
	// ignoredMessagesFields change nothing here: Anthropic's accounting,
	// routing, prompt caching and diagnostics.
	ignoredMessagesFields = []string{"metadata", "service_tier", "cache_control", "inference_geo", "speed",
		"diagnostics", "user_profile_id", "workspace_id"}
	// checkedMessagesFields are accepted when they ask for nothing the
	// server lacks.
	checkedMessagesFields = map[string]func(raw json.RawMessage) string{
		"container": func(json.RawMessage) string {
			return "container: this server runs no code and keeps no containers"
		},
		"mcp_servers": func(raw json.RawMessage) string {
			var list []json.RawMessage
			if json.Unmarshal(raw, &list) == nil && len(list) == 0 {
				return ""
			}
			return "mcp_servers: this server calls no MCP server; give the tools as tools"
		},
		"context_management": func(json.RawMessage) string {
			return "context_management: this server does not edit the context"
		},
	}
)

// The tables of the Messages endpoints: count_tokens counts a prompt, and
// refuses what only a reply takes.
var (
	messagesTable = &fieldTable{read: messagesFields, ignored: ignoredMessagesFields,
		checked: checkedMessagesFields, config: true}
	countTokensTable = &fieldTable{read: slices.DeleteFunc(slices.Clone(messagesFields), isReplyField),
		ignored: ignoredMessagesFields, checked: checkedMessagesFields, config: true,
		other: []string{"max_tokens", "stream", "stop_sequences"}}
)

func isReplyField(k string) bool { return k == "max_tokens" || k == "stream" || k == "stop_sequences" }

// decodeMessagesRequest reads the body of /v1/messages, or of
// count_tokens: the first field in the body's order that is unknown or
// refused is named.
func decodeMessagesRequest(body []byte, count bool) (*messagesRequest, error) {
	req := &messagesRequest{config: map[string]json.RawMessage{}, showThinking: true}
	table := messagesTable
	if count {
		table = countTokensTable
	}
	if err := table.decode(body, req, req.config); err != nil {
		return nil, err
	}
	if !count && req.MaxTokens == nil {
		return nil, badRequest("max_tokens", "max_tokens: Field required")
	}
	return req, nil
}

// anthropicBlock is a content block of a message in a request: text,
// tool_use (an assistant's call), tool_result (the user's answer to one),
// thinking and redacted_thinking (an assistant's earlier reasoning: its
// reasoning_content, which the templates of thinking models read or leave
// out).
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	// Source is an image block's: base64 data of a media type.
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
}

// anthropicMessage is a message of the request's messages.
type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicTool is a tool of the request: a custom tool (type absent,
// null or "custom"); Anthropic's server tools (web search, code
// execution, ...) run nowhere here.
type anthropicTool struct {
	Type        *string         `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	Strict      *bool           `json:"strict,omitempty"`
}

// messagesChat is the chat request that runs a Messages request, with the
// index in the Messages request of each chat message (-1: the system
// prompt), to name them in errors.
type messagesChat struct {
	chat   *apiRequest
	origin []int
}

// maxAnthropicTemperature is the Messages API's bound of temperature.
const maxAnthropicTemperature = 1

// chatRequest is the chat request that runs req.
func (req *messagesRequest) chatRequest() (*messagesChat, error) {
	out := &apiRequest{
		Model: req.Model, MaxTokens: req.MaxTokens, Temperature: req.Temperature, TopP: req.TopP,
		Stream: req.Stream, Seed: req.Seed, Mirostat: req.Mirostat, MirostatTau: req.MirostatTau,
		MirostatEta: req.MirostatEta, ParseSpecial: req.ParseSpecial, Grammar: req.Grammar,
		ReasoningFormat: req.ReasoningFormat, config: req.config,
	}
	mc := &messagesChat{chat: out}
	if m := req.MaxTokens; m != nil && *m < 1 {
		return nil, badRequest("max_tokens", "max_tokens: %d: must be at least 1", *m)
	}
	if t := req.Temperature; t != nil && (*t < 0 || *t > maxAnthropicTemperature) {
		return nil, badRequest("temperature", "temperature: %g: must be in [0, %d]", *t, maxAnthropicTemperature)
	}
	if len(req.StopSequences) > 0 {
		data, _ := json.Marshal(req.StopSequences)
		out.Stop = data
	}
	if sys := bytes.TrimSpace(req.System); len(sys) > 0 && string(sys) != "null" {
		text, err := blocksText(sys, "system")
		if err != nil {
			return nil, err
		}
		if text != "" {
			out.Messages = append(out.Messages, textMessage("system", text))
			mc.origin = append(mc.origin, -1)
		}
	}
	if err := mc.addMessages(req.Messages); err != nil {
		return nil, err
	}
	if err := req.chatTools(out); err != nil {
		return nil, err
	}
	if err := req.readThinking(out); err != nil {
		return nil, err
	}
	if err := req.outputFormat(out); err != nil {
		return nil, err
	}
	return mc, nil
}

// blocksText reads a text given as a string or as text blocks (system, a
// tool_result's content), joined.
func blocksText(raw json.RawMessage, field string) (string, error) {
	if s, ok := jsonString(raw); ok {
		return s, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", badRequest(field, "%s: must be a string or an array of text blocks", field)
	}
	texts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return "", badRequest(fmt.Sprintf("%s[%d].type", field, i), "%s[%d]: a block of type %s: only text is supported here", field, i, quote.String(b.Type))
		}
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// addMessages adds the Messages API's messages as chat messages: a user
// message's tool_result blocks become tool messages (before its text), an
// assistant's tool_use blocks its calls.
func (mc *messagesChat) addMessages(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return badRequest("messages", "messages: Field required")
	}
	var msgs []anthropicMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return badRequest("messages", "messages: must be an array of messages")
	}
	if len(msgs) == 0 {
		return badRequest("messages", "messages: at least one message is required")
	}
	for i, m := range msgs {
		field := fmt.Sprintf("messages.%d", i)
		switch m.Role {
		case "user", "assistant", "system":
		default:
			return badRequest(field+".role", "%s.role: %s is not user or assistant", field, quote.String(m.Role))
		}
		content := bytes.TrimSpace(m.Content)
		if text, ok := jsonString(content); ok {
			mc.add(i, textMessage(m.Role, text))
			continue
		}
		var blocks []anthropicBlock
		if err := json.Unmarshal(content, &blocks); err != nil {
			return badRequest(field+".content", "%s.content: must be a string or an array of content blocks", field)
		}
		var texts, thinking []string
		images := map[int]string{} // data URLs by their index in texts
		var calls []apiToolCall
		for j, b := range blocks {
			bf := fmt.Sprintf("%s.content.%d", field, j)
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "image":
				url, err := imageBlockURL(b, bf)
				if err != nil {
					return err
				}
				images[len(texts)] = url
				texts = append(texts, "")
			case "thinking", "redacted_thinking":
				if m.Role != "assistant" {
					return badRequest(bf, "%s: a %s block belongs to an assistant message", bf, b.Type)
				}
				thinking = append(thinking, b.Thinking) // redacted: none to read
			case "tool_use":
				if m.Role != "assistant" {
					return badRequest(bf, "%s: a tool_use block belongs to an assistant message", bf)
				}
				if b.ID == "" || b.Name == "" {
					return badRequest(bf, "%s: a tool_use block needs its id and name", bf)
				}
				input := bytes.TrimSpace(b.Input)
				if len(input) == 0 || string(input) == "null" {
					input = []byte("{}")
				}
				var obj map[string]json.RawMessage
				if json.Unmarshal(input, &obj) != nil {
					return badRequest(bf+".input", "%s.input: must be an object", bf)
				}
				call := apiToolCall{ID: b.ID, Type: "function"}
				call.Function.Name, call.Function.Arguments = b.Name, string(input)
				calls = append(calls, call)
			case "tool_result":
				if m.Role != "user" {
					return badRequest(bf, "%s: a tool_result block belongs to a user message", bf)
				}
				if b.ToolUseID == "" {
					return badRequest(bf+".tool_use_id", "%s.tool_use_id: Field required", bf)
				}
				text := ""
				if c := bytes.TrimSpace(b.Content); len(c) > 0 && string(c) != "null" {
					var err error
					if text, err = blocksText(c, bf+".content"); err != nil {
						return err
					}
				}
				tm := textMessage("tool", text)
				tm.ToolCallID = b.ToolUseID
				mc.add(i, tm)
			default:
				return badRequest(bf+".type", "%s.type: %s: this server reads text, image, tool_use, tool_result and thinking blocks only", bf, quote.String(b.Type))
			}
		}
		if m.Role == "system" && len(calls) > 0 {
			return badRequest(field, "%s: a system message holds text only", field)
		}
		if len(texts) > 0 || len(calls) > 0 || !slices.ContainsFunc(blocks, func(b anthropicBlock) bool { return b.Type == "tool_result" }) {
			am := textMessage(m.Role, strings.Join(texts, "\n"))
			if len(images) > 0 {
				am.Content = blockParts(texts, images)
			}
			am.ReasoningContent = strings.Join(thinking, "\n")
			if len(calls) > 0 {
				data, err := json.Marshal(calls)
				if err != nil {
					return err
				}
				am.ToolCalls = data
			}
			mc.add(i, am)
		}
	}
	return nil
}

// imageBlockURL reads an image block's source (base64 data only) as a
// data URL, which the chat's reader reads as OpenAI's image_url.
func imageBlockURL(b anthropicBlock, bf string) (string, error) {
	switch {
	case b.Source == nil:
		return "", badRequest(bf+".source", "%s.source: Field required", bf)
	case b.Source.Type == "url":
		return "", badRequest(bf+".source.type", "%s.source: an image by URL: this server fetches nothing; send the image as base64 data", bf)
	case b.Source.Type != "base64":
		return "", badRequest(bf+".source.type", "%s.source.type: %s: only base64 images are read", bf, quote.String(b.Source.Type))
	}
	return "data:" + b.Source.MediaType + ";base64," + b.Source.Data, nil
}

// blockParts writes a message's text blocks and images as OpenAI content
// parts, the texts joined by newlines as a message without images is.
func blockParts(texts []string, images map[int]string) json.RawMessage {
	type imageURL struct {
		URL string `json:"url"`
	}
	type part struct {
		Type     string    `json:"type"`
		Text     string    `json:"text,omitempty"`
		ImageURL *imageURL `json:"image_url,omitempty"`
	}
	var parts []part
	for i, t := range texts {
		if i > 0 {
			parts = append(parts, part{Type: "text", Text: "\n"})
		}
		if url, ok := images[i]; ok {
			parts = append(parts, part{Type: "image_url", ImageURL: &imageURL{URL: url}})
		} else {
			parts = append(parts, part{Type: "text", Text: t})
		}
	}
	data, _ := json.Marshal(parts)
	return data
}

func (mc *messagesChat) add(origin int, m apiMessage) {
	mc.chat.Messages = append(mc.chat.Messages, m)
	mc.origin = append(mc.origin, origin)
}

// chatTools puts req's custom tools and tool_choice in the chat request
// out: auto, any (a call is required), tool (that tool is called) and
// none; disable_parallel_tool_use is parallel_tool_calls false.
func (req *messagesRequest) chatTools(out *apiRequest) error {
	if raw := bytes.TrimSpace(req.Tools); len(raw) > 0 && string(raw) != "null" {
		var tools []anthropicTool
		if err := json.Unmarshal(raw, &tools); err != nil {
			return badRequest("tools", "tools: must be an array of tools: %v", err)
		}
		for i, t := range tools {
			if t.Type != nil && *t.Type != "custom" {
				return badRequest(fmt.Sprintf("tools.%d.type", i), "tools.%d.type: %s: only custom tools are supported (no tool runs on this server)", i, quote.String(*t.Type))
			}
			schema := bytes.TrimSpace(t.InputSchema)
			if len(schema) == 0 || string(schema) == "null" {
				return badRequest(fmt.Sprintf("tools.%d.input_schema", i), "tools.%d.input_schema: Field required", i)
			}
			fn, err := json.Marshal(apiFunction{Name: t.Name, Description: t.Description, Parameters: schema, Strict: t.Strict})
			if err != nil {
				return badRequest(fmt.Sprintf("tools.%d", i), "tools.%d: %v", i, err)
			}
			out.Tools = append(out.Tools, json.RawMessage(fmt.Sprintf(`{"type":"function","function":%s}`, fn)))
		}
	}
	choice := bytes.TrimSpace(req.ToolChoice)
	if len(choice) == 0 || string(choice) == "null" {
		return nil
	}
	var tc struct {
		Type            string `json:"type"`
		Name            string `json:"name"`
		DisableParallel *bool  `json:"disable_parallel_tool_use"`
	}
	if err := json.Unmarshal(choice, &tc); err != nil {
		return badRequest("tool_choice", `tool_choice: must be {"type": "auto"}, {"type": "any"}, {"type": "tool", "name": ...} or {"type": "none"}`)
	}
	if tc.DisableParallel != nil {
		out.ParallelToolCalls = ptr(!*tc.DisableParallel)
	}
	switch tc.Type {
	case "auto", "none":
		out.ToolChoice, _ = json.Marshal(tc.Type)
	case "any":
		out.ToolChoice = json.RawMessage(`"required"`)
	case "tool":
		name, _ := json.Marshal(tc.Name)
		out.ToolChoice = json.RawMessage(fmt.Sprintf(`{"type":"function","function":{"name":%s}}`, name))
	default:
		return badRequest("tool_choice.type", "tool_choice.type: %s is not auto, any, tool or none", quote.String(tc.Type))
	}
	return nil
}

// readThinking reads thinking as the template's enable_thinking: enabled
// (with its budget_tokens, which bounds nothing here) and adaptive set it,
// disabled clears it and leaves any reasoning out of the reply; without
// thinking the template has its default. The reasoning a reply has comes
// as thinking blocks.
func (req *messagesRequest) readThinking(out *apiRequest) error {
	raw := bytes.TrimSpace(req.Thinking)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var th struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
	}
	if err := json.Unmarshal(raw, &th); err != nil {
		return badRequest("thinking", "thinking: must be an object with a type")
	}
	switch th.Type {
	case "enabled":
		if th.BudgetTokens == nil {
			return badRequest("thinking.budget_tokens", "thinking.budget_tokens: Field required")
		}
		out.thinking = ptr(true)
	case "adaptive", "between_tools":
		out.thinking = ptr(true)
	case "disabled":
		req.showThinking = false
		out.thinking = ptr(false)
	default:
		return badRequest("thinking.type", "thinking.type: %s is not enabled, adaptive or disabled", quote.String(th.Type))
	}
	return nil
}

// outputFormat reads output_config: its format (a JSON schema) is chat's
// response_format json_schema; effort changes nothing here.
func (req *messagesRequest) outputFormat(out *apiRequest) error {
	raw := bytes.TrimSpace(req.OutputConfig)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var oc struct {
		Effort *string `json:"effort"`
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	}
	if err := json.Unmarshal(raw, &oc); err != nil {
		return badRequest("output_config", "output_config: %v", err)
	}
	if f := oc.Format; f != nil {
		if f.Type != "json_schema" {
			return badRequest("output_config.format.type", "output_config.format.type: %s is not json_schema", quote.String(f.Type))
		}
		out.ResponseFormat = &responseFormat{Type: "json_schema", JSONSchema: &jsonSchema{Name: "output", Schema: f.Schema}}
	}
	return nil
}

// chatIndex and toolsIndex match the messages and tools of a chat
// request's field names.
var (
	chatIndex  = regexp.MustCompile(`messages\[(\d+)\]`)
	toolsIndex = regexp.MustCompile(`tools\[(\d+)\]`)
)

// messagesParam renames the chat request's fields in an error to the
// Messages API's: its messages (by origin), stop_sequences, the tools'
// input_schema, output_config.format.
func (mc *messagesChat) messagesParam(err error) error {
	var re *requestError
	if !errors.As(err, &re) {
		return err
	}
	out := *re
	rename := func(s string) string {
		s = chatIndex.ReplaceAllStringFunc(s, func(m string) string {
			i, err := strconv.Atoi(chatIndex.FindStringSubmatch(m)[1])
			if mc == nil || err != nil || i >= len(mc.origin) {
				return m
			}
			if mc.origin[i] < 0 {
				return "system"
			}
			return fmt.Sprintf("messages.%d", mc.origin[i])
		})
		s = toolsIndex.ReplaceAllString(s, "tools.$1")
		for _, r := range [][2]string{{".function.parameters", ".input_schema"}, {".function.name", ".name"},
			{"response_format", "output_config.format"}, {"stop:", "stop_sequences:"}} {
			s = strings.ReplaceAll(s, r[0], r[1])
		}
		return s
	}
	out.param, out.msg = rename(out.param), rename(out.msg)
	if out.param == "stop" {
		out.param = "stop_sequences"
	}
	return &out
}

// anthropicErrorBody is Anthropic's error object.
type anthropicErrorBody struct {
	Type  string `json:"type"` // "error"
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// anthropicErrorType is the type of Anthropic's error of an HTTP status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// anthropicError is e in Anthropic's shape: its message names the field,
// first unless it says it already (Anthropic's errors have no param).
func anthropicError(e *requestError) anthropicErrorBody {
	var body anthropicErrorBody
	body.Type = "error"
	body.Error.Type = anthropicErrorType(e.status)
	msg := quote.Message(e.msg)
	if field, _, _ := strings.Cut(e.param, "."); field != "" && !strings.HasPrefix(msg, field) && !strings.Contains(msg, e.param) {
		msg = e.param + ": " + msg
	}
	body.Error.Message = msg
	body.RequestID = newItemID("req")
	return body
}

// anthropicWriter is the ResponseWriter of a Messages request: writeError
// gives its errors Anthropic's shape.
type anthropicWriter struct {
	http.ResponseWriter
}

func (w anthropicWriter) writeShapedError(e *requestError) {
	writeJSON(w.ResponseWriter, e.status, anthropicError(e))
}

// Flush sends what is buffered: the events of a stream.
func (w anthropicWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the connection's writer.
func (w anthropicWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// isMessagesPath tells the paths whose errors have Anthropic's shape.
func isMessagesPath(p string) bool {
	return p == "/v1/messages" || strings.HasPrefix(p, "/v1/messages/")
}

// messagesNotFound answers the Messages API's endpoints that this server
// lacks (batches).
func (s *Server) messagesNotFound(w http.ResponseWriter, r *http.Request) {
	writeError(anthropicWriter{w}, &requestError{status: http.StatusNotFound,
		msg: fmt.Sprintf("no endpoint %s: this server has POST /v1/messages and /v1/messages/count_tokens", r.URL.Path)})
}
