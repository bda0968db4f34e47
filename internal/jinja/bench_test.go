package jinja

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkRenderLlama32Tools renders Llama 3.2's template with two tools
// and a call, the heaviest of the differential test's chats.
func BenchmarkRenderLlama32Tools(b *testing.B) {
	src, err := os.ReadFile("testdata/templates/meta-llama-Llama-3.2-3B-Instruct.jinja")
	require.NoError(b, err)
	tmpl, err := Compile(string(src), Limits{})
	require.NoError(b, err)
	c := diffChats[5]
	vars, err := FromJSON([]byte(diffVars(c.messages, c.tools, c.addGenerationPrompt)), 64)
	require.NoError(b, err)
	m := map[string]Value{}
	for _, k := range vars.AsDict().keys {
		m[k.s], _ = vars.AsDict().Get(k.s)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tmpl.Render(context.Background(), m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileLlama32 compiles Llama 3.2's template.
func BenchmarkCompileLlama32(b *testing.B) {
	src, err := os.ReadFile("testdata/templates/meta-llama-Llama-3.2-3B-Instruct.jinja")
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(string(src), Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoopSteps renders a million steps of nested loops: the cost of
// a step where a hostile template spends its MaxSteps.
func BenchmarkLoopSteps(b *testing.B) {
	tmpl, err := Compile("{% for a in range(1000) %}{% for b in range(1000) %}x{% endfor %}{% endfor %}", Limits{MaxSteps: 1_000_000})
	require.NoError(b, err)
	for b.Loop() {
		if _, err := tmpl.Render(context.Background(), nil); err == nil {
			b.Fatal("the render ended within its steps")
		}
	}
}
