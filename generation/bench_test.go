package generation

import (
	"context"
	"fmt"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
)

// cheapModel returns one of 8 precomputed rows, chosen by the last token,
// without allocating, so that the loop's own cost dominates.
func cheapModel(vocab int) backend.ModelFunc {
	var rows [8][]float32
	for r := range rows {
		rows[r] = make([]float32, vocab)
		for i := range rows[r] {
			rows[r][i] = float32((i*7+r*13)%17) / 4
		}
	}
	return func(history []int32) ([]float32, error) {
		return rows[history[len(history)-1]%8], nil
	}
}

// BenchmarkLoop measures one step of the loop per op: every row of the
// batch takes one token. ns/token divides by the batch size. The setup of
// the call (one per benchmark run) is amortized over b.N steps, so
// allocs/op shows the steady state.
func BenchmarkLoop(b *testing.B) {
	const vocab = 256
	greedy := genconfig.Default()
	sampling := genconfig.Default()
	sampling.DoSample = true // transformers' default chain: top-k 50
	for _, mode := range []struct {
		name string
		cfg  *genconfig.Config
	}{{"greedy", greedy}, {"sample", sampling}} {
		for _, batch := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/batch=%d", mode.name, batch), func(b *testing.B) {
				cfg := mode.cfg.Clone()
				cfg.MaxNewTokens = intp(b.N)
				reqs := make([]Request, batch)
				for i := range reqs {
					reqs[i] = Request{Prompt: []int32{int32(i)}, Config: cfg, Seed: uint64(i)}
				}
				g := NewGenerator(backend.NewMemoryBackend(vocab, batch, cheapModel(vocab)), nil)
				b.ReportAllocs()
				b.ResetTimer()
				for range g.Stream(context.Background(), reqs) {
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/token")
			})
		}
	}
}
