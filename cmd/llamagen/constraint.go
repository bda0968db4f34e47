package main

import (
	"fmt"
	"strings"

	"github.com/llamaloop/llamaloop/grammar"
	"github.com/llamaloop/llamaloop/internal/quote"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/logits"
)

// constraint builds the grammar processor of --grammar, --json-schema or --any-json over the
// model's vocabulary; none when no option is given.
func (o *options) constraint(v *llamacpp.Vocab) ([]logits.Processor, error) {
	var g *grammar.Grammar
	switch {
	case o.grammarFile != "":
		src, err := o.fileOrText(o.grammarFile, strings.Contains(o.grammarFile, "::="))
		if err != nil {
			return nil, fmt.Errorf("--grammar: %w", err)
		}
		if g, err = grammar.Parse(string(src)); err != nil {
			return nil, fmt.Errorf("--grammar %s: %w", quote.Value(o.grammarFile), err)
		}
	case o.schemaFile != "":
		src, err := o.fileOrText(o.schemaFile, strings.HasPrefix(strings.TrimSpace(o.schemaFile), "{"))
		if err != nil {
			return nil, fmt.Errorf("--json-schema: %w", err)
		}
		if g, err = grammar.FromJSONSchema(src); err != nil {
			return nil, fmt.Errorf("--json-schema %s: %w", quote.Value(o.schemaFile), err)
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

// fileOrText is the text an option gives: itself when it is text (as
// llama.cpp's --grammar and --json-schema take it), else its file's.
func (o *options) fileOrText(arg string, text bool) ([]byte, error) {
	if text {
		return []byte(arg), nil
	}
	return o.read(arg)
}
