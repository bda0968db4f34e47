package logits

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/testkit/benchrows"
)

// benchHistory returns a prompt of n tokens drawn from the vocabulary.
func benchHistory(n, v int) []int32 {
	rng := rand.New(rand.NewPCG(2, uint64(v)))
	h := make([]int32, n)
	for i := range h {
		h[i] = int32(rng.IntN(v))
	}
	return h
}

// runBench processes fresh copies of the rows with p, and draws a token when draw is set.
func runBench(b *testing.B, p *Pipeline, v int, draw bool) {
	rows := benchrows.Rows(4, v)
	row := p.NewHistory(benchHistory(256, v))
	work := make([]float32, v)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, r := range rows { // warm up the row's scratch buffers: steady state from here
		copy(work, r)
		p.Process(row, work)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	start := cpuTime()
	for b.Loop() {
		copy(work, rows[n%len(rows)])
		n++
		p.Process(row, work)
		if draw {
			if _, ok := p.Sample(row, work, rng.Float64()); !ok {
				b.Fatal("no token drawn")
			}
		}
	}
	reportCPU(b, start)
}

// reportCPU adds the CPU time per operation since start as "cpu-ns/op".
func reportCPU(b *testing.B, start time.Duration) {
	if used := cpuTime() - start; used > 0 {
		b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkDefaultChain is the sampling chain of a typical chat model: repetition penalty 1.1 over
// 256 tokens of history, temperature 0.7, top_k 50, top_p 0.9, then the draw.
func BenchmarkDefaultChain(b *testing.B) {
	for _, v := range benchrows.Vocabularies {
		b.Run(fmt.Sprintf("V=%d", v), func(b *testing.B) {
			cfg := genconfig.Default()
			cfg.DoSample = true
			cfg.RepetitionPenalty = 1.1
			cfg.Temperature = 0.7
			cfg.TopK = 50
			cfg.TopP = 0.9
			p, err := NewPipeline(cfg, Options{VocabSize: v})
			if err != nil {
				b.Fatal(err)
			}
			runBench(b, p, v, true)
		})
	}
}

// BenchmarkGreedy is the greedy choice alone: Argmax of a fresh row.
func BenchmarkGreedy(b *testing.B) {
	for _, v := range benchrows.Vocabularies {
		b.Run(fmt.Sprintf("V=%d", v), func(b *testing.B) {
			rows := benchrows.Rows(4, v)
			work := make([]float32, v)
			b.ReportAllocs()
			n := 0
			start := cpuTime()
			for b.Loop() {
				copy(work, rows[n%len(rows)])
				n++
				Argmax(work)
			}
			reportCPU(b, start)
		})
	}
}

// BenchmarkCopy is the cost of the fresh copy that every other benchmark includes.
func BenchmarkCopy(b *testing.B) {
	for _, v := range benchrows.Vocabularies {
		b.Run(fmt.Sprintf("V=%d", v), func(b *testing.B) {
			rows := benchrows.Rows(4, v)
			work := make([]float32, v)
			n := 0
			start := cpuTime()
			for b.Loop() {
				copy(work, rows[n%len(rows)])
				n++
			}
			reportCPU(b, start)
		})
	}
}

// BenchmarkProcessor runs each processor alone.
func BenchmarkProcessor(b *testing.B) {
	eos := []int32{2}
	procs := []struct {
		name string
		make func(v int) (Processor, error)
	}{
		{"SequenceBias", func(v int) (Processor, error) {
			return NewSequenceBias([]genconfig.SequenceBias{{Tokens: []int32{5}, Bias: 1.5}, {Tokens: []int32{7, 9, 11}, Bias: -2}}, v)
		}},
		{"EncoderRepetitionPenalty", func(int) (Processor, error) { return NewEncoderRepetitionPenalty(1.1) }},
		{"RepetitionPenalty", func(int) (Processor, error) { return NewRepetitionPenalty(1.1) }},
		{"NoRepeatNGram", func(int) (Processor, error) { return NewNoRepeatNGram(3) }},
		{"EncoderNoRepeatNGram", func(int) (Processor, error) { return NewEncoderNoRepeatNGram(3) }},
		{"NoBadWords", func(v int) (Processor, error) { return NewNoBadWords([][]int32{{5}, {7, 9}}, eos, v) }},
		{"MinLength", func(int) (Processor, error) { return NewMinLength(1000, eos) }},
		{"MinNewTokensLength", func(int) (Processor, error) { return NewMinNewTokensLength(10, eos) }},
		{"ForcedBOS", func(v int) (Processor, error) { return NewForcedBOS(1, v) }},
		{"ForcedEOS", func(v int) (Processor, error) { return NewForcedEOS(258, eos, v) }},
		{"InfNanRemove", func(int) (Processor, error) { return InfNanRemove{}, nil }},
		{"ExponentialDecayLengthPenalty", func(int) (Processor, error) { return NewExponentialDecayLengthPenalty(0, 1.05, eos) }},
		{"SuppressTokens", func(int) (Processor, error) { return NewSuppressTokens([]int32{3, 4, 5}), nil }},
		{"SuppressTokensAtBegin", func(int) (Processor, error) { return NewSuppressTokensAtBegin([]int32{3, 4, 5}, false), nil }},
		{"Temperature", func(int) (Processor, error) { return NewTemperature(0.7) }},
		{"TopK", func(int) (Processor, error) { return NewTopK(50, 1) }},
		{"TopP", func(int) (Processor, error) { return NewTopP(0.9, 1) }},
		{"MinP", func(int) (Processor, error) { return NewMinP(0.05, 1) }},
		{"Typical", func(int) (Processor, error) { return NewTypical(0.9, 1) }},
		{"Epsilon", func(int) (Processor, error) { return NewEpsilon(3e-4, 1) }},
		{"Eta", func(int) (Processor, error) { return NewEta(3e-4, 1) }},
		{"LogitNormalization", func(int) (Processor, error) { return LogitNormalization{}, nil }},
		{"PresenceFrequencyPenalty", func(int) (Processor, error) { return NewPresenceFrequencyPenalty(0.5, 0.5, 64) }},
		{"LogitBias", func(v int) (Processor, error) { return NewLogitBias(map[int32]float32{1: 2, 3: -1}, v) }},
		{"AllowTokens", func(v int) (Processor, error) { return NewAllowTokens([]int32{1, 2, 3, 100}, v) }},
		{"BlockTokens", func(v int) (Processor, error) { return NewBlockTokens([]int32{1, 2, 3, 100}, v) }},
	}
	for _, pc := range procs {
		for _, v := range benchrows.Vocabularies {
			b.Run(fmt.Sprintf("%s/V=%d", pc.name, v), func(b *testing.B) {
				proc, err := pc.make(v)
				if err != nil {
					b.Fatal(err)
				}
				p, err := Chain(v, proc)
				if err != nil {
					b.Fatal(err)
				}
				runBench(b, p, v, false)
			})
		}
	}
}
