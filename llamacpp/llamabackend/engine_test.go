package llamabackend_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/benchmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/stretchr/testify/require"
)

// Requests of different prompt lengths and settings, submitted to a running
// engine from many goroutines (more requests than sequences, prompts in
// chunks of 5 tokens, llama_decode batches of 16), give on llama.cpp with an
// f32 cache exactly the tokens each gives alone through Generate.
func TestLlamaEngineEqualsAlone(t *testing.T) {
	m := llamaModel(t, "tiny")
	texts := []string{"Hello", "The model said: llama loop is a Go text generator that", "We want to", "a", "Go", "The model reads a prompt"}
	reqs := make([]generation.Request, len(texts))
	for i, s := range texts {
		cfg := greedyConfig(12 + 3*i)
		if i%2 == 1 {
			cfg = sampleConfig(12 + 3*i)
		}
		reqs[i] = generation.Request{Text: s, Config: cfg, Seed: uint64(100 + i), Logprobs: i == 0}
	}
	gen, _ := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 1})
	alone := make([]generation.Result, len(reqs))
	for i := range reqs {
		res, err := gen.Generate(context.Background(), reqs[i:i+1])
		require.NoError(t, err)
		alone[i] = res[0]
	}

	_, b := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 2048, Sequences: 4, BatchSize: 16})
	e, err := generation.NewEngine(b, llamabackend.Tokenizer{Vocab: m.Vocab()}, generation.EngineOptions{PromptChunk: 5})
	require.NoError(t, err)
	got, err := e.Generate(context.Background(), reqs)
	require.NoError(t, err)
	require.NoError(t, e.Close())
	// Tokens, text and finish are exact; a log-probability differs in its
	// last bits, as llama.cpp's kernels sum in another order for another
	// batch shape.
	for i := range reqs {
		require.NotEmpty(t, got[i].Tokens, "request %d", i)
		require.Equal(t, alone[i].Tokens, got[i].Tokens, "request %d", i)
		require.Equal(t, alone[i].Text, got[i].Text, "request %d", i)
		require.Equal(t, alone[i].Finish, got[i].Finish, "request %d", i)
		require.InDeltaSlice(t, alone[i].Logprobs, got[i].Logprobs, 1e-5, "request %d", i)
	}
	require.Len(t, got[0].Logprobs, len(got[0].Tokens))
	for s := range b.Slots() {
		require.Zero(t, b.Len(s), "slot %d", s)
	}
}

// BenchmarkLlamaEngineOverhead alternates, run after run on one context, a
// batch of greedy requests through Generator.Generate and the same
// requests submitted at once to an Engine from one goroutine each, and
// reports both throughputs (every token of the requests over the whole
// time, prompts included) and their ratio (engine / generate): what the
// running loop, its submissions and its per-request event queues cost.
func BenchmarkLlamaEngineOverhead(b *testing.B) {
	m := benchmodel.Load(b)
	for _, rows := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			lb, err := llamabackend.New(benchContext(b, m, rows))
			if err != nil {
				b.Fatal(err)
			}
			defer lb.Close()
			g := generation.NewGenerator(lb, nil)
			reqs := greedyRequests(m, rows)
			for i := range reqs {
				reqs[i].Config = reqs[i].Config.Clone()
				reqs[i].Config.EOSTokenID = nil
			}
			var genN, engN int
			var genT, engT time.Duration
			for b.Loop() {
				start := time.Now()
				res, err := g.Generate(context.Background(), reqs)
				if err != nil {
					b.Fatal(err)
				}
				genT += time.Since(start)
				for _, r := range res {
					genN += len(r.Tokens)
				}

				start = time.Now()
				e, err := generation.NewEngine(lb, nil, generation.EngineOptions{})
				if err != nil {
					b.Fatal(err)
				}
				res, err = e.Generate(context.Background(), reqs)
				if err != nil {
					b.Fatal(err)
				}
				e.Close()
				engT += time.Since(start)
				for _, r := range res {
					engN += len(r.Tokens)
				}
			}
			gen, eng := float64(genN)/genT.Seconds(), float64(engN)/engT.Seconds()
			b.ReportMetric(gen, "generate-tokens/s")
			b.ReportMetric(eng, "engine-tokens/s")
			b.ReportMetric(eng/gen, "ratio")
		})
	}
}
