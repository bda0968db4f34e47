package parity

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ProcessorsCase is one case of a "processors" file: the processor list transformers builds for
// GenerationConfig, applied to one step (Scores) of rows whose histories are InputIDs.
type ProcessorsCase struct {
	ID               string          `json:"id"`
	Scenario         string          `json:"scenario"`
	GenerationConfig json.RawMessage `json:"generation_config"`
	VocabSize        int             `json:"vocab_size"`
	PromptLength     int             `json:"prompt_length"`
	InputIDs         [][]int32       `json:"input_ids"`
	Scores           Matrix          `json:"scores"`
	ProcessorNames   []string        `json:"processor_names"`
	Expected         Matrix          `json:"expected"`
}

// BeamCase is one case of a "beam" file: beam search (or greedy when num_beams is 1) over a toy model
// given as LogitsBySequence.
type BeamCase struct {
	ID               string            `json:"id"`
	GenerationConfig json.RawMessage   `json:"generation_config"`
	VocabSize        int               `json:"vocab_size"`
	Prompts          [][]int32         `json:"prompts"`
	LogitsBySequence map[string]Vector `json:"logits_by_sequence"`
	Expected         BeamExpected      `json:"expected"`
	Info             json.RawMessage   `json:"info"`
}

// BeamExpected is the generate() output of a beam case. SequencesScores and BeamIndices are nil when
// num_beams is 1.
type BeamExpected struct {
	Sequences        [][]int32 `json:"sequences"`
	NewTokens        [][]int32 `json:"new_tokens"`
	SequencesScores  Vector    `json:"sequences_scores"`
	BeamIndices      [][]int32 `json:"beam_indices"`
	Scores           Tensor3   `json:"scores"`
	TransitionScores Matrix    `json:"transition_scores"`
}

// GreedyCase is one case of a "greedy_logprobs" file: greedy decoding with processors over a toy
// model, with per-step scores and normalized transition scores.
type GreedyCase struct {
	ID               string            `json:"id"`
	GenerationConfig json.RawMessage   `json:"generation_config"`
	VocabSize        int               `json:"vocab_size"`
	Prompts          [][]int32         `json:"prompts"`
	LogitsBySequence map[string]Vector `json:"logits_by_sequence"`
	Expected         GreedyExpected    `json:"expected"`
}

// GreedyExpected is the generate() output of a greedy case.
type GreedyExpected struct {
	Sequences        [][]int32 `json:"sequences"`
	NewTokens        [][]int32 `json:"new_tokens"`
	Scores           Tensor3   `json:"scores"`
	TransitionScores Matrix    `json:"transition_scores"`
}

// SequenceKey is the key of a sequence in logits_by_sequence: its ids joined by commas.
func SequenceKey(seq []int32) string {
	var b strings.Builder
	for i, t := range seq {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(t)))
	}
	return b.String()
}

// ToyModel answers model queries from a logits_by_sequence table.
type ToyModel map[string]Vector

// Logits returns the logits of the next token after seq; a missing key means the caller fed the
// model a sequence transformers never fed it (its search diverged).
func (m ToyModel) Logits(seq []int32) ([]float32, error) {
	v, ok := m[SequenceKey(seq)]
	if !ok {
		return nil, fmt.Errorf("the toy model has no logits for sequence [%s]: the search diverged from transformers", SequenceKey(seq))
	}
	return v, nil
}

// DecodeCase decodes one raw case into T (ProcessorsCase, BeamCase or GreedyCase).
func DecodeCase[T any](raw json.RawMessage) (*T, error) {
	var c T
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("parity: decoding case %q: %w", CaseID(raw), err)
	}
	return &c, nil
}
