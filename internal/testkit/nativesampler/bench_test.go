package nativesampler_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/testkit/benchrows"
	"github.com/llamaloop/llamaloop/internal/testkit/nativesampler"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/mirostat"
)

// Side-by-side benchmarks: llamaloop's token choice in Go against llama.cpp's
// own samplers, on the same logits rows in the same run. Each iteration
// copies a fresh row for each side (as llama.cpp's llama_sampler_sample
// builds its candidate array from the logits), and reports both costs per
// row and their ratio (ours / llama.cpp's).

// sideBySide times ours and theirs alternately on the same rows.
func sideBySide(b *testing.B, v int, ours, theirs func(row []float32)) {
	rows := benchrows.Rows(4, v)
	work := make([]float32, v)
	var tOurs, tTheirs time.Duration
	copy(work, rows[0]) // warm up: scratch buffers grow once, outside the timing
	ours(work)
	copy(work, rows[0])
	theirs(work)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		row := rows[n%len(rows)]
		n++
		start := time.Now()
		copy(work, row)
		ours(work)
		mid := time.Now()
		copy(work, row)
		theirs(work)
		tOurs += mid.Sub(start)
		tTheirs += time.Since(mid)
	}
	b.ReportMetric(float64(tOurs.Microseconds())/float64(b.N), "llamaloop-µs/row")
	b.ReportMetric(float64(tTheirs.Microseconds())/float64(b.N), "llama.cpp-µs/row")
	b.ReportMetric(float64(tOurs)/float64(tTheirs), "ratio")
}

// BenchmarkSideBySideChain: repetition penalty 1.1 over 256 tokens, top-k 50,
// top-p 0.9, temperature 0.7, then the draw.
func BenchmarkSideBySideChain(b *testing.B) {
	for _, v := range benchrows.Vocabularies {
		b.Run(fmt.Sprintf("V=%d", v), func(b *testing.B) {
			cfg := genconfig.Default()
			cfg.DoSample, cfg.RepetitionPenalty, cfg.TopK, cfg.TopP, cfg.Temperature = true, 1.1, 50, 0.9, 0.7
			p, err := logits.NewPipeline(cfg, logits.Options{VocabSize: v})
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, 6))
			history := make([]int32, 256)
			for i := range history {
				history[i] = int32(rng.IntN(v))
			}
			hist := p.NewHistory(history)
			native, err := nativesampler.NewChain(v, nativesampler.ChainParams{PenaltyLastN: 256, RepeatPenalty: 1.1,
				TopK: 50, TopP: 0.9, Temperature: 0.7, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer native.Close()
			for _, t := range history {
				native.Accept(t)
			}
			sideBySide(b, v, func(w []float32) {
				p.Process(hist, w)
				p.Sample(hist, w, rng.Float64())
			}, func(w []float32) { _, _ = native.Sample(w) })
		})
	}
}

// BenchmarkSideBySideGreedy: the argmax alone.
func BenchmarkSideBySideGreedy(b *testing.B) {
	for _, v := range benchrows.Vocabularies {
		b.Run(fmt.Sprintf("V=%d", v), func(b *testing.B) {
			native, err := nativesampler.NewGreedy(v)
			if err != nil {
				b.Fatal(err)
			}
			defer native.Close()
			sideBySide(b, v, func(w []float32) { logits.Argmax(w) }, func(w []float32) { _, _ = native.Sample(w) })
		})
	}
}

// BenchmarkSideBySideMirostat: Mirostat v1 (m 100) and v2, tau 5, eta 0.1.
func BenchmarkSideBySideMirostat(b *testing.B) {
	for _, version := range []int{1, 2} {
		for _, v := range benchrows.Vocabularies {
			b.Run(fmt.Sprintf("v%d/V=%d", version, v), func(b *testing.B) {
				s, err := mirostat.New(mirostat.Config{Version: mirostat.Version(version), Tau: 5, Eta: 0.1, M: 100})
				if err != nil {
					b.Fatal(err)
				}
				native, err := nativesampler.NewMirostat(v, version, 5, 0.1, 100, 1)
				if err != nil {
					b.Fatal(err)
				}
				defer native.Close()
				rng := rand.New(rand.NewPCG(7, 8))
				sideBySide(b, v, func(w []float32) {
					if _, err := s.SampleLogits(w, rng.Float64()); err != nil {
						b.Fatal(err)
					}
				}, func(w []float32) { _, _ = native.Sample(w) })
			})
		}
	}
}
