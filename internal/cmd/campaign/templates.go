package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// chatBody is the conversation every template renders.
const chatBody = `{"messages":[{"role":"system","content":"You are brief."},{"role":"user","content":"Hello"},` +
	`{"role":"assistant","content":"Hi."},{"role":"user","content":"Count to three."}],"max_tokens":8}`

// generatedTemplates are the hostile templates too large to commit.
func generatedTemplates() map[string]string {
	const n = 100_000
	return map[string]string{
		"nesting-generated-100000-ifs": strings.Repeat("{% if true %}", n) + "x" + strings.Repeat("{% endif %}", n),
	}
}

func templateFamily(cfg config) ([]result, error) {
	files, err := filepath.Glob(filepath.Join(cfg.templates, "*.jinja"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.jinja in %s (-templates)", cfg.templates)
	}
	sort.Strings(files)
	type tcase struct{ name, text string }
	var cases []tcase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		cases = append(cases, tcase{strings.TrimSuffix(filepath.Base(f), ".jinja"), string(b)})
	}
	for name, text := range generatedTemplates() {
		cases = append(cases, tcase{name, text})
	}
	demo := filepath.Join(cfg.models, "demo.gguf")
	if _, err := os.Stat(demo); err != nil {
		return nil, fmt.Errorf("%w (make models)", err)
	}
	dir, err := mkdir(cfg, "template")
	if err != nil {
		return nil, err
	}
	// one server at a time: the neighbour's latency is the measure
	return parallel(1, cases, func(c tcase) result {
		model := filepath.Join(dir, c.name+".gguf")
		err := rewriteGGUF(demo, model, func(md []gguf.KV, ts []gguf.TensorInfo) ([]gguf.KV, []gguf.TensorInfo) {
			return setKV(md, "tokenizer.chat_template", c.text), ts
		})
		if err != nil {
			return result{family: "template", name: c.name, outcome: outcome{class: classError, kind: "cannot write the model: " + err.Error()}}
		}
		defer os.Remove(model)
		o := serveCase(cfg, model, "/v1/chat/completions", chatBody)
		fmt.Fprintf(os.Stderr, "campaign: template %s: %s %s\n", c.name, o.class, o.kind)
		return result{family: "template", name: c.name, outcome: o}
	}), nil
}
