package parity

import (
	"fmt"
	"slices"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/logits"
)

// CheckProcessors runs one "processors" case through package logits: it parses the generation
// config, builds the pipeline for the case's vocabulary, compares its names with ProcessorNames, then
// processes each row (history = InputIDs, prompt = the first PromptLength tokens, the rest accepted one
// by one so that the incremental state is exercised) and compares with Expected. Values must be
// bit-exact unless the list ends with LogitNormalization (a log-softmax), which gets the README's
// tolerance; the positions of -inf must always match. It returns nil on success, or the first
// difference.
func CheckProcessors(c *ProcessorsCase) error {
	cfg, err := genconfig.Parse(c.GenerationConfig)
	if err != nil {
		return err
	}
	p, err := logits.NewPipeline(cfg, logits.Options{VocabSize: c.VocabSize})
	if err != nil {
		return err
	}
	if err := DiffStrings(p.Names(), c.ProcessorNames); err != nil {
		return fmt.Errorf("processor_names: %w", err)
	}
	if len(c.InputIDs) != len(c.Scores) || len(c.Scores) != len(c.Expected) {
		return fmt.Errorf("malformed case: %d input rows, %d score rows, %d expected rows",
			len(c.InputIDs), len(c.Scores), len(c.Expected))
	}
	exact := !slices.Contains(c.ProcessorNames, "LogitNormalization")
	for b, ids := range c.InputIDs {
		if c.PromptLength > len(ids) {
			return fmt.Errorf("malformed case: prompt_length %d > row length %d", c.PromptLength, len(ids))
		}
		row := p.NewHistory(ids[:c.PromptLength])
		for _, t := range ids[c.PromptLength:] {
			row.Accept(t)
		}
		got := slices.Clone(c.Scores[b])
		if len(got) != c.VocabSize {
			return fmt.Errorf("malformed case: row %d has %d scores, vocab_size is %d", b, len(got), c.VocabSize)
		}
		p.Process(row, got)
		if err := Diff(got, c.Expected[b], exact); err != nil {
			return fmt.Errorf("row %d: %w", b, err)
		}
	}
	return nil
}
