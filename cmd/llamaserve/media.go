package main

import (
	"bytes"
	"context"
	"sync"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/serve"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// projectorPrompter is serve.MediaPrompter over the model's projector
// (--mmproj): it decodes the media, tokenizes the prompt with them and
// encodes them into the request's PromptEmbeddings (and PromptNonCausal:
// a Gemma 3 projector's images attend to themselves both ways).
type projectorPrompter struct {
	p    *llamacpp.Projector
	opts llamacpp.InputsOptions
	// mu serializes the projector's use: one mtmd context encodes one
	// medium at a time.
	mu sync.Mutex
}

// newProjectorPrompter loads the projector at path for m.
func newProjectorPrompter(path string, m *llamacpp.Model, threads int) (*projectorPrompter, error) {
	p, err := llamacpp.LoadProjector(path, m, llamacpp.ProjectorParams{Threads: threads})
	if err != nil {
		return nil, err
	}
	// The placeholder standing for each embedding in the token sequence,
	// which processors see: the padding token, else token 0.
	placeholder := m.Vocab().PAD()
	if placeholder < 0 || int(placeholder) >= m.Vocab().Size() {
		placeholder = 0
	}
	return &projectorPrompter{p: p, opts: llamacpp.InputsOptions{Placeholder: placeholder}}, nil
}

func (pp *projectorPrompter) TakesImages() bool { return pp.p.Info().Vision }
func (pp *projectorPrompter) TakesAudio() bool  { return pp.p.Info().Audio }

// Close frees the projector.
func (pp *projectorPrompter) Close() error { return pp.p.Close() }

func (pp *projectorPrompter) MediaPrompt(ctx context.Context, prompt string, media []serve.Media) (generation.Request, error) {
	ms := make([]llamacpp.Media, len(media))
	for i, m := range media {
		var err error
		if m.Kind == serve.MediaAudio {
			ms[i], err = llamacpp.DecodeWAV(bytes.NewReader(m.Data))
		} else {
			ms[i], err = llamacpp.DecodeImage(bytes.NewReader(m.Data))
		}
		if err != nil {
			return generation.Request{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return generation.Request{}, err
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	// The chat template writes the model's BOS; the template's markers
	// are control tokens.
	pr, err := pp.p.Tokenize(prompt, ms, llamacpp.TokenizeOptions{ParseSpecial: true})
	if err != nil {
		return generation.Request{}, err
	}
	defer pr.Close()
	toks, embd, err := pr.Inputs(pp.opts)
	if err != nil {
		return generation.Request{}, err
	}
	pos, err := pr.Positions()
	if err != nil {
		return generation.Request{}, err
	}
	return generation.Request{Prompt: toks, PromptEmbeddings: embd, PromptPositions: pos, PromptNonCausal: pr.NonCausal()}, nil
}
