package speculative_test

import (
	"context"
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
)

// Prompt lookup (a request of package generation) on a model that repeats itself: the candidates copied from
// the text so far are accepted, and the tokens are those of plain greedy
// decoding, in fewer evaluations of the model.
func Example() {
	// A toy model over 8 tokens that always predicts (last token + 1) mod 8.
	model := func(h []int32) ([]float32, error) {
		row := make([]float32, 8)
		row[(h[len(h)-1]+1)%8] = 1
		return row, nil
	}
	gen := generation.NewGenerator(backend.NewMemoryBackend(8, 1, model), nil)
	cfg := genconfig.Default()
	n, lookup := 12, 4
	cfg.MaxNewTokens, cfg.PromptLookupNumTokens = &n, &lookup
	res, err := gen.Generate(context.Background(), []generation.Request{{Prompt: []int32{0, 1, 2, 3, 4, 5, 6, 7, 0}, Config: cfg}})
	if err != nil {
		panic(err)
	}
	st := res[0].Speculation
	fmt.Println(res[0].Tokens, res[0].Finish)
	fmt.Printf("%d evaluations, %d of %d candidates accepted\n", st.Steps, st.Accepted, st.Drafted)
	// Output:
	// [1 2 3 4 5 6 7 0 1 2 3 4] length
	// 3 evaluations, 9 of 9 candidates accepted
}
