// Command llamagen generates text with a GGUF model: llama.cpp evaluates
// the model and llamaloop decodes (transformers' processors and warpers,
// greedy, sampling, Mirostat, beam search).
//
//	llamagen -m model.gguf -p "The model"
//	llamagen -m model.gguf --prompts prompts.txt --do-sample --top-p 0.9 --seed 1
//	llamagen -m model.gguf --chat
//	llamagen -m model.gguf --demo
//
// Run llamagen --help for every option with its default, and the JSON
// schema of --json.
package main

import (
	"os"
	"os/signal"

	"github.com/llamaloop/llamaloop/internal/cli"
)

func main() {
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	a := &app{
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
		stdinTerminal:  cli.IsTerminal(os.Stdin.Fd()),
		stderrTerminal: cli.IsTerminal(os.Stderr.Fd()),
		interrupts:     interrupts,
	}
	os.Exit(a.main(os.Args[1:]))
}
