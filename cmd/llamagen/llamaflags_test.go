package main

import (
	"io"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLlamaCppAliases parses each of llama.cpp's options against the
// llamagen option it stands for, and compares the parsed options.
func TestLlamaCppAliases(t *testing.T) {
	const prompt = "-m model.gguf -p hi"
	cases := []struct{ llama, ours, base string }{
		{"-n 7", "--max-new-tokens 7", ""},
		{"--predict 7", "--max-new-tokens 7", ""},
		{"--n-predict=7", "--max-new-tokens 7", ""},
		{"-c 300", "--ctx 300", ""},
		{"--ctx-size 300", "--ctx 300", ""},
		{"-t 3", "--threads 3", ""},
		{"--threads 3", "--threads 3", ""},
		{"-ngl 5", "--gpu-layers 5", ""},
		{"--n-gpu-layers 5", "--gpu-layers 5", ""},
		{"-s 42", "--seed 42", ""},
		{"-s 4294967295", "--seed -1", ""},
		{"-s -1", "--seed -1", ""},
		{"-b 64", "--batch 64", ""},
		{"--batch-size 64", "--batch 64", ""},
		{"-ub 32", "--ubatch 32", ""},
		{"--ubatch-size 32", "--ubatch 32", ""},
		{"--prompt hi", "-p hi", "-m m.gguf"},
		{"--file p.txt", "-f p.txt", "-m m.gguf"},
		{"--model other.gguf", "-m other.gguf", ""},
		{"--temp 0.7", "--temperature 0.7 --do-sample", ""},
		{"--temp 0", "--do-sample=false", ""},
		{"--top-k 40", "--top-k 40", ""},
		{"--top-p 0.9", "--top-p 0.9", ""},
		{"--min-p 0.05", "--min-p 0.05", ""},
		{"--typical 0.5", "--typical-p 0.5", ""},
		{"--repeat-penalty 1.3 --repeat-last-n -1", "--repetition-penalty 1.3", ""},
		{"--repeat-last-n -1 --repeat-penalty 1.3", "--repetition-penalty 1.3", ""},
		{"--repeat-penalty 1.3 --repeat-last-n 0", "--repetition-penalty 1", ""},
		{"--repeat-penalty 1", "--repetition-penalty 1", ""},
		{"--repeat-last-n 32", "", ""},
		{"--mirostat 2", "--mirostat 2", ""},
		{"--mirostat 1 --mirostat-ent 3", "--mirostat 1 --mirostat-tau 3", ""},
		{"--mirostat 1 --mirostat-lr 0.2", "--mirostat 1 --mirostat-eta 0.2", ""},
		{"--grammar-file g.gbnf", "--grammar g.gbnf", ""},
		{"-j {}", "--json-schema {}", ""},
		{"-jf s.json", "--json-schema s.json", ""},
		{"--json-schema-file s.json", "--json-schema s.json", ""},
		{"--chat-template chatml", "--chat-template chatml", ""},
		{"-r END", "--stop-strings END", ""},
		{"--reverse-prompt END", "--stop-strings END", ""},
		{"-md d.gguf", "--assistant-model d.gguf", ""},
		{"--model-draft d.gguf", "--assistant-model d.gguf", ""},
		{"--no-escape", "", ""},
		{"-cnv -sys brief", "--chat --system brief", "-m m.gguf"},
		{"--conversation --system-prompt brief", "--chat --system brief", "-m m.gguf"},
		{"--usage", "--help", ""},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.llama, func(t *testing.T) {
			base := prompt
			if c.base != "" {
				base = c.base
			}
			var gotHelp, wantHelp strings.Builder
			got, gotErr := parseArgs(strings.Fields(base+" "+c.llama), &gotHelp)
			want, wantErr := parseArgs(strings.Fields(base+" "+c.ours), &wantHelp)
			assert.Equal(t, wantErr, gotErr)
			assert.Equal(t, want, got)
			assert.Equal(t, wantHelp.String(), gotHelp.String())
		})
		for _, f := range strings.Fields(c.llama) {
			if strings.HasPrefix(f, "-") {
				name, _, _ := strings.Cut(f, "=")
				covered[name] = true
			}
		}
	}
	for _, name := range cli.LlamaAliases(cli.Llamagen) {
		assert.True(t, covered[name], "no case runs %s", name)
	}

}

// TestLlamaCppRefused: llama.cpp's options whose meaning llamagen does not
// have are usage errors that say what to give instead.
func TestLlamaCppRefused(t *testing.T) {
	cases := []struct{ args, says string }{
		{"-n -1", "give -n N"},
		{"-n -2", "give -c N and -n N"},
		{"-n 0", "at least 1 token"},
		{"-c 0", "training context"},
		{"-t 0", "leave -t out"},
		{"-np 4", "--num-return-sequences N"},
		{"--repeat-penalty 1.1", "add --repeat-last-n -1"},
		{"--repeat-penalty 1.1 --repeat-last-n 64", "penalizes the last 64 tokens"},
		{"--jinja", "built-in templates"},
		{"--port 8080", "llamaserve does"},
		{"--presence-penalty 0.5", "--repetition-penalty"},
		{"--ignore-eos", "--min-new-tokens"},
		{"-fa on", "flash attention"},
		{"--xtc-probability 0.5", "llama.cpp's option --xtc-probability has no counterpart in llamagen"},
		{"-ctk q8_0", "f16"},
		{"-n", "needs a value"},
	}
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			_, err := parseArgs(append([]string{"-m", "m.gguf", "-p", "hi"}, strings.Fields(c.args)...), io.Discard)
			require.Error(t, err)
			assert.Equal(t, cli.ExitUsage, cli.ExitCode(err))
			assert.Contains(t, err.Error(), c.says)
		})
	}
}

// TestContextFullNotice: text output that stops at a full context says so
// on stderr and exits 0; --json says it in the result line instead.
func TestContextFullNotice(t *testing.T) {
	res := run(t, "", "-m", demoModel, "-p", "The model", "--ctx", "10", "-n", "600")
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "llamagen: generation stopped: the context is full (256 cells per sequence")

	res = run(t, "", "-m", demoModel, "-p", "The model", "--ctx", "10", "-n", "600", "--json")
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.NotContains(t, res.Stderr, "the context is full")
	assert.Contains(t, res.Stdout, `"finish":"context full"`)
}

// TestDemoTakesBeamsAndLookup: --demo gives --num-beams to its beam search
// row and --prompt-lookup to its speculative row, not to the others (where
// they failed as an internal error, exit status 1).
func TestDemoTakesBeamsAndLookup(t *testing.T) {
	res := run(t, "", "-m", demoModel, "--demo", "--num-beams", "3")
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.Contains(t, res.Stdout, "3 beams")
	res = run(t, "", "-m", demoModel, "--demo", "--prompt-lookup", "2")
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.Contains(t, res.Stdout, "prompt lookup 2;")
	res = run(t, "", "-m", demoModel, "--demo", "--num-beams", "3", "--prompt-lookup", "2")
	assert.Equal(t, cli.ExitUsage, res.Code, res.Stderr)
}
