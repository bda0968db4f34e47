package generation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/benchmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/logits"
)

const benchNewTokens = 32

// benchContext makes a context for rows sequences of a short prompt plus
// benchNewTokens tokens, with llama.cpp's default cache settings and
// benchmodel.Threads() threads.
func benchContext(b *testing.B, m *llamacpp.Model, rows int) *llamacpp.Context {
	b.Helper()
	ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: rows * 256, Sequences: rows, Threads: benchmodel.Threads()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ctx.Close() })
	return ctx
}

func benchPrompt(m *llamacpp.Model) []int32 {
	p, _ := m.Vocab().Tokenize("The model reads a prompt and returns new logits for every token", true, false)
	return p
}

// BenchmarkLlamaDecodeLoop is the floor: a loop written directly against the
// binding that decodes one token per row per step and takes the argmax.
// Tokens/s counts generated tokens only (the prompt is evaluated first, off
// the clock).
func BenchmarkLlamaDecodeLoop(b *testing.B) {
	m := benchmodel.Load(b)
	for _, rows := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			ctx := benchContext(b, m, rows)
			batch, _ := llamacpp.NewBatch(ctx.BatchSize(), 1)
			defer batch.Close()
			prompt := benchPrompt(m)
			var gen time.Duration
			for b.Loop() {
				_ = ctx.ClearCache()
				batch.Clear()
				for r := range rows {
					for i, t := range prompt {
						_, _ = batch.Add(t, int32(i), int32(r), i == len(prompt)-1)
					}
				}
				if err := ctx.Decode(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				last := make([]int, rows)
				for r := range rows {
					last[r] = (r+1)*len(prompt) - 1
				}
				for step := range benchNewTokens {
					batch.Clear()
					for r := range rows {
						row, _ := ctx.Logits(last[r])
						last[r], _ = batch.Add(int32(logits.Argmax(row)), int32(len(prompt)+step), int32(r), true)
					}
					if step == benchNewTokens-1 {
						break // the last token is chosen, not evaluated
					}
					if err := ctx.Decode(context.Background(), batch); err != nil {
						b.Fatal(err)
					}
				}
				gen += time.Since(start)
			}
			b.ReportMetric(float64(b.N*rows*benchNewTokens)/gen.Seconds(), "tokens/s")
		})
	}
}

// BenchmarkLlamaGenerate runs the same work through generation: greedy with
// no processors, and the default sampling chain of a chat model (repetition
// penalty 1.1, top-k 50, top-p 0.9, temperature 0.7). Tokens/s counts
// generated tokens over the time after the prompt step.
func BenchmarkLlamaGenerate(b *testing.B) {
	m := benchmodel.Load(b)
	greedy := logits.DefaultGenerationConfig()
	n := benchNewTokens
	greedy.MaxNewTokens = &n
	greedy.EOSTokenID = nil
	chain := greedy.Clone()
	chain.DoSample, chain.RepetitionPenalty, chain.TopK, chain.TopP, chain.Temperature = true, 1.1, 50, 0.9, 0.7
	for _, c := range []struct {
		name string
		cfg  *logits.GenerationConfig
	}{{"greedy", greedy}, {"sampling", chain}} {
		for _, rows := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/rows=%d", c.name, rows), func(b *testing.B) {
				ctx := benchContext(b, m, rows)
				backend, err := generation.NewLlamaBackend(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer backend.Close()
				// No tokenizer: the model's end-of-generation tokens do not
				// stop rows, so every row makes benchNewTokens tokens.
				g := generation.NewGenerator(backend, nil)
				prompt := benchPrompt(m)
				reqs := make([]generation.Request, rows)
				for i := range reqs {
					reqs[i] = generation.Request{Prompt: prompt, Config: c.cfg, Seed: uint64(i)}
				}
				var gen time.Duration
				tokens := 0
				for b.Loop() {
					var start time.Time
					for ev, err := range g.Stream(context.Background(), reqs) {
						if err != nil {
							b.Fatal(err)
						}
						if start.IsZero() {
							start = time.Now() // after the prompt step
							continue
						}
						if ev.Token >= 0 {
							tokens++
						}
					}
					gen += time.Since(start)
				}
				// The first event of each run (one row's first token) came
				// before the clock started; count the rest.
				b.ReportMetric(float64(tokens)/gen.Seconds(), "tokens/s")
			})
		}
	}
}
