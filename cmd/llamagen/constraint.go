package main

import (
	"fmt"

	"github.com/llamaloop/llamaloop/grammar"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/logits"
)

// constraint builds the grammar processor of --grammar, --json-schema or --any-json over the
// model's vocabulary; none when no option is given.
func (o *options) constraint(v *llamacpp.Vocab) ([]logits.Processor, error) {
	var g *grammar.Grammar
	switch {
	case o.grammarFile != "":
		src, err := o.read(o.grammarFile)
		if err != nil {
			return nil, fmt.Errorf("--grammar: %w", err)
		}
		if g, err = grammar.Parse(string(src)); err != nil {
			return nil, fmt.Errorf("--grammar %s: %w", o.grammarFile, err)
		}
	case o.schemaFile != "":
		src, err := o.read(o.schemaFile)
		if err != nil {
			return nil, fmt.Errorf("--json-schema: %w", err)
		}
		if g, err = grammar.FromJSONSchema(src); err != nil {
			return nil, fmt.Errorf("--json-schema %s: %w", o.schemaFile, err)
		}
	case o.anyJSON:
		g = grammar.JSON()
	default:
		return nil, nil
	}
	voc, err := grammar.VocabularyFrom(v, v.Size())
	if err != nil {
		return nil, err
	}
	return []logits.Processor{grammar.NewProcessor(grammar.NewMatcher(g, voc))}, nil
}
