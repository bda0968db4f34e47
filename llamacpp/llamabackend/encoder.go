package llamabackend

import (
	"context"
	"fmt"
	"slices"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// EncoderDecoder is the llama.cpp backend of an encoder-decoder model
// (llama.cpp's t5): a [Backend] that is also a [backend.Encoder].
//
// A llama.cpp context keeps the output of its last llama_encode only, and
// each encoded token lists the sequences whose decoder may attend to it. So
// the backend remembers each slot's encoder input, and whenever the slots
// to be evaluated are not all served by the context's current encoder
// output (a request joined, or a Copy gave a slot another slot's input), it
// encodes the inputs of every slot that has one again, together, in one
// llama_encode: each input once, its tokens listing every slot that shares
// it. Beams of one prompt, encoded together and copied among themselves,
// never cause another encode. Decoder caches are untouched by an encode;
// the encoder output of an input is the same each time up to float32
// rounding (llama.cpp picks its kernels by batch size). The encoder inputs
// of all the slots together must fit in one micro-batch
// (llamacpp.ContextParams.MicroBatchSize), which llama.cpp's encoder needs.
type EncoderDecoder struct {
	*Backend
}

// encoderState is what a Backend of an encoder-decoder model keeps beside
// its slots.
type encoderState struct {
	start int32
	batch *llamacpp.Batch // made at the first encode
	want  []*encoderInput // per slot: its encoder input, nil for none
	have  []*encoderInput // per slot: the input the context's encoder output serves it with
	seqs  []int32         // scratch
	runs  int             // llama_encode calls
}

// encoderInput is one encoder input, shared by the slots encoded with it.
type encoderInput struct{ tokens []int32 }

// NewEncoderDecoder makes the backend of a context of an encoder-decoder
// model, which it owns from then on for decoding. It starts by clearing the
// context's cache.
func NewEncoderDecoder(ctx *llamacpp.Context) (*EncoderDecoder, error) {
	start, ok := ctx.Model().DecoderStart()
	if !ctx.Model().HasEncoder() || !ok {
		return nil, fmt.Errorf("%w: the model has no encoder (or no decoder start token): use New", llamacpp.ErrInvalidArgument)
	}
	b, err := newBackend(ctx)
	if err != nil {
		return nil, err
	}
	n := len(b.lens)
	b.enc = &encoderState{start: start, want: make([]*encoderInput, n), have: make([]*encoderInput, n)}
	return &EncoderDecoder{b}, nil
}

// Encoder returns the EncoderDecoder of b when NewEncoderDecoder made it,
// for the code that holds the Backend and hands the decoding loop or beam
// search its contract; ok is false for a decoder-only model's Backend.
func (b *Backend) Encoder() (e *EncoderDecoder, ok bool) {
	if b.enc == nil {
		return nil, false
	}
	return &EncoderDecoder{b}, true
}

// EncodeCalls is how many llama_encode calls the backend made.
func (e *EncoderDecoder) EncodeCalls() int { return e.enc.runs }

// DecoderStart implements backend.Encoder: the model's
// decoder_start_token_id (its BOS when the file has none).
func (e *EncoderDecoder) DecoderStart() int32 { return e.enc.start }

// Encode implements backend.Encoder.
func (e *EncoderDecoder) Encode(ctx context.Context, feeds []backend.EncoderFeed) error {
	b := e.Backend
	nv := int32(b.VocabSize())
	for i, f := range feeds {
		if len(f.Tokens) == 0 || len(f.Slots) == 0 {
			return fmt.Errorf("%w: encoder feed %d has no tokens or no slots", llamacpp.ErrInvalidArgument, i)
		}
		for _, t := range f.Tokens {
			if t < 0 || t >= nv {
				return fmt.Errorf("%w: encoder feed %d: token %d outside the vocabulary [0, %d)", backend.ErrTokenOutOfRange, i, t, nv)
			}
		}
		for j, s := range f.Slots {
			if err := b.checkSlot(s); err != nil {
				return err
			}
			if b.lens[s] != 0 {
				return fmt.Errorf("%w: encode into slot %d, which holds %d tokens", llamacpp.ErrInvalidArgument, s, b.lens[s])
			}
			for k := range i {
				if slices.Contains(feeds[k].Slots, s) {
					return fmt.Errorf("%w: slot %d in encoder feeds %d and %d", llamacpp.ErrInvalidArgument, s, k, i)
				}
			}
			if slices.Contains(f.Slots[:j], s) {
				return fmt.Errorf("%w: slot %d twice in encoder feed %d", llamacpp.ErrInvalidArgument, s, i)
			}
		}
	}
	for _, f := range feeds {
		in := &encoderInput{tokens: slices.Clone(f.Tokens)}
		for _, s := range f.Slots {
			e.enc.want[s] = in
		}
	}
	if err := b.encodeAll(ctx); err != nil {
		for _, f := range feeds {
			for _, s := range f.Slots {
				e.enc.want[s] = nil
			}
		}
		return err
	}
	return nil
}

// prepareEncoder makes the context's encoder output serve every slot of
// feeds, encoding again when one is not served; a slot without encoder
// input is an error wrapping backend.ErrNoEncoderOutput.
func (b *Backend) prepareEncoder(ctx context.Context, feeds []backend.Feed) error {
	stale := false
	for _, f := range feeds {
		want := b.enc.want[f.Slot]
		if want == nil {
			return fmt.Errorf("llamabackend: slot %d: %w", f.Slot, backend.ErrNoEncoderOutput)
		}
		stale = stale || b.enc.have[f.Slot] != want
	}
	if !stale {
		return nil
	}
	return b.encodeAll(ctx)
}

// encodeAll encodes the input of every slot that has one, in one batch.
func (b *Backend) encodeAll(ctx context.Context) error {
	st := b.enc
	total := 0
	for s, in := range st.want {
		if in != nil && !slices.Contains(st.want[:s], in) {
			total += len(in.tokens)
		}
	}
	if st.batch == nil || st.batch.Cap() < total {
		if st.batch != nil {
			st.batch.Close()
		}
		nb, err := llamacpp.NewBatch(max(total, 64), len(st.want))
		if err != nil {
			return err
		}
		st.batch = nb
	}
	clear(st.have)
	st.batch.Clear()
	for s, in := range st.want {
		if in == nil || slices.Contains(st.want[:s], in) {
			continue
		}
		st.seqs = st.seqs[:0]
		for t, other := range st.want {
			if other == in {
				st.seqs = append(st.seqs, int32(t))
			}
		}
		for p, tok := range in.tokens {
			if _, err := st.batch.AddShared(tok, int32(p), st.seqs, false); err != nil {
				return err
			}
		}
	}
	st.runs++
	if err := b.ctx.Encode(ctx, st.batch); err != nil {
		return fmt.Errorf("llamabackend: encode %d tokens of encoder input: %w", total, err)
	}
	copy(st.have, st.want)
	return nil
}

var _ backend.Encoder = (*EncoderDecoder)(nil)
