package main

import (
	"fmt"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// mediaMarker is where a medium goes in the prompt (llama.cpp's marker).
const mediaMarker = llamacpp.DefaultMediaMarker

// maxMedia bounds the --image and --audio files of one run.
const maxMedia = 64

// mediaFile is one --image or --audio.
type mediaFile struct {
	audio bool
	path  string
}

// mediaPlaceholder is the token id standing for each media embedding in
// the prompt that processors see (llamacpp.InputsOptions.Placeholder).
const mediaPlaceholder = 0

// loadMedia loads --mmproj and decodes the --image and --audio files; the
// projector is closed by the caller.
func (s *session) loadMedia() (*llamacpp.Projector, []llamacpp.Media, error) {
	var media []llamacpp.Media
	for _, f := range s.o.media {
		var m llamacpp.Media
		var err error
		if f.audio {
			m, err = llamacpp.AudioFromFile(f.path)
		} else {
			m, err = llamacpp.ImageFromFile(f.path)
		}
		if err != nil {
			flag := "--image"
			if f.audio {
				flag = "--audio"
			}
			return nil, nil, fmt.Errorf("%s: %w", flag, err)
		}
		media = append(media, m)
	}
	p, err := llamacpp.LoadProjector(s.o.mmproj, s.model, llamacpp.ProjectorParams{Threads: s.o.threads})
	if err != nil {
		return nil, nil, fmt.Errorf("--mmproj: %w", err)
	}
	return p, media, nil
}

// mediaRequest tokenizes the prompt text with the media and fills req's
// Prompt, PromptEmbeddings, PromptPositions (an M-RoPE projector's) and
// PromptNonCausal (a Gemma 3 projector's images, which llama.cpp's helper
// decodes with causal attention off).
func (s *session) mediaRequest(p *llamacpp.Projector, media []llamacpp.Media, text string, req *generation.Request) error {
	pr, err := p.Tokenize(text, media, llamacpp.TokenizeOptions{AddSpecial: true, ParseSpecial: s.o.parseSpecial})
	if err != nil {
		return err
	}
	defer pr.Close()
	toks, embd, err := pr.Inputs(llamacpp.InputsOptions{Placeholder: mediaPlaceholder})
	if err != nil {
		return err
	}
	pos, err := pr.Positions()
	if err != nil {
		return err
	}
	req.Prompt, req.PromptEmbeddings, req.PromptPositions, req.PromptNonCausal = toks, embd, pos, pr.NonCausal()
	return nil
}
