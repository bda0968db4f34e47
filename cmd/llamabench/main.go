// Command llamabench measures llama.cpp through llamaloop on this machine:
// prompt processing, generation by every decoding method, batched
// generation, beam search and the per-token cost of the samplers, each
// repeated, against the bound that the memory bandwidth puts on
// generation.
//
//	llamabench                              # build/models/bench-small-q8_0.gguf
//	llamabench -m model.gguf --json out.json --chart out.svg
//
// Run llamabench --help for every option with its default.
package main

import (
	"os"
	"os/signal"

	"github.com/llamaloop/llamaloop/internal/cli"
)

func main() {
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	a := &app{stdout: os.Stdout, stderr: os.Stderr, stderrTerminal: cli.IsTerminal(os.Stderr.Fd()), interrupts: interrupts}
	os.Exit(a.main(os.Args[1:]))
}
