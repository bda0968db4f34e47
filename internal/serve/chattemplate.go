package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/llamaloop/llamaloop/internal/chat"
	"github.com/llamaloop/llamaloop/internal/jinja"
)

// ChatTemplate is a model's Jinja chat template (tokenizer.chat_template),
// rendered as transformers' apply_chat_template and llama.cpp's minja do
// (internal/chat's Template), by internal/jinja under its limits.
type ChatTemplate struct {
	t *chat.Template
	// takesTools and takesCalls tell whether the template reads tools and
	// the assistants' tool_calls (t's TakesTools and TakesCalls): the
	// server writes them into the messages for one that does not.
	takesTools, takesCalls bool
	// globals are variables every render sees beside the chat's (tests
	// hook a render with them): set before the first render, which gives
	// them to t.
	globals map[string]jinja.Value
	once    sync.Once
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
	t, err := chat.NewTemplateLimits(src, bos, eos, lim)
	if err != nil {
		return nil, err
	}
	return &ChatTemplate{t: t, takesTools: t.TakesTools(), takesCalls: t.TakesCalls()}, nil
}

// IsJinja reports whether text looks like a Jinja template rather than the
// name of one of llama.cpp's built-in templates (chatml, llama3, ...).
func IsJinja(text string) bool { return chat.IsJinja(text) }

// TakesTools reports whether the template renders tools itself; for one
// that does not, the server describes them in the system message.
func (t *ChatTemplate) TakesTools() bool { return t.takesTools }

// Family names the tool-call format the template's model writes: hermes
// (<tool_call>), llama3 (a JSON object with "parameters", maybe after
// <|python_tag|>), mistral ([TOOL_CALLS]) or json.
func (t *ChatTemplate) Family() string { return string(t.t.Format().Family) }

// format is how the template's model writes tool calls and reasoning.
func (t *ChatTemplate) format() chat.Format { return t.t.Format() }

// render renders the chat under the template's limits, stopping when
// ctx ends: messages and tools are JSON values (chat.TemplateMessages'
// messages, the request's tool objects).
func (t *ChatTemplate) render(ctx context.Context, messages, tools []byte, addGenerationPrompt bool) (string, error) {
	return t.renderWith(ctx, messages, tools, chat.RenderOptions{AddGenerationPrompt: addGenerationPrompt})
}

// renderWith is render with the render's options.
func (t *ChatTemplate) renderWith(ctx context.Context, messages, tools []byte, opt chat.RenderOptions) (string, error) {
	t.once.Do(func() {
		if t.globals != nil {
			t.t.SetGlobals(t.globals)
		}
	})
	return t.t.Render(ctx, messages, tools, opt)
}

// Check renders a small fixed chat (a user's message, and with a tool if
// the template renders tools) under a share of the template's step and
// allocation budgets, as the server does at start-up: a template that
// fails on it, or goes over a limit with a tool, is not worth serving.
func (t *ChatTemplate) Check() error { return t.t.Check() }

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
