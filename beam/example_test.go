package beam_test

import (
	"context"
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
)

// A toy model over the tokens {0, 1, 2, 3} whose next-token distribution
// depends on the last token; 3 is eos.
func exampleModel(history []int32) ([]float32, error) {
	table := [][]float64{
		{.12, .50, .30, .08},
		{.05, .05, .30, .60},
		{.10, .60, .20, .10},
		{.25, .25, .25, .25},
	}
	row := make([]float32, 4)
	for i, p := range table[history[len(history)-1]] {
		row[i] = float32(math.Log(p))
	}
	return row, nil
}

func Example() {
	// Any backend.Backend works: a llama.cpp context (one sequence per
	// slot) or, here, an in-memory model. A prompt needs num_beams slots.
	backend := backend.NewMemoryBackend(4, 2, exampleModel)

	cfg := genconfig.Default()
	cfg.NumBeams = 2
	cfg.NumReturnSequences = 2
	cfg.MaxNewTokens = new(3)
	cfg.EOSTokenID = []int32{3}
	cfg.PadTokenID = new(int32(2))

	res, err := beam.Search(context.Background(), backend, [][]int32{{0}}, beam.Options{Config: cfg})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, seq := range res.Sequences {
		fmt.Printf("%v score %.5f beams %v\n", seq, res.SequencesScores[i], res.BeamIndices[i])
	}
	// Output:
	// [0 1 3 2] score -0.60199 beams [0 0 -1]
	// [0 2 1 3] score -0.74187 beams [0 1 0]
}

func Example_narrowing() {
	backend := backend.NewMemoryBackend(4, 2, exampleModel)
	cfg := genconfig.Default()
	cfg.NumBeams = 2
	cfg.MaxNewTokens = new(3)
	cfg.EOSTokenID = []int32{3}
	cfg.LengthPenalty = 0 // rank by log-probability

	res, err := beam.Search(context.Background(), backend, [][]int32{{0}}, beam.Options{
		Rule:   beam.Narrowing,
		Config: cfg,
		Progress: func(p beam.Progress) {
			fmt.Printf("step %d: best %v (%.4f)\n", p.Step, p.Tokens, p.Score)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range res.Hypotheses[0] {
		fmt.Printf("%v p=%.3f finished=%v\n", h.Tokens, math.Exp(h.LogProb), h.Finished)
	}
	// Output:
	// step 1: best [1] (-0.6931)
	// step 2: best [1 3] (-1.2040)
	// step 3: best [1 3] (-1.2040)
	// [1 3] p=0.300 finished=true
	// [2 1 3] p=0.108 finished=true
}
