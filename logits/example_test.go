package logits_test

import (
	"fmt"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/logits"
)

// A model's generation_config.json, a caller override, and one sampling step.
func Example() {
	cfg, err := genconfig.Parse([]byte(`{"do_sample": true, "temperature": 0.6, "top_p": 0.9,
		"eos_token_id": [0], "repetition_penalty": 1.2}`))
	if err != nil {
		panic(err)
	}
	if err := cfg.Update([]byte(`{"top_k": 3}`)); err != nil {
		panic(err)
	}
	p, err := logits.NewPipeline(cfg, logits.Options{VocabSize: 6})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Names())

	row := p.NewHistory([]int32{4, 5}) // the prompt
	scores := []float32{1, 2, 0.5, 3, 2.9, 0.1}
	p.Process(row, scores)
	fmt.Printf("%.3f\n", scores)
	token, _ := p.Sample(row, scores, 0.5) // u would come from a seeded generator
	fmt.Println(token)
	row.Accept(int32(token))
	// Output:
	// [RepetitionPenaltyLogitsProcessor TemperatureLogitsWarper TopKLogitsWarper TopPLogitsWarper]
	// [-Inf 3.333 -Inf 5.000 4.028 -Inf]
	// 3
}
