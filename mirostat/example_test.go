package mirostat_test

import (
	"context"
	"fmt"

	"github.com/llamaloop/llamaloop/mirostat"
)

func Example() {
	s, err := mirostat.New(mirostat.Config{Version: mirostat.V2, Tau: 1, Eta: 0.1})
	if err != nil {
		panic(err)
	}
	// ln(0.5), ln(0.3), ln(0.2): mu = 2 bits keeps the first two tokens.
	logits := []float32{-0.6931472, -1.2039728, -1.6094379}
	st, err := s.SampleLogits(logits, 0.7)
	if err != nil {
		panic(err)
	}
	fmt.Printf("token %d of %d kept, surprise %.3f bits, mu %.3f -> %.3f\n", st.Token, st.Kept, st.Surprise, st.MuBefore, st.Mu)
	// Output: token 1 of 2 kept, surprise 1.737 bits, mu 2.000 -> 1.926
}

func ExampleSampler_Generate() {
	s, _ := mirostat.New(mirostat.Config{Version: mirostat.V1, Tau: 2, Eta: 0.1})
	rng, _ := mirostat.NewParkMiller(7)
	// A toy model: after token t, token t+1 (mod 4) is likely.
	model := func(tokens []int32) ([]float32, error) {
		row := make([]float32, 4)
		row[(tokens[len(tokens)-1]+1)%4] = 5
		return row, nil
	}
	g, err := s.Generate(context.Background(), model, rng, mirostat.GenerateOptions{
		Prompt: []int32{0}, MaxTokens: 10, EndTokens: []int32{3},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(g.Tokens, g.Reason)
	// Output: [1 2 3] end token
}

func ExamplePreparedRow() {
	row, _ := mirostat.PrepareWeights([]float64{8, 4, 2, 1, 1})
	a, _ := mirostat.New(mirostat.Config{Version: mirostat.V2, Tau: 1.5, Eta: 0.2})
	b := a.Clone()
	steps, _ := mirostat.SampleShared(nil, []*mirostat.Sampler{a, b}, row, []float64{0.1, 0.9})
	for _, st := range steps {
		fmt.Printf("token %d, kept %d\n", st.Token, st.Kept)
	}
	// Output:
	// token 0, kept 3
	// token 2, kept 3
}
