package llamacpp

import (
	"context"
	"fmt"
)

// An encoder-decoder model (llama.cpp's t5) evaluates its input in two
// stages: Context.Encode runs the encoder over a batch once, and llama.cpp
// keeps that one output in the context for the cross-attention of every
// later Decode. Each encoded token carries the sequences whose decoder may
// attend to it; a context holds the output of its last Encode only, so the
// encoder inputs of sequences decoded side by side are encoded together, in
// one batch. Decode refuses a sequence the last Encode did not cover:
// llama.cpp would attend to nothing (or read past its cross-attention
// state) and return NaN.

// HasEncoder reports whether the model has an encoder that Context.Encode
// must run before the decoder (llama_model_has_encoder).
func (m *Model) HasEncoder() bool { return m.encoder }

// DecoderStart returns the token an encoder-decoder model's decoder starts
// from: the file's decoder_start_token_id, or, as transformers falls back,
// BOS. ok is false for a model without an encoder, or with neither token.
func (m *Model) DecoderStart() (token int32, ok bool) {
	if !m.encoder {
		return -1, false
	}
	if m.decStart >= 0 && int(m.decStart) < m.vocab.n {
		return m.decStart, true
	}
	if b := m.vocab.BOS(); b >= 0 {
		return b, true
	}
	return -1, false
}

// readEncoder records the encoder facts of c at load time; it returns why
// the model cannot generate, or "".
func (m *Model) readEncoder() string {
	m.encoder, m.decStart = m.c.HasEncoder(), m.c.DecoderStartToken()
	if m.encoder && !m.c.HasDecoder() {
		return "encoder-only models are not supported (the model has no decoder to generate with)"
	}
	return ""
}

// checkEncoderParams refuses context parameters that llama.cpp's
// encoder-decoder graph cannot run: its decoder supports one KV stream, so
// several sequences need a unified cache (llama.cpp asserts otherwise).
func (m *Model) checkEncoderParams(p ContextParams, seqs uint32) error {
	if m.encoder && seqs > 1 && !p.UnifiedKV {
		return invalid("model %s is an encoder-decoder: a context of %d sequences needs UnifiedKV (llama.cpp's t5 decoder has one KV stream)", m.path, seqs)
	}
	return nil
}

// Encode runs the model's encoder over b: every token with output set or
// not (the encoder's output covers them all), its position counted from 0
// within its sequence, its sequences the decoder sequences that will attend
// to it. Tokens of different encoder inputs must have different first
// sequences (llama.cpp's encoder separates inputs by the first sequence id
// of each token). The whole batch is one micro-batch: more tokens than
// MicroBatchSize are ErrInvalidArgument. The output replaces the one of the
// previous Encode, and the sequences it covers replace the previous ones;
// the KV cache is untouched. Logits of the last Decode are no longer
// available afterwards. Errors are those of Decode.
func (ctx *Context) Encode(gctx context.Context, b *Batch) error {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.check(); err != nil {
		return err
	}
	if !ctx.model.encoder {
		return invalid("model %s has no encoder", ctx.model.path)
	}
	if err := b.check(); err != nil {
		return err
	}
	if ub := ctx.c.NUbatch(); b.n > ub {
		return invalid("encoder input of %d tokens exceeds the micro-batch size %d (llama.cpp encodes in one micro-batch)", b.n, ub)
	}
	if err := ctx.validate(b); err != nil {
		return err
	}
	if err := gctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrAborted, err)
	}
	ctx.arm(gctx)
	ctx.lastN = 0
	// From here llama.cpp may have replaced its cross-attention state in
	// part: nothing counts as encoded until it succeeds.
	clear(ctx.encoded)
	b.c.SetNTokens(b.n)
	ctx.pools.decoded = true
	rc := ctx.pools.thread.eval(ctx.c, evalCall{b: b, encode: true})
	if rc != 0 {
		detail := ""
		if rc != 2 {
			detail = takeLastError()
		}
		if rc == 2 && gctx.Err() != nil {
			return fmt.Errorf("%w: %w", &DecodeError{Code: rc}, gctx.Err())
		}
		return &DecodeError{Code: rc, Detail: detail}
	}
	for i := range b.n {
		for _, s := range b.seqsOf(i) {
			ctx.encoded[s] = true
		}
	}
	return nil
}

// checkEncoded refuses a decoder batch with a sequence that the last
// Encode did not cover.
func (ctx *Context) checkEncoded(b *Batch) error {
	if !ctx.model.encoder {
		return nil
	}
	for i := range b.n {
		for _, s := range b.seqsOf(i) {
			if !ctx.encoded[s] {
				return invalid("sequence %d at batch index %d has no encoder output: Encode its encoder input first", s, i)
			}
		}
	}
	return nil
}
