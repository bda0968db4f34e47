package llamabackend_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/benchmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
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

// rawLoop is the floor: a loop written directly against the binding that
// evaluates the prompt of every row, then decodes one token per row per step
// and takes the argmax. It returns the tokens chosen after the rows' first
// ones and the time they took, the same window as generateRun, and leaves
// the cache empty.
func rawLoop(b *testing.B, ctx *llamacpp.Context, batch *llamacpp.Batch, prompt []int32, rows int) (int, time.Duration) {
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
	var start time.Time
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
		if step == 0 {
			start = time.Now() // the first tokens came from the prompt's logits
		}
		if step == benchNewTokens-1 {
			break // the last token is chosen, not evaluated
		}
		if err := ctx.Decode(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	d := time.Since(start)
	_ = ctx.ClearCache() // leave the context as a llamabackend.Backend expects it: empty
	return rows * (benchNewTokens - 1), d
}

// generateRun runs reqs through g and returns the tokens chosen after the
// rows' first ones (which come from the prompts' logits) and their time.
func generateRun(b *testing.B, g *generation.Generator, reqs []generation.Request) (int, time.Duration) {
	var start time.Time
	n, tokens := 0, 0
	for ev, err := range g.Stream(context.Background(), reqs) {
		if err != nil {
			b.Fatal(err)
		}
		if ev.Token < 0 {
			continue
		}
		n++
		switch {
		case n == len(reqs):
			start = time.Now()
		case n > len(reqs):
			tokens++
		}
	}
	return tokens, time.Since(start)
}

func greedyRequests(m *llamacpp.Model, rows int) []generation.Request {
	cfg := genconfig.Default()
	n := benchNewTokens
	cfg.MaxNewTokens = &n
	reqs := make([]generation.Request, rows)
	for i := range reqs {
		reqs[i] = generation.Request{Prompt: benchPrompt(m), Config: cfg}
	}
	return reqs
}

// BenchmarkLlamaLoopOverhead alternates the raw loop and greedy generation
// with no processors on one context, run after run, so that drift on the
// machine affects both alike, and reports both throughputs and their ratio
// (generation / raw; the goal is at least 0.98).
func BenchmarkLlamaLoopOverhead(b *testing.B) {
	m := benchmodel.Load(b)
	for _, rows := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			ctx := benchContext(b, m, rows)
			batch, _ := llamacpp.NewBatch(ctx.BatchSize(), 1)
			defer batch.Close()
			lb, err := llamabackend.New(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer lb.Close()
			// No tokenizer: end-of-generation tokens do not stop rows.
			g := generation.NewGenerator(lb, nil)
			reqs := greedyRequests(m, rows)
			prompt := benchPrompt(m)
			var rawN, genN int
			var rawT, genT time.Duration
			for b.Loop() {
				n, d := rawLoop(b, ctx, batch, prompt, rows)
				rawN, rawT = rawN+n, rawT+d
				n, d = generateRun(b, g, reqs)
				genN, genT = genN+n, genT+d
			}
			raw, gen := float64(rawN)/rawT.Seconds(), float64(genN)/genT.Seconds()
			b.ReportMetric(raw, "raw-tokens/s")
			b.ReportMetric(gen, "generation-tokens/s")
			b.ReportMetric(gen/raw, "ratio")
		})
	}
}

// BenchmarkLlamaDecodeLoop is the raw loop alone.
func BenchmarkLlamaDecodeLoop(b *testing.B) {
	m := benchmodel.Load(b)
	for _, rows := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			ctx := benchContext(b, m, rows)
			batch, _ := llamacpp.NewBatch(ctx.BatchSize(), 1)
			defer batch.Close()
			prompt := benchPrompt(m)
			var tokens int
			var d time.Duration
			for b.Loop() {
				n, t := rawLoop(b, ctx, batch, prompt, rows)
				tokens, d = tokens+n, d+t
			}
			b.ReportMetric(float64(tokens)/d.Seconds(), "tokens/s")
		})
	}
}

// BenchmarkLlamaGenerate runs the same work through generation: greedy with
// no processors, and the default sampling chain of a chat model (repetition
// penalty 1.1, top-k 50, top-p 0.9, temperature 0.7), in the window of
// generateRun.
func BenchmarkLlamaGenerate(b *testing.B) {
	m := benchmodel.Load(b)
	greedy := genconfig.Default()
	n := benchNewTokens
	greedy.MaxNewTokens = &n
	greedy.EOSTokenID = nil
	chain := greedy.Clone()
	chain.DoSample, chain.RepetitionPenalty, chain.TopK, chain.TopP, chain.Temperature = true, 1.1, 50, 0.9, 0.7
	for _, c := range []struct {
		name string
		cfg  *genconfig.Config
	}{{"greedy", greedy}, {"sampling", chain}} {
		for _, rows := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/rows=%d", c.name, rows), func(b *testing.B) {
				ctx := benchContext(b, m, rows)
				lb, err := llamabackend.New(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer lb.Close()
				// No tokenizer: the model's end-of-generation tokens do not
				// stop rows, so every row makes benchNewTokens tokens.
				g := generation.NewGenerator(lb, nil)
				prompt := benchPrompt(m)
				reqs := make([]generation.Request, rows)
				for i := range reqs {
					reqs[i] = generation.Request{Prompt: prompt, Config: c.cfg, Seed: uint64(i)}
				}
				var gen time.Duration
				tokens := 0
				for b.Loop() {
					n, d := generateRun(b, g, reqs)
					tokens, gen = tokens+n, gen+d
				}
				b.ReportMetric(float64(tokens)/gen.Seconds(), "tokens/s")
			})
		}
	}
}
