// Package greedycheck replays the greedy_logprobs parity vectors of
// transformers (see internal/parity/testdata/README.md) through the
// decoding loop of package generation. The test of package generation and
// internal/cmd/parity both call it, so the replay is written once.
package greedycheck

import (
	"context"
	"errors"
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/parity"
	"github.com/llamaloop/llamaloop/logits"
)

// ReplayGreedy runs c through generation.Generator over a MemoryBackend
// that answers each model query from c's logits_by_sequence, and compares
// everything transformers reported: new tokens, sequences, the processed
// scores of every step and the transition scores. It returns nil when all
// match (tokens exactly, floats within the README's tolerance, -inf where
// -inf), otherwise an error describing the first difference.
//
// transformers keeps a finished row in the batch: it appends pad tokens
// (pad_token_id, default eos[0]), still queries the model and processes its
// scores until the whole batch stops. The loop lets a finished row leave
// instead. For that padded tail the replay continues the row itself, feeding
// the pad tokens to the same toy model and to a pipeline built from the same
// config (logits.NewPipeline, as the loop builds it), and compares those
// values too.
func ReplayGreedy(c *parity.GreedyCase) error {
	cfg, err := genconfig.Parse(c.GenerationConfig)
	if err != nil {
		return fmt.Errorf("generation_config: %w", err)
	}
	model := parity.ToyModel(c.LogitsBySequence).Logits
	backend := backend.NewMemoryBackend(c.VocabSize, len(c.Prompts), model)
	scores := make([][][]float32, len(c.Prompts)) // [row][step][V]
	reqs := make([]generation.Request, len(c.Prompts))
	for b, prompt := range c.Prompts {
		reqs[b] = generation.Request{
			Prompt:   prompt,
			Config:   cfg,
			Logprobs: true,
			ObserveScores: func(s []float32) {
				scores[b] = append(scores[b], append([]float32(nil), s...))
			},
		}
	}
	results, err := generation.NewGenerator(backend, nil).Generate(context.Background(), reqs)
	if err != nil {
		return err
	}

	steps := 0
	for _, r := range results {
		steps = max(steps, len(r.Tokens))
	}
	tokens := make([][]int32, len(c.Prompts))
	transition := make([][]float32, len(c.Prompts))
	for b, r := range results {
		if r.Finish != generation.FinishEOS && r.Finish != generation.FinishLength {
			return fmt.Errorf("row %d finished with %q (%v)", b, r.Finish, r.Err)
		}
		if len(r.Logprobs) != len(r.Tokens) || len(scores[b]) != len(r.Tokens) {
			return fmt.Errorf("row %d: %d tokens, %d logprobs, %d observed scores", b, len(r.Tokens), len(r.Logprobs), len(scores[b]))
		}
		tokens[b], transition[b] = r.Tokens, r.Logprobs
		if len(r.Tokens) < steps {
			if r.Finish != generation.FinishEOS {
				return fmt.Errorf("row %d stopped after %d of %d steps with %q", b, len(r.Tokens), steps, r.Finish)
			}
			if err := padTail(c, cfg, b, steps, model, &tokens[b], &scores[b], &transition[b]); err != nil {
				return fmt.Errorf("row %d, padded tail: %w", b, err)
			}
		}
	}
	return compare(c, tokens, scores, transition)
}

// padTail continues row b as transformers does once it has finished: each
// step appends the pad token, with the scores the model and processors give
// the padded history and the log-probability of the pad under them.
func padTail(c *parity.GreedyCase, cfg *genconfig.Config, b, steps int, model backend.ModelFunc,
	tokens *[]int32, scores *[][]float32, transition *[]float32) error {
	pad, ok := cfg.PadToken()
	if !ok {
		return errors.New("no pad token (no pad_token_id and no eos_token_id)")
	}
	pipe, err := logits.NewPipeline(cfg, logits.Options{VocabSize: c.VocabSize})
	if err != nil {
		return err
	}
	row := pipe.NewHistory(c.Prompts[b])
	for _, t := range *tokens {
		row.Accept(t)
	}
	logprobs := make([]float32, c.VocabSize)
	for len(*tokens) < steps {
		logitsRow, err := model(row.Tokens())
		if err != nil {
			return err
		}
		s := append([]float32(nil), logitsRow...)
		pipe.Process(row, s)
		logits.LogSoftmax(logprobs, s)
		*scores = append(*scores, s)
		*tokens = append(*tokens, pad)
		*transition = append(*transition, logprobs[pad])
		row.Accept(pad)
	}
	return nil
}

func compare(c *parity.GreedyCase, tokens [][]int32, scores [][][]float32, transition [][]float32) error {
	want := &c.Expected
	if err := parity.DiffInts(len32(tokens), len32(want.NewTokens)); err != nil {
		return fmt.Errorf("rows: %w", err)
	}
	for b := range tokens {
		if err := parity.DiffInts(tokens[b], want.NewTokens[b]); err != nil {
			return fmt.Errorf("row %d new tokens: %w", b, err)
		}
		seq := append(append([]int32(nil), c.Prompts[b]...), tokens[b]...)
		if err := parity.DiffInts(seq, want.Sequences[b]); err != nil {
			return fmt.Errorf("row %d sequence: %w", b, err)
		}
	}
	if err := parity.DiffMatrix(transition, toMatrix(want.TransitionScores), false); err != nil {
		return fmt.Errorf("transition scores: %w", err)
	}
	if len(want.Scores) != len(tokens[0]) {
		return fmt.Errorf("%d steps, want %d", len(tokens[0]), len(want.Scores))
	}
	for t, step := range want.Scores {
		got := make([][]float32, len(scores))
		for b := range scores {
			got[b] = scores[b][t]
		}
		if err := parity.DiffMatrix(got, toMatrix(step), false); err != nil {
			return fmt.Errorf("scores of step %d: %w", t, err)
		}
	}
	return nil
}

func toMatrix(m parity.Matrix) [][]float32 {
	out := make([][]float32, len(m))
	for i, v := range m {
		out[i] = v
	}
	return out
}

func len32(rows [][]int32) []int {
	out := make([]int, len(rows))
	for i, r := range rows {
		out[i] = len(r)
	}
	return out
}
