package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/llamaloop/llamaloop/internal/chat"
	"github.com/llamaloop/llamaloop/internal/jinja"
)

// ChatTemplate is a model's Jinja chat template (tokenizer.chat_template),
// rendered as transformers' apply_chat_template and llama.cpp's minja do:
// with messages, tools, add_generation_prompt, bos_token, eos_token and
// raise_exception (and strftime_now), by internal/jinja under its limits.
type ChatTemplate struct {
	tmpl     *jinja.Template
	bos, eos string
	// format is how the template's model writes tool calls and reasoning.
	format chat.Format
	// takesTools and takesCalls tell whether the template reads tools and
	// the assistants' tool_calls: the server writes them into the
	// messages for one that does not.
	takesTools, takesCalls bool
	// globals are variables every render sees beside the chat's (tests
	// hook a render with them).
	globals map[string]jinja.Value
	// check is the template under checkLimits, for Check.
	check *jinja.Template
}

// checkShare is the share of a render's step and allocation budgets that
// Check's one-message chat may use: real templates render it in a few
// thousand steps, and a hostile one then costs a server's start-up a
// tenth of what it may cost a request.
const checkShare = 10

// checkLimits returns lim with its step and allocation budgets cut to
// their checkShare.
func checkLimits(lim jinja.Limits) jinja.Limits {
	d := jinja.DefaultLimits()
	if lim.MaxSteps == 0 {
		lim.MaxSteps = d.MaxSteps
	}
	if lim.MaxAllocBytes == 0 {
		lim.MaxAllocBytes = d.MaxAllocBytes
	}
	lim.MaxSteps = max(1, lim.MaxSteps/checkShare)
	lim.MaxAllocBytes = max(1, lim.MaxAllocBytes/checkShare)
	return lim
}

// NewChatTemplate compiles src, a Jinja chat template, under the default
// limits of internal/jinja; bos and eos are the texts of the model's BOS
// and EOS tokens.
func NewChatTemplate(src, bos, eos string) (*ChatTemplate, error) {
	return NewChatTemplateLimits(src, bos, eos, jinja.Limits{})
}

// NewChatTemplateLimits is NewChatTemplate under lim (a zero field: its
// default), which bounds the compile and every render.
func NewChatTemplateLimits(src, bos, eos string, lim jinja.Limits) (*ChatTemplate, error) {
	t, err := jinja.Compile(src, lim)
	if err != nil {
		return nil, err
	}
	check, err := jinja.Compile(src, checkLimits(lim))
	if err != nil {
		return nil, err
	}
	ct := &ChatTemplate{tmpl: t, check: check, bos: bos, eos: eos, format: chat.FormatOf(src),
		takesTools: strings.Contains(src, "tools"), takesCalls: strings.Contains(src, "tool_calls")}
	return ct, nil
}

// IsJinja reports whether text looks like a Jinja template rather than the
// name of one of llama.cpp's built-in templates (chatml, llama3, ...).
func IsJinja(text string) bool {
	return strings.Contains(text, "{{") || strings.Contains(text, "{%")
}

// TakesTools reports whether the template renders tools itself; for one
// that does not, the server describes them in the system message.
func (t *ChatTemplate) TakesTools() bool { return t.takesTools }

// Family names the tool-call format the template's model writes: hermes
// (<tool_call>), llama3 (a JSON object with "parameters", maybe after
// <|python_tag|>), mistral ([TOOL_CALLS]) or json.
func (t *ChatTemplate) Family() string { return string(t.format.Family) }

// render renders the chat under the template's limits, stopping when
// ctx ends: messages and tools are JSON values (the message objects and
// tool objects of OpenAI's API, rewritten by templateMessages), read
// keeping their keys' order, which tojson keeps as Python's json.dumps
// does.
func (t *ChatTemplate) render(ctx context.Context, messages, tools []byte, addGenerationPrompt bool) (string, error) {
	return t.renderWith(ctx, t.tmpl, messages, tools, addGenerationPrompt)
}

// renderWith is render with tmpl, the template compiled under some limits.
func (t *ChatTemplate) renderWith(ctx context.Context, tmpl *jinja.Template, messages, tools []byte, addGenerationPrompt bool) (string, error) {
	msgs, err := jinja.FromJSON(messages, maxTemplateDepth)
	if err != nil {
		return "", err
	}
	data := map[string]jinja.Value{
		"messages":              msgs,
		"add_generation_prompt": jinja.NewBool(addGenerationPrompt),
		"bos_token":             jinja.NewString(t.bos),
		"eos_token":             jinja.NewString(t.eos),
	}
	if tools != nil {
		v, err := jinja.FromJSON(tools, maxTemplateDepth)
		if err != nil {
			return "", err
		}
		data["tools"] = v
	}
	for k, v := range t.globals {
		data[k] = v
	}
	return tmpl.Render(ctx, data)
}

// maxTemplateDepth bounds the nesting of the values a template reads: a
// template that recurses over them (Hermes' over a tool's schema) keeps to
// a bounded stack.
const maxTemplateDepth = 64

// Check renders a small fixed chat (a user's message, and with a tool if
// the template renders tools) under a checkShare of the template's step
// and allocation budgets (its other limits as they are), as the server
// does at start-up: a template that fails on it, or goes over a limit
// with a tool, is not worth serving.
func (t *ChatTemplate) Check() error {
	ctx := context.Background()
	chat := templateMessages([]chatMessage{{Role: "user", Content: "Hello"}})
	if _, err := t.renderWith(ctx, t.check, chat, nil, true); err != nil {
		return err
	}
	if t.takesTools {
		tools := []byte(`[{"type":"function","function":{"name":"get_weather","description":"The weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`)
		var le *jinja.LimitError
		if _, err := t.renderWith(ctx, t.check, chat, tools, true); errors.As(err, &le) {
			return err
		}
	}
	return nil
}

// templateError maps an error of the chat template's render to the reply:
// a limit is a 500 with code chat_template_limit naming it, the end of the
// request's context a 503; nil for the template's other errors, on which
// the server falls back to llama.cpp's built-in template.
func templateError(err error) *requestError {
	var le *jinja.LimitError
	switch {
	case errors.As(err, &le):
		return &requestError{status: http.StatusInternalServerError, code: "chat_template_limit",
			msg: fmt.Sprintf("the model's chat template went over a limit: %v (llamaserve --template-limits %s=N raises it)", err, le.Limit)}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &requestError{status: http.StatusServiceUnavailable, code: "request_canceled",
			msg: fmt.Sprintf("the chat template's render stopped: %v", err)}
	}
	return nil
}
