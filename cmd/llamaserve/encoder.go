package main

import (
	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
)

// newBackend makes the backend of lctx: for an encoder-decoder model (T5)
// its EncoderDecoder, whose requests' prompts are their encoder inputs,
// for the others the plain Backend. lb is what the caller closes, b what
// the engine runs on. An encoder-decoder has no prefix cache: its decoders
// all start from the same token, and what a request holds is its encoder
// input.
func newBackend(m *llamacpp.Model, lctx *llamacpp.Context, o *options) (lb *llamabackend.Backend, b backend.Backend, err error) {
	if !m.HasEncoder() {
		lb, err = llamabackend.New(lctx)
		return lb, lb, err
	}
	if o.cacheSlots > 0 {
		return nil, nil, cli.Usagef("--cache-slots %d: the prefix cache needs a decoder-only model; %s is an encoder-decoder", o.cacheSlots, o.model)
	}
	e, err := llamabackend.NewEncoderDecoder(lctx)
	if err != nil {
		return nil, nil, err
	}
	return e.Backend, e, nil
}

// engineTokenizer is the tokenizer of the engine: tok, except that an
// encoder-decoder model without a chat template of its own (and no
// --chat-template) gets none, so that chat requests are refused rather
// than rendered with a template the model never saw; note then says so.
func engineTokenizer(m *llamacpp.Model, tok llamabackend.Tokenizer, o *options, note string) (backend.Tokenizer, string) {
	if _, ok := m.ChatTemplate(""); ok || !m.HasEncoder() || o.template != "" {
		return tok, note
	}
	return struct{ backend.Tokenizer }{tok}, "none (an encoder-decoder model without tokenizer.chat_template: chat requests are refused)"
}
