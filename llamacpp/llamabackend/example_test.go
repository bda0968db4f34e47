package llamabackend_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
)

// Batched streaming generation on a llama.cpp model (here the project's
// demo model, a Markov chain over English words).
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "demo.gguf")
	demo, _ := testmodel.NewDemo()
	if err := demo.Write(path); err != nil {
		fmt.Println(err)
		return
	}

	model, err := llamacpp.LoadModel(path, llamacpp.ModelParams{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer model.Close()
	ctx, err := model.NewContext(llamacpp.ContextParams{ContextSize: 1024, Sequences: 2, Threads: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ctx.Close()
	lb, err := llamabackend.New(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lb.Close()
	gen := generation.NewGenerator(lb, llamabackend.Tokenizer{Vocab: model.Vocab()})

	cfg := genconfig.Default()
	cfg.MaxNewTokens = new(8)
	reqs := []generation.Request{
		{Text: "The model", Config: cfg},
		{Text: "Beam search", Config: cfg, StopStrings: []string{"."}},
	}
	texts := make([]string, len(reqs))
	for ev, err := range gen.Stream(context.Background(), reqs) {
		if err != nil {
			fmt.Println(err)
			return
		}
		texts[ev.Request] += ev.Text.String() // Text is only valid until the next event
		if ev.Finish != generation.NotFinished {
			fmt.Printf("request %d (%s):%s\n", ev.Request, ev.Finish, texts[ev.Request])
		}
	}
	// Output:
	// request 0 (length): reads a prompt and returns new logits for
	// request 1 (stop): and returns new logits for every token.
}
