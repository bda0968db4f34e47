package beam

import (
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
)

// On an encoder-decoder backend (backend.Encoder) the prompts given to
// Search are the encoder inputs, transformers' input_ids: each prompt's
// decoder starts from the backend's DecoderStart alone, its lengths count
// decoder tokens from there, its encoder processors see the encoder input,
// and its encoder input is evaluated once, when the prompt is admitted, for
// all NumBeams slots of its group at once. The beams then share that one
// encoder output: a Copy between them carries it.

// splitEncoder returns the decoder prompts and encoder inputs of prompts
// on b, or prompts itself and nil on a decoder-only backend.
func splitEncoder(b backend.Backend, prompts [][]int32) (decoder, encoder [][]int32, err error) {
	enc, ok := b.(backend.Encoder)
	if !ok {
		return prompts, nil, nil
	}
	vocab := b.VocabSize()
	for i, p := range prompts {
		if len(p) == 0 {
			return nil, nil, fmt.Errorf("%w: encoder input %d is empty", ErrInvalid, i)
		}
		for _, t := range p {
			if t < 0 || int(t) >= vocab {
				return nil, nil, fmt.Errorf("%w: encoder input %d: token %d not in [0,%d)", ErrInvalid, i, t, vocab)
			}
		}
	}
	start := []int32{enc.DecoderStart()}
	decoder = make([][]int32, len(prompts))
	for i := range decoder {
		decoder[i] = start
	}
	return decoder, prompts, nil
}

// encode clears the slots of g and attaches to all of them the encoder
// output of prompt p.
func (s *search) encode(g *group, p int) error {
	for _, sl := range g.slots {
		if s.slot[sl] != slotClean {
			if err := s.clear(sl); err != nil {
				return err
			}
		}
		// From here a slot holds an encoder output, which the end of the
		// search clears.
		s.slot[sl] = slotDirty
	}
	feed := []backend.EncoderFeed{{Slots: g.slots, Tokens: s.encoder[p]}}
	if err := s.backend.(backend.Encoder).Encode(s.ctx, feed); err != nil {
		if cerr := s.ctx.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("beam: prompt %d: encode: %w", p, err)
	}
	s.res.Stats.Encodes++
	return nil
}
