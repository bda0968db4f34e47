package beam_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
)

// benchModel returns precomputed rows chosen by the last token and the
// length, so that the benchmark measures the search, not the model.
func benchModel(vocab int) backend.ModelFunc {
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([][]float32, 64)
	for i := range rows {
		rows[i] = make([]float32, vocab)
		for j := range rows[i] {
			rows[i][j] = float32(r.NormFloat64() * 3)
		}
	}
	return func(h []int32) ([]float32, error) {
		return rows[(int(h[len(h)-1])*31+len(h))%len(rows)], nil
	}
}

// BenchmarkSearch runs 32 new tokens per prompt (no eos, so every beam
// lives to the end) over a 4096-token vocabulary.
func BenchmarkSearch(b *testing.B) {
	const vocab, maxNew = 4096, 32
	for _, rule := range []beam.Rule{beam.Transformers, beam.Narrowing} {
		for _, prompts := range []int{1, 4} {
			for _, k := range []int{1, 2, 4, 8} {
				b.Run(fmt.Sprintf("rule=%v/prompts=%d/beams=%d", rule, prompts, k), func(b *testing.B) {
					ps := make([][]int32, prompts)
					for i := range ps {
						ps[i] = []int32{int32(i), 7, 9, 11}
					}
					b0 := backend.NewMemoryBackend(vocab, prompts*k, benchModel(vocab))
					cfg := genconfig.Default()
					cfg.NumBeams = k
					cfg.MaxNewTokens = &[]int{maxNew}[0]
					opts := beam.Options{Rule: rule, Config: cfg}
					ctx := context.Background()
					var st beam.Stats
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						res, err := beam.Search(ctx, b0, ps, opts)
						if err != nil {
							b.Fatal(err)
						}
						st.Reorder += res.Stats.Reorder
						st.Copies += res.Stats.Copies
						st.Tokens += res.Stats.Tokens
					}
					n := float64(b.N)
					b.ReportMetric(float64(st.Reorder.Nanoseconds())/n, "reorder-ns/op")
					b.ReportMetric(float64(st.Copies)/n, "copies/op")
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(st.Tokens), "ns/token")
				})
			}
		}
	}
}
