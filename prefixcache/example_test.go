package prefixcache_test

import (
	"context"
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/prefixcache"
)

// Two turns of a chat: the second evaluates only what the first did not.
func Example() {
	mem := backend.NewMemoryBackend(vocab, 2, testmodel.HashModel(vocab)) // llamabackend.New(ctx) on llama.cpp
	pc, err := prefixcache.New(mem, prefixcache.Options{CacheSlots: 1, MaxCells: 4096})
	if err != nil {
		panic(err)
	}
	gen := generation.NewGenerator(pc, nil)
	cfg := genconfig.Default()
	cfg.MaxNewTokens = new(8)

	conversation := toks(1, 100) // a system prompt and the user's first message
	for turn := range 2 {
		mem.ResetStats()
		res, err := gen.Generate(context.Background(), []generation.Request{{Prompt: conversation, Config: cfg}})
		if err != nil {
			panic(err)
		}
		fmt.Printf("turn %d: a prompt of %d tokens, %d tokens evaluated\n", turn, len(conversation), mem.Stats().Tokens)
		conversation = append(conversation, res[0].Tokens...)
		conversation = append(conversation, toks(turn, 20)...) // the user's next message
	}
	st := pc.Stats()
	fmt.Printf("%d lookups, %d hits, %d tokens saved\n", st.Lookups, st.Hits, st.TokensSaved)
	// Output:
	// turn 0: a prompt of 100 tokens, 107 tokens evaluated
	// turn 1: a prompt of 128 tokens, 28 tokens evaluated
	// 2 lookups, 1 hits, 107 tokens saved
}
