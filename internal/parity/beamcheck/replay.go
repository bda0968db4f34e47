// Package beamcheck replays transformers' beam-search parity vectors
// (internal/parity/testdata/beam.json) through package beam over the in-memory backend.
// It is the one implementation of the replay, used by beam's tests and by
// internal/cmd/parity; it is internal because only those two need it.
package beamcheck

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/parity"
)

// Run decodes one raw case of kind "beam", replays it and returns nil, or
// the first difference from transformers' outputs.
func Run(raw json.RawMessage) error {
	c, err := parity.DecodeCase[parity.BeamCase](raw)
	if err != nil {
		return err
	}
	return Replay(c)
}

// Replay searches the case's prompts with its config (the Transformers
// rule) over its toy model, on a memory backend with a slot per beam of
// every prompt. Sequences and beam indices must match exactly;
// sequences_scores, transition scores and the per-step scores must match
// within the README's tolerance (rows of prompts whose search had ended are
// not evaluated, so not compared). Every slot must be empty afterwards.
func Replay(c *parity.BeamCase) error {
	cfg, err := genconfig.Parse(c.GenerationConfig)
	if err != nil {
		return fmt.Errorf("generation_config: %w", err)
	}
	model := parity.ToyModel(c.LogitsBySequence)
	slots := len(c.Prompts) * max(cfg.NumBeams, 1)
	backend := backend.NewMemoryBackend(c.VocabSize, slots, model.Logits)
	res, err := beam.Search(context.Background(), backend, c.Prompts, beam.Options{Config: cfg, OutputScores: true})
	if err != nil {
		return err
	}
	for i := range slots {
		if len(backend.History(i)) != 0 {
			return fmt.Errorf("slot %d not cleared after the search", i)
		}
	}
	return compare(res, &c.Expected)
}

func compare(res *beam.Result, want *parity.BeamExpected) error {
	if err := diffRows(res.Sequences, want.Sequences); err != nil {
		return fmt.Errorf("sequences: %w", err)
	}
	if (want.BeamIndices == nil) != (res.BeamIndices == nil) {
		return fmt.Errorf("beam_indices: got %v, want %v", res.BeamIndices, want.BeamIndices)
	}
	if err := diffRows(res.BeamIndices, want.BeamIndices); err != nil {
		return fmt.Errorf("beam_indices: %w", err)
	}
	if (want.SequencesScores == nil) != (res.SequencesScores == nil) {
		return fmt.Errorf("sequences_scores: got %v, want %v", res.SequencesScores, want.SequencesScores)
	}
	if err := parity.Diff(res.SequencesScores, want.SequencesScores, false); err != nil {
		return fmt.Errorf("sequences_scores: %w", err)
	}
	wantT := make([][]float32, len(want.TransitionScores))
	for i, r := range want.TransitionScores {
		wantT[i] = r
	}
	if err := parity.DiffMatrix(res.TransitionScores, wantT, false); err != nil {
		return fmt.Errorf("transition_scores: %w", err)
	}
	if len(res.Scores) != len(want.Scores) {
		return fmt.Errorf("scores: %d steps, want %d", len(res.Scores), len(want.Scores))
	}
	for t, step := range want.Scores {
		if len(res.Scores[t]) != len(step) {
			return fmt.Errorf("scores[%d]: %d rows, want %d", t, len(res.Scores[t]), len(step))
		}
		for r, row := range step {
			if res.Scores[t][r] == nil {
				continue
			}
			if err := parity.Diff(res.Scores[t][r], row, false); err != nil {
				return fmt.Errorf("scores[%d] row %d: %w", t, r, err)
			}
		}
	}
	return nil
}

func diffRows(got, want [][]int32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if err := parity.DiffInts(got[i], want[i]); err != nil {
			return fmt.Errorf("row %d: %w", i, err)
		}
	}
	return nil
}
