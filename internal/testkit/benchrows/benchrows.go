// Package benchrows makes the logits rows that the benchmarks of token choice share, so that
// the figures of packages logits, mirostat and internal/testkit/nativesampler are taken on the same rows.
package benchrows

import "math/rand/v2"

// Vocabularies are the vocabulary sizes the benchmarks report: Llama 2's, Llama 3's and Gemma 3's.
var Vocabularies = []int{32000, 128256, 262144}

// Rows returns n rows of v logits shaped like a language model's: normal noise of standard
// deviation 2 with 20 peaks raised by 8 to 14, the same for the same n and v.
func Rows(n, v int) [][]float32 {
	rng := rand.New(rand.NewPCG(1, uint64(v)))
	rows := make([][]float32, n)
	for r := range rows {
		row := make([]float32, v)
		for i := range row {
			row[i] = float32(rng.NormFloat64() * 2)
		}
		for range 20 {
			row[rng.IntN(v)] += float32(8 + rng.Float64()*6)
		}
		rows[r] = row
	}
	return rows
}
