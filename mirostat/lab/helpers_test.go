package lab

import (
	"math"
	"testing"

	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/stretchr/testify/require"
)

// p = (0.5, 0.25, 0.125, 0.125): surprises (1, 2, 3, 3) bits, entropy
// 0.5 + 0.5 + 0.375 + 0.375 = 1.75 bits.
var dyadic = []float64{0.5, 0.25, 0.125, 0.125}

// logitsOf returns the logits ln p of a probability row.
func logitsOf(p ...float64) []float32 {
	out := make([]float32, len(p))
	for i, x := range p {
		out[i] = float32(math.Log(x))
	}
	return out
}

// zipfRow returns logits of the Zipf distribution p_i ∝ i^-s, i = 1..n, with
// the ranks scattered over the ids so that the row is not pre-sorted.
func zipfRow(n int, s float64) []float32 {
	row := make([]float32, n)
	for i := range row {
		rank := (i*7919)%n + 1 // 7919 is prime: a permutation for n not a multiple
		row[i] = float32(-s * math.Log(float64(rank)))
	}
	return row
}

func mustNew(t testing.TB, cfg mirostat.Config) *mirostat.Sampler {
	t.Helper()
	s, err := mirostat.New(cfg)
	require.NoError(t, err)
	return s
}
