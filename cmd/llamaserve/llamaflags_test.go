package main

import (
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLlamaCppAliases parses each of llama-server's options against the
// llamaserve option it stands for, and compares the parsed options.
func TestLlamaCppAliases(t *testing.T) {
	cases := []struct{ llama, ours string }{
		{"-c 4096", "--ctx 1024"}, // llama-server's -c is shared by the --parallel (4) slots
		{"--ctx-size 4096 -np 2", "--parallel 2 --ctx 2048"},
		{"-np 2 -c 4096", "--parallel 2 --ctx 2048"},
		{"-c 4096 --parallel 8", "--parallel 8 --ctx 512"},
		{"-t 3", "--threads 3"},
		{"-ngl 5", "--gpu-layers 5"},
		{"--n-gpu-layers 5", "--gpu-layers 5"},
		{"-b 256", "--batch 256"},
		{"--batch-size 256", "--batch 256"},
		{"-ub 64", "--ubatch 64"},
		{"--ubatch-size 64", "--ubatch 64"},
		{"-np 2", "--parallel 2"},
		{"--port 9000", "--addr 127.0.0.1:9000"},
		{"--host 0.0.0.0", "--addr 0.0.0.0:8080"},
		{"--host 0.0.0.0 --port 9000", "--addr 0.0.0.0:9000"},
		{"--port 9000 --addr 10.0.0.1:80", "--addr 10.0.0.1:9000"},
		{"--api-key k", "--api-key k"},
		{"--chat-template chatml", "--chat-template chatml"},
		{"--jinja", ""},
		{"-a name", "--alias name"},
		{"--embedding", "--embeddings"},
		{"-md d.gguf", "--assistant-model d.gguf"},
		{"--model-draft d.gguf", "--assistant-model d.gguf"},
		{"-cb", ""},
		{"--cont-batching", ""},
		{"--metrics", ""},
		{"--usage", "--help"},
		{"-cram 0", "--prefix-cache=false"},
		{"--cache-ram 0", "--prefix-cache=false"},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.llama, func(t *testing.T) {
			var gotHelp, wantHelp strings.Builder
			got, gotErr := parseArgs(strings.Fields("-m m.gguf "+c.llama), &gotHelp)
			want, wantErr := parseArgs(strings.Fields("--model m.gguf "+c.ours), &wantHelp)
			assert.Equal(t, wantErr, gotErr)
			assert.Equal(t, want, got)
			assert.Equal(t, wantHelp.String(), gotHelp.String())
		})
		for _, f := range strings.Fields(c.llama) {
			if strings.HasPrefix(f, "-") {
				covered[f] = true
			}
		}
	}
	for _, name := range cli.LlamaAliases(cli.Llamaserve) {
		assert.True(t, covered[name], "no case runs %s", name)
	}
}

// TestLlamaCppRefused: llama-server's options whose meaning llamaserve does
// not have are usage errors that say what to give instead.
func TestLlamaCppRefused(t *testing.T) {
	cases := []struct{ args, says string }{
		{"-c 0", "training context"},
		{"-c 3 -np 4", "fewer cells than the 4 sequences"},
		{"-np -1", "leave -np out"},
		{"--temp 0.7", "--generation-config"},
		{"-n 128", "max_tokens"},
		{"--no-jinja", "always renders"},
		{"-p hi", "in requests"},
		{"--host /tmp/s.sock", "Unix socket"},
		{"--port 70000", "not a port"},
		{"-ctk q8_0", "--cache-type"},
		{"--cache-ram 8192", "not in host memory"},
		{"--api-key-file keys", "LLAMASERVE_API_KEY"},
		{"--slots", "llama.cpp's option --slots has no counterpart in llamaserve"},
		{"--api-key a --api-key b", "takes one key"},
	}
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			_, err := parseArgs(strings.Fields("-m m.gguf "+c.args), nil)
			require.Error(t, err)
			assert.Equal(t, cli.ExitUsage, cli.ExitCode(err))
			assert.Contains(t, err.Error(), c.says)
		})
	}
}
