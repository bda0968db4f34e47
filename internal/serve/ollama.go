package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/llamaloop/llamaloop/internal/quote"
)

// Ollama's API (https://github.com/ollama/ollama/blob/main/docs/api.md): the
// request bodies of /api/chat and /api/generate, read as the types of
// github.com/ollama/ollama/api write them, and mapped onto a chat request
// (or, for a raw generate, a completion) as the Responses API is.

// ollamaChatRequest is the body of /api/chat.
type ollamaChatRequest struct {
	Model       string            `json:"model"`
	Messages    []ollamaMessage   `json:"messages"`
	Stream      *bool             `json:"stream"`
	Format      json.RawMessage   `json:"format"`
	KeepAlive   json.RawMessage   `json:"keep_alive"`
	Tools       []json.RawMessage `json:"tools"`
	Options     json.RawMessage   `json:"options"`
	Think       json.RawMessage   `json:"think"`
	Logprobs    bool              `json:"logprobs"`
	TopLogprobs *int              `json:"top_logprobs"`
}

// ollamaGenerateRequest is the body of /api/generate.
type ollamaGenerateRequest struct {
	Model       string            `json:"model"`
	Prompt      string            `json:"prompt"`
	System      string            `json:"system"`
	Stream      *bool             `json:"stream"`
	Raw         bool              `json:"raw"`
	Images      []json.RawMessage `json:"images"`
	Format      json.RawMessage   `json:"format"`
	KeepAlive   json.RawMessage   `json:"keep_alive"`
	Options     json.RawMessage   `json:"options"`
	Think       json.RawMessage   `json:"think"`
	Logprobs    bool              `json:"logprobs"`
	TopLogprobs *int              `json:"top_logprobs"`
}

// ollamaMessage is a message of /api/chat: Arguments of a tool call are a
// JSON object, not its text as in OpenAI's API.
type ollamaMessage struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	Thinking   string            `json:"thinking,omitempty"`
	Images     []json.RawMessage `json:"images,omitempty"`
	ToolCalls  []ollamaToolCall  `json:"tool_calls,omitempty"`
	ToolName   string            `json:"tool_name,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

type ollamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// The fields of /api/chat and /api/generate by what the server does with
// them. keep_alive is read (an empty request with keep_alive 0 answers
// "unload") but changes nothing: the model stays loaded as long as
// llamaserve runs. truncate and shift change nothing either: a prompt is
// never truncated (one longer than a sequence is a 400) and a reply that
// fills its sequence ends with done_reason "length".
var (
	ollamaCommonFields = []string{"model", "stream", "format", "keep_alive", "options", "think", "logprobs",
		"top_logprobs", "truncate", "shift"}
	ollamaChatFields     = []string{"messages", "tools"}
	ollamaGenerateFields = []string{"prompt", "system", "raw", "images"}
	// ollamaRefused are accepted when empty (the zero value or null),
	// refused otherwise; all but _debug_render_only are generate's.
	ollamaRefused = map[string]string{
		"template":           "template: this server renders prompts with the model's own chat template; send raw true with a prompt you rendered",
		"suffix":             "suffix: fill-in-the-middle is not supported",
		"context":            "context: this server keeps no token context between requests; send the conversation to /api/chat",
		"_debug_render_only": "_debug_render_only is not supported",
		"width":              "width: this server generates no images",
		"height":             "height: this server generates no images",
		"steps":              "steps: this server generates no images",
	}
)

// ollamaEmpty reports whether raw is absent, null or a zero value ("", 0,
// false, [], {}).
func ollamaEmpty(raw json.RawMessage) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", `""`, "0", "false", "[]", "{}":
		return true
	}
	return false
}

// The tables of /api/chat and /api/generate: a refused field is accepted
// when empty (ollamaEmpty); /api/chat takes none of generate's but
// _debug_render_only, and names them as unknown.
var (
	ollamaChatTable     = &fieldTable{read: slices.Concat(ollamaCommonFields, ollamaChatFields), checked: ollamaChecks("_debug_render_only")}
	ollamaGenerateTable = &fieldTable{read: slices.Concat(ollamaCommonFields, ollamaGenerateFields), checked: ollamaChecks(slices.Collect(maps.Keys(ollamaRefused))...)}
)

// ollamaChecks are the checks of the refused fields named.
func ollamaChecks(names ...string) map[string]func(json.RawMessage) string {
	checks := map[string]func(json.RawMessage) string{}
	for _, name := range names {
		checks[name] = func(raw json.RawMessage) string {
			if ollamaEmpty(raw) {
				return ""
			}
			return ollamaRefused[name]
		}
	}
	return checks
}

// decodeOllama reads body as the request of /api/chat (chat) or
// /api/generate into v: the first field in the body's order that is
// unknown, or refused with a value, is named.
func decodeOllama(body []byte, chat bool, v any) error {
	if chat {
		return ollamaChatTable.decode(body, v, nil)
	}
	return ollamaGenerateTable.decode(body, v, nil)
}

// ollamaOptions are the options Ollama's API takes (api.Options, and
// Mirostat, which older Ollama servers read): each maps onto the chat
// request or the generation config.
var ollamaOptions = map[string]func(req *apiRequest, v json.RawMessage) error{
	"temperature": func(req *apiRequest, v json.RawMessage) error { return json.Unmarshal(v, &req.Temperature) },
	"top_p":       func(req *apiRequest, v json.RawMessage) error { return json.Unmarshal(v, &req.TopP) },
	"seed": func(req *apiRequest, v json.RawMessage) error {
		var n int64
		if err := json.Unmarshal(v, &n); err != nil {
			return err
		}
		if n >= 0 { // -1, Ollama's default: a seed of its own
			req.Seed = &n
		}
		return nil
	},
	"presence_penalty":  func(req *apiRequest, v json.RawMessage) error { return json.Unmarshal(v, &req.PresencePenalty) },
	"frequency_penalty": func(req *apiRequest, v json.RawMessage) error { return json.Unmarshal(v, &req.FrequencyPenalty) },
	"mirostat":          func(req *apiRequest, v json.RawMessage) error { return json.Unmarshal(v, &req.Mirostat) },
	"mirostat_tau":      func(req *apiRequest, v json.RawMessage) error { return json.Unmarshal(v, &req.MirostatTau) },
	"mirostat_eta":      func(req *apiRequest, v json.RawMessage) error { return json.Unmarshal(v, &req.MirostatEta) },
	"stop":              func(req *apiRequest, v json.RawMessage) error { req.Stop = v; return nil },
	"num_predict": func(req *apiRequest, v json.RawMessage) error {
		var n int
		if err := json.Unmarshal(v, &n); err != nil {
			return err
		}
		if n > 0 { // -1 (and -2, 0): until the end of the sequence
			req.MaxTokens = &n
		}
		return nil
	},
	"top_k":          configOption("top_k"),
	"min_p":          configOption("min_p"),
	"typical_p":      configOption("typical_p"),
	"repeat_penalty": configOption("repetition_penalty"),
}

// ollamaIgnoredOptions change nothing here: the runner's settings
// (llamaserve's flags set the context, batch, threads and devices: num_ctx
// is --ctx), and repeat_last_n (repeat_penalty covers the prompt and the
// reply, as transformers' repetition_penalty; presence_penalty and
// frequency_penalty count the reply's tokens, as OpenAI's).
var ollamaIgnoredOptions = []string{"num_ctx", "num_batch", "num_gpu", "main_gpu", "use_mmap", "use_mlock",
	"num_thread", "num_keep", "repeat_last_n", "numa", "low_vram", "vocab_only", "f16_kv", "penalize_newline"}

func configOption(name string) func(req *apiRequest, v json.RawMessage) error {
	return func(req *apiRequest, v json.RawMessage) error {
		req.config[name] = v
		return nil
	}
}

// applyOllamaOptions maps options onto req; an unknown option, or one of
// the wrong type, is named.
func applyOllamaOptions(req *apiRequest, raw json.RawMessage) error {
	if ollamaEmpty(raw) {
		return nil
	}
	var opts map[string]json.RawMessage
	if err := json.Unmarshal(raw, &opts); err != nil {
		return badRequest("options", "options must be an object")
	}
	keys, err := objectKeys(raw)
	if err != nil {
		return badRequest("options", "options must be an object")
	}
	for _, k := range keys {
		v := opts[k]
		if string(bytes.TrimSpace(v)) == "null" || slices.Contains(ollamaIgnoredOptions, k) {
			continue
		}
		set, ok := ollamaOptions[k]
		if !ok {
			return badRequest("options."+k, "unknown option %s", quote.String(k))
		}
		if err := set(req, v); err != nil {
			return badRequest("options."+k, "option %s: %s is not of its type", quote.String(k), quote.Value(string(v)))
		}
	}
	return nil
}

// applyOllamaFormat maps format ("json" or a JSON schema) onto
// response_format.
func applyOllamaFormat(req *apiRequest, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if ollamaEmpty(raw) {
		return nil
	}
	if s, ok := jsonString(raw); ok {
		if s != "json" {
			return badRequest("format", "format %s: want \"json\" or a JSON schema", quote.String(s))
		}
		req.ResponseFormat = &responseFormat{Type: "json_object"}
		return nil
	}
	if raw[0] != '{' {
		return badRequest("format", "format must be \"json\" or a JSON schema (an object)")
	}
	req.ResponseFormat = &responseFormat{Type: "json_schema", JSONSchema: &jsonSchema{Name: "format", Schema: raw}}
	return nil
}

// ollamaThink reads think: true or false (the levels "high", "medium" and
// "low" are gpt-oss's, which this server does not run). It reports whether
// the reply's reasoning is asked for apart.
func ollamaThink(raw json.RawMessage) (*bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return &b, nil
	}
	if s, ok := jsonString(raw); ok {
		return nil, badRequest("think", "think value %s is not supported for this model (only true or false)", quote.String(s))
	}
	return nil, badRequest("think", "think must be a boolean")
}

// ollamaBase is the chat request of the fields /api/chat and
// /api/generate share.
func ollamaBase(stream *bool, format, options json.RawMessage, logprobs bool, top *int) (*apiRequest, error) {
	out := &apiRequest{Stream: stream == nil || *stream, config: map[string]json.RawMessage{}}
	if err := applyOllamaOptions(out, options); err != nil {
		return nil, err
	}
	if err := applyOllamaFormat(out, format); err != nil {
		return nil, err
	}
	if logprobs {
		out.Logprobs = json.RawMessage("true")
		out.TopLogprobs = top
	} else if top != nil && *top != 0 {
		return nil, badRequest("top_logprobs", "top_logprobs needs logprobs true")
	}
	return out, nil
}

// chatRequest is the chat request that runs req.
func (req *ollamaChatRequest) chatRequest() (*apiRequest, error) {
	out, err := ollamaBase(req.Stream, req.Format, req.Options, req.Logprobs, req.TopLogprobs)
	if err != nil {
		return nil, err
	}
	out.Model, out.Tools = req.Model, req.Tools
	msgs, err := ollamaMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	out.Messages = msgs
	return out, nil
}

// ollamaMessages maps Ollama's messages onto OpenAI's: a call's arguments
// become their text, a call without an id gets one, and a tool message
// without tool_call_id answers the earlier call of its tool_name, or else
// the next call not yet answered.
func ollamaMessages(in []ollamaMessage) ([]apiMessage, error) {
	out := make([]apiMessage, 0, len(in))
	var open []apiToolCall // the last assistant's calls not yet answered
	for i, m := range in {
		role := strings.ToLower(m.Role) // as Ollama's api.Message reads it
		msg := textMessage(role, m.Content)
		if len(m.Images) > 0 {
			c, err := ollamaImageContent(m.Content, m.Images)
			if err != nil {
				return nil, badRequest(fmt.Sprintf("messages[%d].images", i), "messages[%d]: %v", i, err)
			}
			msg.Content = c
		}
		msg.ReasoningContent = m.Thinking // an earlier reply's, for templates that show it
		switch role {
		case "assistant":
			open = open[:0]
			for j, c := range m.ToolCalls {
				args := bytes.TrimSpace(c.Function.Arguments)
				if ollamaEmpty(args) {
					args = json.RawMessage("{}")
				}
				if args[0] != '{' {
					return nil, badRequest(fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments", i, j),
						"messages[%d]: tool_calls[%d]: arguments must be an object", i, j)
				}
				var call apiToolCall
				call.ID, call.Type = c.ID, "function"
				if call.ID == "" {
					call.ID = fmt.Sprintf("call_%d_%d", i, j)
				}
				call.Function.Name, call.Function.Arguments = c.Function.Name, string(args)
				open = append(open, call)
			}
			if len(open) > 0 {
				calls, err := json.Marshal(open)
				if err != nil {
					return nil, err
				}
				msg.ToolCalls = calls
			}
		case "tool":
			msg.ToolCallID = m.ToolCallID
			if msg.ToolCallID == "" {
				k := slices.IndexFunc(open, func(c apiToolCall) bool { return m.ToolName != "" && c.Function.Name == m.ToolName })
				if k < 0 && len(open) > 0 {
					k = 0
				}
				if k < 0 {
					return nil, badRequest(fmt.Sprintf("messages[%d]", i), "messages[%d]: a tool message answers no call of an assistant message before it", i)
				}
				msg.ToolCallID = open[k].ID
			}
			if k := slices.IndexFunc(open, func(c apiToolCall) bool { return c.ID == msg.ToolCallID }); k >= 0 {
				open = slices.Delete(open, k, k+1)
			}
		default:
			if len(m.ToolCalls) > 0 {
				return nil, badRequest(fmt.Sprintf("messages[%d].tool_calls", i), "messages[%d]: tool_calls belong to assistant messages", i)
			}
		}
		out = append(out, msg)
	}
	return out, nil
}

// generateRequest is the request that runs req: a chat of its system and
// prompt, or with raw its prompt as it is (a completion).
func (req *ollamaGenerateRequest) generateRequest() (*apiRequest, bool, error) {
	out, err := ollamaBase(req.Stream, req.Format, req.Options, req.Logprobs, req.TopLogprobs)
	if err != nil {
		return nil, false, err
	}
	out.Model = req.Model
	if req.Raw {
		if req.System != "" {
			return nil, false, badRequest("system", "raw mode does not support template, system, or context")
		}
		if len(req.Images) > 0 {
			return nil, false, badRequest("images", "raw mode does not support images: the chat template places them (send raw false)")
		}
		out.Prompt, _ = json.Marshal(req.Prompt)
		return out, false, nil
	}
	if req.System != "" {
		out.Messages = append(out.Messages, textMessage("system", req.System))
	}
	user := textMessage("user", req.Prompt)
	if len(req.Images) > 0 {
		c, err := ollamaImageContent(req.Prompt, req.Images)
		if err != nil {
			return nil, false, badRequest("images", "%v", err)
		}
		user.Content = c
	}
	out.Messages = append(out.Messages, user)
	return out, true, nil
}

// ollamaImagePart is an image part of a chat message's content, as a
// media error names it.
var ollamaImagePart = regexp.MustCompile(`\.content\[(\d+)\]\.image_url\.url`)

// ollamaParam renames the chat request's fields in an error to Ollama's.
func ollamaParam(err error) error {
	re, ok := err.(*requestError)
	if !ok {
		return err
	}
	out := *re
	for _, r := range [][2]string{{"max_completion_tokens", "options.num_predict"}, {"max_tokens", "options.num_predict"},
		{"response_format", "format"}, {"repetition_penalty", "repeat_penalty"}} {
		if strings.HasPrefix(out.param, r[0]) {
			out.param = r[1] + strings.TrimPrefix(out.param, r[0])
		}
		out.msg = strings.ReplaceAll(out.msg, r[0], r[1])
	}
	// A message's images are the first parts of its content (ollamaImageContent).
	out.param = ollamaImagePart.ReplaceAllString(out.param, ".images[$1]")
	out.msg = ollamaImagePart.ReplaceAllString(out.msg, ".images[$1]")
	return &out
}

// ollamaModelError is the error of a request for model where the server
// has id, as Ollama's server answers it: 404 when another model, 400 when
// none; nil for id (with or without the tag :latest).
func ollamaModelError(model, id string) *requestError {
	if model == "" {
		return badRequest("model", "model is required")
	}
	if model == id || model == id+":latest" {
		return nil
	}
	return &requestError{status: http.StatusNotFound, param: "model",
		msg: fmt.Sprintf("model '%s' not found", model)}
}
