// Package jinja is a bounded Jinja2 engine for chat templates: the subset
// of Jinja that the chat templates of GGUF files and Hugging Face models
// use, rendered as transformers' apply_chat_template renders them
// (trim_blocks and lstrip_blocks on, no autoescaping, tojson keeping the
// order of keys as Python's json.dumps does).
//
// A chat template comes from a model file and is untrusted: every cost of
// compiling and rendering it is bounded by Limits, and going over one is a
// *LimitError naming it. Nothing a template does panics, overflows the
// stack or allocates without a bound; a render stops when its context
// ends.
package jinja

import (
	"context"
	"fmt"
	"strings"
)

// Template is a compiled template; it is safe for concurrent renders.
type Template struct {
	root []node
	lim  Limits
}

// Compile parses src under lim (a zero field takes its default). Compiling
// is linear in the source and its recursion bounded by lim.MaxNesting.
func Compile(src string, lim Limits) (t *Template, err error) {
	defer func() {
		if p := recover(); p != nil { // a bug of the engine, never the process's end
			t, err = nil, fmt.Errorf("jinja: internal error: %v", p)
		}
	}()
	lim = lim.withDefaults()
	if int64(len(src)) > lim.MaxSourceBytes {
		return nil, &LimitError{Limit: "MaxSourceBytes", Value: lim.MaxSourceBytes}
	}
	toks, err := lex(src, lim.MaxNesting)
	if err != nil {
		return nil, err
	}
	root, err := parse(toks, lim.MaxNesting)
	if err != nil {
		return nil, err
	}
	return &Template{root: root, lim: lim}, nil
}

// Limits returns the limits the template renders under.
func (t *Template) Limits() Limits { return t.lim }

// Stats are the costs of one render.
type Stats struct {
	// Steps is the number of evaluation steps (see Limits.MaxSteps).
	Steps int64
	// AllocBytes is what the render built (see Limits.MaxAllocBytes).
	AllocBytes int64
}

// Render renders the template with vars (which shadow the globals:
// range, dict, namespace, raise_exception, strftime_now). It returns a
// *LimitError when the render goes over a limit, an *Error for a fault
// of the template, and an error wrapping ctx.Err() when ctx ends first.
func (t *Template) Render(ctx context.Context, vars map[string]Value) (string, error) {
	out, _, err := t.RenderStats(ctx, vars)
	return out, err
}

// RenderStats is Render that also returns what the render cost.
func (t *Template) RenderStats(ctx context.Context, vars map[string]Value) (out string, st Stats, err error) {
	r := &renderer{lim: t.lim, ctx: ctx}
	defer func() {
		if p := recover(); p != nil {
			out, err = "", fmt.Errorf("jinja: internal error: %v", p)
		}
		st = Stats{Steps: r.steps, AllocBytes: r.alloc}
	}()
	if err := ctx.Err(); err != nil {
		return "", st, &ctxError{err}
	}
	root := &scope{vars: make(map[string]Value, len(vars)+len(globals))}
	for k, f := range globals {
		root.vars[k] = Value{kind: KindFunc, p: f}
	}
	for k, v := range vars {
		root.vars[k] = v
	}
	r.root = root
	w := &sink{max: t.lim.MaxOutputBytes, limit: "MaxOutputBytes"}
	if _, err := r.execBody(t.root, root, w); err != nil {
		return "", st, err
	}
	return w.b.String(), st, nil
}

// sink is bounded output: the template's, a macro's or a captured block's.
type sink struct {
	b     strings.Builder
	max   int64
	limit string
}

func (w *sink) write(r *renderer, s string) error {
	if int64(w.b.Len())+int64(len(s)) > w.max {
		return &LimitError{Limit: w.limit, Value: w.max}
	}
	if err := r.charge(int64(len(s)) / 4096); err != nil {
		return err
	}
	if err := r.account(int64(len(s))); err != nil {
		return err
	}
	w.b.WriteString(s)
	return nil
}
