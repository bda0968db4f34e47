package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/chat"
	"github.com/llamaloop/llamaloop/internal/clicommon"
	"github.com/llamaloop/llamaloop/internal/quote"
	"github.com/llamaloop/llamaloop/internal/spectok"
)

// The chat messages of a request, and the prompt they render to: the
// template's own markers as control tokens, the messages' contents as text.

// parseMessages reads the chat messages; their media go into r, in order
// (nil: media are refused, as without a projector).
func parseMessages(msgs []apiMessage, r *mediaReader) ([]chatMessage, error) {
	if r == nil {
		r = &mediaReader{}
	}
	if len(msgs) == 0 {
		return nil, badRequest("messages", "messages is required")
	}
	if len(msgs) > clicommon.MaxChatMessages {
		return nil, badRequest("messages", "%d messages: at most %d", len(msgs), clicommon.MaxChatMessages)
	}
	out := make([]chatMessage, len(msgs))
	for i, m := range msgs {
		role := m.Role
		switch role {
		case "system", "user", "assistant", "tool":
		case "developer":
			role = "system" // OpenAI's newer name for the system role
		case "function":
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d]: role %s: %s", i, quote.String(m.Role), errNoFunctions)
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d]: role %s is not system, developer, user, assistant or tool", i, quote.String(m.Role))
		}
		if raw := string(bytes.TrimSpace(m.FunctionCall)); raw != "" && raw != "null" {
			return nil, badRequest(fmt.Sprintf("messages[%d].function_call", i), "messages[%d]: function_call: %s", i, errNoFunctions)
		}
		var calls []apiToolCall
		if raw := bytes.TrimSpace(m.ToolCalls); len(raw) > 0 && string(raw) != "null" {
			param := fmt.Sprintf("messages[%d].tool_calls", i)
			if role != "assistant" {
				return nil, badRequest(param, "messages[%d]: tool_calls belong to assistant messages", i)
			}
			if err := json.Unmarshal(raw, &calls); err != nil {
				return nil, badRequest(param, "messages[%d]: tool_calls must be an array of calls: %v", i, err)
			}
			for j, c := range calls {
				if c.Type != "" && c.Type != "function" {
					return nil, badRequest(param, "messages[%d]: tool_calls[%d]: type %s: only function calls", i, j, quote.String(c.Type))
				}
				if c.Function.Name == "" {
					return nil, badRequest(param, "messages[%d]: tool_calls[%d]: function.name is required", i, j)
				}
			}
		}
		if role == "tool" && m.ToolCallID == "" {
			return nil, badRequest(fmt.Sprintf("messages[%d].tool_call_id", i), "messages[%d]: a tool message needs tool_call_id", i)
		}
		had := len(r.items)
		text, err := r.messageText(m.Content, fmt.Sprintf("messages[%d].content", i))
		if err != nil {
			return nil, err
		}
		if len(r.items) > had && role != "user" {
			return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d]: images and audio belong to user messages, not %s", i, role)
		}
		out[i] = chatMessage{Role: role, Content: text, Name: m.Name, ToolCallID: m.ToolCallID}
		if role == "assistant" {
			out[i].Reasoning = m.ReasoningContent
		}
		for _, c := range calls {
			out[i].ToolCalls = append(out[i].ToolCalls, chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
	}
	return out, nil
}

// chatPrompt makes the prompt of a chat: the model's Jinja template,
// given the tools, or, for a model without one or when it fails, llama.cpp's
// built-in template (with the tools described in the system message); it
// names the template that ran. Only the template's markers become control
// tokens, unless parseSpecial: the texts of the messages stay text.
// tail is the end of the rendered chat (Jinja only).
// thinking, when set, is the template's enable_thinking.
func (p *params) chatPrompt(ctx context.Context, msgs []chatMessage, media []Media, tp *toolPlan, parseSpecial bool, thinking *bool) (req generation.Request, template, tail string, err error) {
	if len(media) > 0 && (p.chat == nil || p.tok == nil) {
		return generation.Request{}, "", "", badRequest("messages", "images and audio need a Jinja chat template (the model's, or Jinja text in llamaserve --chat-template); this server renders chats with llama.cpp's built-in one")
	}
	if p.chat != nil && p.tok != nil {
		takesTools, takesCalls := p.chat.takesTools, p.chat.takesCalls
		var tools []byte
		if tp != nil && takesTools {
			tools = tp.toolsJSON()
		}
		shown := msgs
		if !takesTools || !takesCalls {
			shown = polyfill(msgs, tp, !takesTools, !takesCalls)
		}
		opt := chat.RenderOptions{AddGenerationPrompt: true, Thinking: thinking}
		var req generation.Request
		var tail string
		var err error
		if len(media) > 0 {
			req, tail, err = p.renderMediaChat(ctx, shown, media, tools, parseSpecial, opt)
		} else {
			req.Prompt, tail, err = p.renderChatWith(ctx, shown, tools, parseSpecial, opt)
		}
		if err == nil {
			if tp != nil {
				tp.family = p.chat.format().Family
			}
			return req, "jinja", tail, nil
		}
		var re *requestError
		if errors.As(err, &re) {
			return generation.Request{}, "", "", err
		}
		if re := templateError(err); re != nil {
			if p.logf != nil {
				p.logf("chat template: %v", err)
			}
			return generation.Request{}, "", "", re
		}
		if len(media) > 0 {
			return generation.Request{}, "", "", badRequest("messages", "the chat template fails on this request: %v", err)
		}
		if p.logf != nil {
			p.logf("chat template: %v; rendering with llama.cpp's built-in template instead", err)
		}
	}
	if tp != nil {
		tp.family = chat.JSON
	}
	return generation.Request{Messages: builtinMessages(msgs, tp), ParseSpecial: parseSpecial}, "builtin", "", nil
}

// renderChat renders msgs with the Jinja template and tokenizes them; an
// error of the template is returned as it is, one of tokenization as a
// *requestError.
func (p *params) renderChat(ctx context.Context, msgs []chatMessage, tools []byte, parseSpecial bool) ([]int32, error) {
	toks, _, err := p.renderChatWith(ctx, msgs, tools, parseSpecial, chat.RenderOptions{AddGenerationPrompt: true})
	return toks, err
}

// renderChatWith is renderChat with the render's options, which also
// returns the rendered text's tail, where the generation prompt is (up to
// promptTail bytes).
func (p *params) renderChatWith(ctx context.Context, msgs []chatMessage, tools []byte, parseSpecial bool, opt chat.RenderOptions) ([]int32, string, error) {
	render, contents, fields := p.chatTexts(ctx, msgs, tools, opt)
	tail := func(text string) string { return text[max(0, len(text)-promptTail):] }
	ct, ok := p.tok.(backend.ChatTokenizer)
	if !ok {
		text, err := render(contents)
		if err != nil {
			return nil, "", err
		}
		toks, err := p.tok.Tokenize(text, false, true)
		if err != nil {
			return nil, "", badRequest("messages", "the chat prompt cannot be tokenized: %v", err)
		}
		return toks, tail(text), nil
	}
	rendered := false
	var last string
	toks, err := ct.TokenizeChat(func(cs []string) (string, error) {
		text, err := render(cs)
		rendered = rendered || err == nil
		if err == nil {
			last = tail(text)
		}
		return text, err
	}, contents, parseSpecial)
	if err != nil && rendered {
		var ce *spectok.ContentError
		if errors.As(err, &ce) {
			field := strings.SplitN(fields[ce.Index], ".", 2)[0]
			field = strings.SplitN(field, "[", 2)[0]
			return nil, "", badRequest(field, "%s holds the text of the control token %q, which the chat template writes so that it cannot stay text (remove it, or set parse_special to read it as that token)",
				fields[ce.Index], ce.Token)
		}
		return nil, "", badRequest("messages", "the chat prompt cannot be tokenized: %v", err)
	}
	return toks, last, err
}

// promptTail is the most bytes of a rendered chat kept to read its
// generation prompt (whether it opens the model's reasoning).
const promptTail = 256

// chatTexts lists every text of the client in msgs and tools, as contents
// of backend.ChatTokenizer.TokenizeChat, with the request field of each, and
// the render that writes the chat with others in their place: the
// messages' texts, names and function names, which render marks, and the
// call ids, arguments and tools, which it cannot mark (the ids pair calls
// with results, the arguments are parsed) and are only checked for
// markers.
func (p *params) chatTexts(ctx context.Context, msgs []chatMessage, tools []byte, opt chat.RenderOptions) (render func([]string) (string, error), contents, fields []string) {
	add := func(field, text string) {
		contents, fields = append(contents, text), append(fields, field)
	}
	for i, m := range msgs {
		add(fmt.Sprintf("messages[%d].content", i), m.Content)
		add(fmt.Sprintf("messages[%d].reasoning_content", i), m.Reasoning)
		add(fmt.Sprintf("messages[%d].name", i), m.Name)
		add(fmt.Sprintf("messages[%d].tool_call_id", i), m.ToolCallID)
		for j, c := range m.ToolCalls {
			add(fmt.Sprintf("messages[%d].tool_calls[%d].id", i, j), c.ID)
			add(fmt.Sprintf("messages[%d].tool_calls[%d].function.name", i, j), c.Name)
			add(fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments", i, j), c.Arguments)
		}
	}
	add("tools", jsonStrings(tools))
	render = func(cs []string) (string, error) {
		shown := slices.Clone(msgs)
		k := 0
		next := func() string { k++; return cs[k-1] }
		for i := range shown {
			m := &shown[i]
			m.Content, m.Reasoning, m.Name = next(), next(), next()
			next()
			m.ToolCalls = slices.Clone(m.ToolCalls)
			for j := range m.ToolCalls {
				next()
				m.ToolCalls[j].Name = next()
				next()
			}
		}
		return p.chat.renderWith(ctx, templateMessages(shown), tools, opt)
	}
	return render, contents, fields
}

// jsonStrings joins the keys and strings of the JSON document data, decoded,
// with NULs between them (a NUL is in no marker): the texts a template
// writes from it.
func jsonStrings(data []byte) string {
	var b strings.Builder
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return b.String()
		}
		if s, ok := tok.(string); ok {
			b.WriteString(s)
			b.WriteByte(0)
		}
	}
}
