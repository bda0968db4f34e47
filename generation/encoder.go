package generation

import (
	"context"
	"errors"
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
)

// ErrNoEncoderInput reports a request without encoder input (no Prompt,
// Text or Messages) to a generator over an encoder-decoder model.
var ErrNoEncoderInput = errors.New("encoder-decoder model: the request has no encoder input")

// An encoder-decoder backend (backend.Encoder) turns a request's prompt
// into its encoder input: requestTokens returns the decoder prompt, which
// the loop feeds and the length rules count, and the encoder input, which
// the encoder processors see. A decoder-only backend has no encoder input.
func (g *Generator) requestTokens(req *Request) (prompt, encoder []int32, err error) {
	if g.enc == nil {
		if req.DecoderPrompt != nil {
			return nil, nil, errors.New("DecoderPrompt given to a decoder-only model")
		}
		prompt, err = g.PromptTokens(req)
		return prompt, nil, err
	}
	if len(req.Prompt) == 0 && req.Text == "" && len(req.Messages) == 0 {
		return nil, nil, ErrNoEncoderInput
	}
	if encoder, err = g.PromptTokens(req); err != nil {
		return nil, nil, fmt.Errorf("encoder input: %w", err)
	}
	prompt = req.DecoderPrompt
	if len(prompt) == 0 {
		prompt = []int32{g.enc.DecoderStart()}
	}
	for i, t := range prompt {
		if t < 0 || int(t) >= g.vocab {
			return nil, nil, fmt.Errorf("decoder prompt token %d: %w: %d not in [0,%d)", i, backend.ErrTokenOutOfRange, t, g.vocab)
		}
	}
	return prompt, encoder, nil
}

// encode runs the encoder over the encoder inputs of the requests admitted
// in this step (g.admitted), in one Encode. A request whose input the
// backend refuses ends with FinishError; when several were encoded together
// each is retried alone, so that one bad input fails only its own request.
// It returns false when emit stopped the loop, and the context's error when
// ctx ended (the caller cancels).
func (g *Generator) encode(ctx context.Context, emit func(*seq, Event) bool) (bool, error) {
	admitted := g.admitted
	g.admitted = g.admitted[:0]
	g.encFeeds = g.encFeeds[:0]
	for _, r := range admitted {
		r.encSlot[0] = r.slot
		g.encFeeds = append(g.encFeeds, backend.EncoderFeed{Slots: r.encSlot[:], Tokens: r.encoder})
	}
	err := g.enc.Encode(ctx, g.encFeeds)
	if err == nil {
		return true, nil
	}
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	for i, r := range admitted {
		if len(admitted) > 1 {
			if err = g.enc.Encode(ctx, g.encFeeds[i:i+1]); err == nil {
				continue
			}
			if ctx.Err() != nil {
				return true, ctx.Err()
			}
		}
		if !emit(r, r.end(FinishError, fmt.Errorf("generation: encode: %w", err))) {
			return false, nil
		}
	}
	return true, nil
}

// inputTokens is the size of the request's input as a caller counts it:
// its encoder input on an encoder-decoder backend, its prompt otherwise.
func (r *seq) inputTokens() int {
	if len(r.encoder) > 0 {
		return len(r.encoder)
	}
	return len(r.prompt)
}
