package main

import (
	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
)

// An encoder-decoder model (T5) generates completions and beam searches:
// the prompt is the encoder input, and the decoder starts from the model's
// decoder_start_token_id. The modes that continue a decoder's own prompt
// (interactive chat over a prefix cache, speculative decoding, the demo)
// are decoder-only.
func (s *session) checkEncoderDecoder() error {
	if !s.model.HasEncoder() {
		return nil
	}
	name := shortName(s.o.model)
	switch {
	case s.o.demo:
		return cli.Usagef("--demo needs a decoder-only model; %s is an encoder-decoder", name)
	case s.o.chat && s.o.prompt == "" && s.o.promptFile == "" && s.o.promptsFile == "":
		return cli.Usagef("interactive --chat needs a decoder-only model; %s is an encoder-decoder (give the prompt with -p)", name)
	case s.o.assistantModel != "" || s.cfg.PromptLookup():
		return cli.Usagef("speculative decoding needs a decoder-only model; %s is an encoder-decoder", name)
	}
	return nil
}

// contract is what the decoding loop and beam search get of lb: its
// EncoderDecoder for an encoder-decoder model, lb itself otherwise.
func contract(lb *llamabackend.Backend) backend.Backend {
	if e, ok := lb.Encoder(); ok {
		return e
	}
	return lb
}
