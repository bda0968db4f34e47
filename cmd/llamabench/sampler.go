package main

import (
	"context"
	"fmt"
	"time"

	"github.com/llamaloop/llamaloop/internal/testkit/nativesampler"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/mirostat"
)

// samplers measures the cost of choosing one token from a real logits row
// of the model (the next-token row of a random prompt): llamaloop's Go
// code beside llama.cpp's sampler of the same settings, on the same row.
// Both sides start from the raw row for every token, as in generation:
// llamaloop copies it into the scores it processes in place, llama.cpp
// builds its candidate array from it.
func (b *bench) samplers(ctx context.Context) ([]samplerResult, error) {
	p := b.o.promptTokens
	lc, batch, err := b.newSingleContext(fmt.Sprintf("--prompt %d", p), p+256)
	if err != nil {
		return nil, err
	}
	defer lc.Close()
	defer batch.Close()
	prompt := b.randomPrompt(p)
	last, err := decodePrompt(ctx, lc, batch, prompt)
	if err != nil {
		return nil, err
	}
	row, err := lc.CopyLogits(nil, last)
	if err != nil {
		return nil, err
	}

	type side func(n int) (time.Duration, error)
	cases := []struct {
		name      string
		llamaloop func() (side, error)
		llamacpp  func() (*nativesampler.Sampler, error)
	}{
		{"greedy", func() (side, error) { return goGreedy(row), nil },
			func() (*nativesampler.Sampler, error) { return nativesampler.NewGreedy(len(row)) }},
		{"sampling chain", func() (side, error) { return goChain(row, prompt) },
			func() (*nativesampler.Sampler, error) {
				return nativesampler.NewChain(len(row), nativesampler.ChainParams{PenaltyLastN: chainPenaltyLast,
					RepeatPenalty: chainPenalty, TopK: chainTopK, TopP: chainTopP, Temperature: chainTemperature, Seed: 1})
			}},
		{"Mirostat v2", func() (side, error) { return goMirostat(row) },
			func() (*nativesampler.Sampler, error) {
				return nativesampler.NewMirostat(len(row), 2, mirostatTau, mirostatEta, mirostat.DefaultM, 1)
			}},
	}
	var out []samplerResult
	n := b.o.samplerIters
	for _, c := range cases {
		var ours, theirs []float64
		for range b.o.reps {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			f, err := c.llamaloop()
			if err != nil {
				return nil, err
			}
			d, err := f(n)
			if err != nil {
				return nil, err
			}
			ours = append(ours, micros(d, n))
			ns, err := c.llamacpp()
			if err != nil {
				return nil, err
			}
			d, err = nativeRun(ns, row, n)
			ns.Close()
			if err != nil {
				return nil, err
			}
			theirs = append(theirs, micros(d, n))
		}
		out = append(out, samplerResult{Name: c.name, VocabSize: len(row), Llamaloop: newStat(ours), LlamaCpp: newStat(theirs)})
	}
	return out, nil
}

func micros(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n) }

func goGreedy(row []float32) func(int) (time.Duration, error) {
	return func(n int) (time.Duration, error) {
		start := time.Now()
		sink := 0
		for range n {
			sink += logits.Argmax(row)
		}
		_ = sink
		return time.Since(start), nil
	}
}

// goChain times package logits' pipeline for the sampling chain: copy the
// row, process it, draw, accept. The history returns to the prompt every
// chainPenaltyLast tokens so that the penalty sees about as many tokens as
// llama.cpp's window.
func goChain(row []float32, prompt []int32) (func(int) (time.Duration, error), error) {
	pipe, err := logits.NewPipeline(chainConfig(), logits.Options{VocabSize: len(row)})
	if err != nil {
		return nil, err
	}
	scores := make([]float32, len(row))
	initial := pipe.NewHistory(prompt)
	hist := initial.Clone()
	return func(n int) (time.Duration, error) {
		start := time.Now()
		for i := range n {
			if i%chainPenaltyLast == chainPenaltyLast-1 {
				hist.CopyFrom(initial)
			}
			copy(scores, row)
			pipe.Process(hist, scores)
			tok, ok := pipe.Sample(hist, scores, uniform(i))
			if !ok {
				tok = 0
			}
			hist.Accept(int32(tok))
		}
		return time.Since(start), nil
	}, nil
}

func goMirostat(row []float32) (func(int) (time.Duration, error), error) {
	s, err := mirostat.New(*mirostatConfig())
	if err != nil {
		return nil, err
	}
	return func(n int) (time.Duration, error) {
		start := time.Now()
		for i := range n {
			if _, err := s.SampleLogits(row, uniform(i)); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}, nil
}

func nativeRun(ns *nativesampler.Sampler, row []float32, n int) (time.Duration, error) {
	start := time.Now()
	for range n {
		if _, err := ns.Sample(row); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// uniform is a fixed sequence of draws in [0, 1) (the golden-ratio
// sequence), so that every run makes the same choices.
func uniform(i int) float64 {
	const phi = 0.6180339887498949
	x := float64(i+1) * phi
	return x - float64(int(x))
}
