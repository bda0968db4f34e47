package llamabackend_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/testkit/benchmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
)

// BenchmarkBatchInvariant: the cost of ContextParams.BatchInvariant: the
// same prompts (one Eval of rows prompts of 64 tokens) and decoding steps
// (one token per row per Eval) with and without the mode, interleaved per
// row count; b.N counts steps, and prompt-ms reports the prompts' Eval.
func BenchmarkBatchInvariant(b *testing.B) {
	m := benchmodel.Load(b)
	prompt := make([]int32, 64)
	for i := range prompt {
		prompt[i] = int32(100 + 37*i%1000)
	}
	for _, rows := range []int{1, 2, 4, 8} {
		for _, inv := range []bool{false, true} {
			b.Run(fmt.Sprintf("rows=%d/invariant=%v", rows, inv), func(b *testing.B) {
				ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: rows * 512, Sequences: rows,
					Threads: benchmodel.Threads(), BatchInvariant: inv})
				if err != nil {
					b.Fatal(err)
				}
				defer ctx.Close()
				lb, err := llamabackend.New(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer lb.Close()
				feeds := make([]backend.Feed, rows)
				bg := context.Background()
				var promptNs int64
				prompts := 0
				step := 0
				b.ResetTimer()
				for b.Loop() {
					if step%128 == 0 {
						b.StopTimer()
						for r := range rows {
							_ = lb.Clear(r)
							feeds[r] = backend.Feed{Slot: r, Tokens: prompt}
						}
						b.StartTimer()
						t0 := nanotime()
						if err := lb.Eval(bg, feeds); err != nil {
							b.Fatal(err)
						}
						promptNs += nanotime() - t0
						prompts++
					}
					for r := range rows {
						feeds[r] = backend.Feed{Slot: r, Tokens: []int32{int32(200 + step%500)}}
					}
					if err := lb.Eval(bg, feeds); err != nil {
						b.Fatal(err)
					}
					step++
				}
				b.ReportMetric(float64(promptNs)/float64(prompts)/1e6, "prompt-ms")
				b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}

func nanotime() int64 { return time.Now().UnixNano() }
