package replay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/replay"
	"github.com/llamaloop/llamaloop/mirostat"
)

// fastProfile waits next to nothing, so that a benchmark (and its CPU
// profile) measures the Go side of a replayed step alone.
func fastProfile(vocab int) replay.ModelProfile {
	return replay.ModelProfile{Name: "fast", VocabSize: vocab, Steps: []replay.StepTime{{Rows: 1, MS: 1e-6}},
		PromptTokensPerS: 1e12}
}

func chain() *genconfig.Config {
	cfg := genconfig.Default()
	cfg.DoSample = true
	cfg.RepetitionPenalty = 1.1
	cfg.Temperature = 0.8
	cfg.TopK = 40
	cfg.TopP = 0.95
	return cfg
}

// BenchmarkReplayedStep is one token of one row (b.N tokens in one
// request) at the vocabularies of bench-small and bench-1b, by method;
// beam-4 is one step of a 4-beam search. cpu-µs/op is the process's CPU
// time a step (every core's; on Linux), which a busy machine inflates far
// less than the wall time.
func BenchmarkReplayedStep(b *testing.B) {
	for _, vocab := range []int{32000, 128256} {
		b.Run(fmt.Sprintf("vocab=%d", vocab), func(b *testing.B) { benchmarkReplayedStep(b, vocab) })
	}
}

func benchmarkReplayedStep(b *testing.B, vocab int) {
	prompt := []int32{300, 301, 302, 303}
	for _, m := range []struct {
		name string
		cfg  *genconfig.Config
		miro *mirostat.Config
	}{
		{"greedy", genconfig.Default(), nil},
		{"chain", chain(), nil},
		{"mirostat-v2", genconfig.Default(), &mirostat.Config{Version: mirostat.V2, Tau: 5, Eta: 0.1}},
	} {
		b.Run(m.name, func(b *testing.B) {
			rb, err := replay.New(fastProfile(vocab), 1)
			if err != nil {
				b.Fatal(err)
			}
			cfg := m.cfg.Clone()
			n := b.N
			cfg.MaxNewTokens = &n
			cfg.EOSTokenID = nil
			g := generation.NewGenerator(rb, nil)
			b.ReportAllocs()
			b.ResetTimer()
			c := replay.CPUTime()
			for _, err := range g.Stream(context.Background(), []generation.Request{{Prompt: prompt, Config: cfg, Seed: 1, Mirostat: m.miro}}) {
				if err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, c)
		})
	}
	b.Run("beam-4", func(b *testing.B) {
		rb, err := replay.New(fastProfile(vocab), 4)
		if err != nil {
			b.Fatal(err)
		}
		cfg := genconfig.Default()
		n := b.N
		cfg.MaxNewTokens = &n
		cfg.EOSTokenID = nil
		cfg.NumBeams = 4
		b.ReportAllocs()
		b.ResetTimer()
		c := replay.CPUTime()
		if _, err := beam.Search(context.Background(), rb, [][]int32{prompt}, beam.Options{Config: cfg}); err != nil {
			b.Fatal(err)
		}
		reportCPU(b, c)
	})
}

// reportCPU reports the CPU time a step since c, where it is known.
func reportCPU(b *testing.B, c time.Duration) {
	if c >= 0 {
		b.ReportMetric(float64(replay.CPUTime()-c)/1e3/float64(b.N), "cpu-µs/op")
	}
}
