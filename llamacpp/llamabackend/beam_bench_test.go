package llamabackend_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/testkit/benchmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/llamaloop/llamaloop/logits"
)

const llamaBenchNew = 32

func llamaBenchPrompts(m *llamacpp.Model, n int) [][]int32 {
	texts := []string{"The model reads a prompt", "We want to go home and", "A token is a piece of text", "Beam search keeps the best"}
	out := make([][]int32, n)
	for i := range out {
		out[i], _ = m.Vocab().Tokenize(texts[i%len(texts)], true, false)
	}
	return out
}

// BenchmarkLlamaBeam runs beam search on llama.cpp beside plain batched
// decoding of as many independent sequences (prompts × beams, one token per
// sequence per step, the same unified-cache context settings), and reports
// both throughputs in beam-steps (tokens evaluated after the prompts) per
// second, their ratio, the time spent reordering per search, and the prompt
// tokens evaluated per prompt.
func BenchmarkLlamaBeam(b *testing.B) {
	m := benchmodel.Load(b)
	for _, prompts := range []int{1, 4} {
		for _, beams := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("prompts=%d/beams=%d", prompts, beams), func(b *testing.B) {
				seqs := prompts * beams
				ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: seqs*64 + 256, Sequences: seqs, UnifiedKV: true,
					Threads: benchmodel.Threads()})
				if err != nil {
					b.Fatal(err)
				}
				defer ctx.Close()
				lb, err := llamabackend.New(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer lb.Close()
				ps := llamaBenchPrompts(m, prompts)
				promptTokens := 0
				for _, p := range ps {
					promptTokens += len(p)
				}
				cfg := genconfig.Default()
				n := llamaBenchNew
				cfg.NumBeams, cfg.MaxNewTokens = beams, &n
				// No eos (an empty list: nil would take the model's):
				// every search runs llamaBenchNew steps.
				cfg.EOSTokenID = []int32{}

				var searchTime, decodeTime, reorder time.Duration
				searchSteps, decodeSteps, promptEvaluated := 0, 0, 0
				for b.Loop() {
					start := time.Now()
					res, err := beam.Search(context.Background(), lb, ps, beam.Options{Config: cfg})
					if err != nil {
						b.Fatal(err)
					}
					searchTime += time.Since(start)
					searchSteps += res.Stats.Tokens - promptTokens
					promptEvaluated += promptTokens
					reorder += res.Stats.Reorder

					start = time.Now()
					decodeSteps += batchedDecode(b, lb, ps, beams)
					decodeTime += time.Since(start)
				}
				beamRate := float64(searchSteps) / searchTime.Seconds()
				decodeRate := float64(decodeSteps) / decodeTime.Seconds()
				b.ReportMetric(beamRate, "beam-steps/s")
				b.ReportMetric(decodeRate, "batched-tokens/s")
				b.ReportMetric(beamRate/decodeRate, "ratio")
				b.ReportMetric(float64(reorder.Microseconds())/float64(b.N), "reorder-µs/search")
				b.ReportMetric(float64(promptEvaluated)/float64(b.N*promptTokens), "prompt-evals/prompt")
			})
		}
	}
}

// batchedDecode evaluates each prompt once and shares it with its other
// sequences by sequence copy (as the search does), then decodes
// llamaBenchNew-1 greedy tokens for beams independent sequences per prompt,
// all in one batch per step; it returns the tokens decoded after the
// prompts. Its prompt evaluation is outside the count but inside the time,
// as the search's is.
func batchedDecode(b *testing.B, lb *llamabackend.Backend, prompts [][]int32, beams int) int {
	feeds := make([]backend.Feed, 0, len(prompts)*beams)
	for i, p := range prompts {
		feeds = append(feeds, backend.Feed{Slot: i * beams, Tokens: p})
	}
	if err := lb.Eval(context.Background(), feeds); err != nil {
		b.Fatal(err)
	}
	first := make([]int32, len(prompts))
	for i := range prompts {
		first[i] = int32(logits.Argmax(lb.Logits(i)))
	}
	feeds = feeds[:0]
	for i := range prompts {
		for k := range beams {
			if k > 0 {
				if err := lb.Copy(i*beams+k, i*beams); err != nil {
					b.Fatal(err)
				}
			}
			feeds = append(feeds, backend.Feed{Slot: i*beams + k, Tokens: first[i : i+1]})
		}
	}
	if err := lb.Eval(context.Background(), feeds); err != nil {
		b.Fatal(err)
	}
	next := make([]int32, len(feeds))
	steps := len(feeds)
	for step := 1; step < llamaBenchNew-1; step++ {
		for i := range feeds {
			next[i] = int32(logits.Argmax(lb.Logits(i)))
			feeds[i].Tokens = next[i : i+1]
		}
		if err := lb.Eval(context.Background(), feeds); err != nil {
			b.Fatal(err)
		}
		steps += len(feeds)
	}
	for i := range feeds {
		_ = lb.Clear(feeds[i].Slot)
	}
	return steps
}
