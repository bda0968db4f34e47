package chat

import (
	"context"
	"errors"
	"strings"

	"github.com/llamaloop/llamaloop/internal/jinja"
)

// Template is a model's Jinja chat template (tokenizer.chat_template),
// rendered as transformers' apply_chat_template and llama.cpp's minja do:
// with messages, tools, add_generation_prompt, bos_token, eos_token and
// raise_exception (and strftime_now), by internal/jinja under its limits.
type Template struct {
	tmpl     *jinja.Template
	check    *jinja.Template // the template under checkLimits, for Check
	bos, eos string
	format   Format
	// takesTools and takesCalls tell whether the template reads tools and
	// the assistants' tool_calls: Polyfill writes them into the messages
	// for one that does not.
	takesTools, takesCalls bool
	globals                map[string]jinja.Value
}

// RenderOptions are a render's variables beside the chat's.
type RenderOptions struct {
	// AddGenerationPrompt ends the prompt with the opening of the
	// assistant's answer.
	AddGenerationPrompt bool
	// Thinking, when set, is given to the template as enable_thinking
	// (Qwen 3, GLM) and thinking (DeepSeek V3.1): false asks a model that
	// thinks not to.
	Thinking *bool
}

// checkShare is the share of a render's step and allocation budgets that
// Check's one-message chat may use: real templates render it in a few
// thousand steps, and a hostile one then costs a server's start-up a
// tenth of what it may cost a request.
const checkShare = 10

// maxTemplateDepth bounds the nesting of the values a template reads: a
// template that recurses over them (Hermes' over a tool's schema) keeps to
// a bounded stack.
const maxTemplateDepth = 64

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

// NewTemplate compiles src, a Jinja chat template, under the default
// limits of internal/jinja; bos and eos are the texts of the model's BOS
// and EOS tokens.
func NewTemplate(src, bos, eos string) (*Template, error) {
	return NewTemplateLimits(src, bos, eos, jinja.Limits{})
}

// NewTemplateLimits is NewTemplate under lim (a zero field: its default),
// which bounds the compile and every render.
func NewTemplateLimits(src, bos, eos string, lim jinja.Limits) (*Template, error) {
	t, err := jinja.Compile(src, lim)
	if err != nil {
		return nil, err
	}
	check, err := jinja.Compile(src, checkLimits(lim))
	if err != nil {
		return nil, err
	}
	return &Template{tmpl: t, check: check, bos: bos, eos: eos, format: FormatOf(src),
		takesTools: strings.Contains(src, "tools"), takesCalls: strings.Contains(src, "tool_calls")}, nil
}

// IsJinja reports whether text looks like a Jinja template rather than the
// name of one of llama.cpp's built-in templates (chatml, llama3, ...).
func IsJinja(text string) bool {
	return strings.Contains(text, "{{") || strings.Contains(text, "{%")
}

// TakesTools reports whether the template renders tools itself; for one
// that does not, Polyfill describes them in the system message.
func (t *Template) TakesTools() bool { return t.takesTools }

// TakesCalls reports whether the template renders the assistants'
// tool_calls; for one that does not, Polyfill writes them as JSON.
func (t *Template) TakesCalls() bool { return t.takesCalls }

// Format is the format of the template's model's answers (FormatOf).
func (t *Template) Format() Format { return t.format }

// SetGlobals sets variables every render sees beside the chat's (tests
// hook a render with them).
func (t *Template) SetGlobals(globals map[string]jinja.Value) { t.globals = globals }

// Render renders the chat under the template's limits, stopping when ctx
// ends: messages and tools are JSON values (TemplateMessages' messages,
// the request's tool objects; nil tools: none), read keeping their keys'
// order, which tojson keeps as Python's json.dumps does.
func (t *Template) Render(ctx context.Context, messages, tools []byte, opt RenderOptions) (string, error) {
	return t.render(ctx, t.tmpl, messages, tools, opt)
}

func (t *Template) render(ctx context.Context, tmpl *jinja.Template, messages, tools []byte, opt RenderOptions) (string, error) {
	msgs, err := jinja.FromJSON(messages, maxTemplateDepth)
	if err != nil {
		return "", err
	}
	data := map[string]jinja.Value{
		"messages":              msgs,
		"add_generation_prompt": jinja.NewBool(opt.AddGenerationPrompt),
		"bos_token":             jinja.NewString(t.bos),
		"eos_token":             jinja.NewString(t.eos),
	}
	if opt.Thinking != nil {
		data["enable_thinking"] = jinja.NewBool(*opt.Thinking)
		data["thinking"] = jinja.NewBool(*opt.Thinking)
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

// Check renders a small fixed chat (a user's message, and with a tool if
// the template renders tools) under a checkShare of the template's step
// and allocation budgets (its other limits as they are), as a server does
// at start-up: a template that fails on it, or goes over a limit with a
// tool, is not worth serving.
func (t *Template) Check() error {
	ctx := context.Background()
	chat := TemplateMessages([]Message{{Role: "user", Content: "Hello"}})
	opt := RenderOptions{AddGenerationPrompt: true}
	if _, err := t.render(ctx, t.check, chat, nil, opt); err != nil {
		return err
	}
	if t.takesTools {
		tools := []byte(`[{"type":"function","function":{"name":"get_weather","description":"The weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`)
		var le *jinja.LimitError
		if _, err := t.render(ctx, t.check, chat, tools, opt); errors.As(err, &le) {
			return err
		}
	}
	return nil
}
