package backend

import (
	"context"
	"errors"
)

// Encoder is an optional interface of a Backend whose model is an
// encoder-decoder (T5): the decoder's slots then also attend to the output
// of an encoder, run once per request over the request's encoder input.
// Decoder-only backends do not implement it and pay nothing for it. The
// decoding loop (package generation) and beam search (package beam) check
// for it: on such a backend a request's prompt is its encoder input, and
// the decoder's prompt starts with DecoderStart, as transformers' generate()
// starts an encoder-decoder's decoder_input_ids.
//
// A slot's encoder output belongs to the slot's history: Copy gives dst the
// encoder output of src along with its tokens, Truncate keeps it, Clear
// drops it. Eval of a slot without an encoder output is an error wrapping
// ErrNoEncoderOutput.
type Encoder interface {
	Backend

	// DecoderStart is the token every decoder prompt starts with, the
	// model's decoder_start_token_id.
	DecoderStart() int32

	// Encode runs the encoder over each feed's Tokens and attaches the
	// output to every slot of the feed's Slots (the beams of one prompt
	// share one encoder output). Each slot must be empty and appear in one
	// feed only. On success the slots may be evaluated; on error they are
	// left without an encoder output (and empty). Encode honours ctx as
	// Eval does. The backend reads the feeds only during the call.
	Encode(ctx context.Context, feeds []EncoderFeed) error
}

// EncoderFeed is one encoder input of an Encoder.Encode call: Tokens, the
// input ids, shared by the decoder slots Slots.
type EncoderFeed struct {
	Slots  []int
	Tokens []int32
}

// ErrNoEncoderOutput is what an Encoder's Eval wraps for a slot that has no
// encoder output (never encoded, or cleared since).
var ErrNoEncoderOutput = errors.New("slot has no encoder output")
