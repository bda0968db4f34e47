package llamacpp

import "context"

// DecodeNonCausal is Decode with causal attention off: each entry of b
// attends to every entry of b in its sequence, later positions included,
// and to the cells its sequence held before, as llama.cpp's mtmd helper
// decodes the embeddings of a Gemma 3 image (llama_set_causal_attn false
// around the image's llama_decode). Causal attention is back on when it
// returns, so the context's other decodes stay causal.
//
// llama.cpp attends both ways only within one micro-batch (it asserts
// n_ubatch >= n_tokens), so b may hold at most MicroBatchSize entries; a
// larger batch is refused, naming the bound. Every model llamaloop loads
// is causal, so "back on" is the context's own setting.
func (ctx *Context) DecodeNonCausal(gctx context.Context, b *Batch) error {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.check(); err != nil {
		return err
	}
	if err := b.check(); err != nil {
		return err
	}
	if b.n > ctx.nUbatch {
		return invalid("a non-causal decode of %d entries is over the context's MicroBatchSize (n_ubatch) %d: "+
			"llama.cpp attends both ways only within one micro-batch", b.n, ctx.nUbatch)
	}
	ctx.c.SetCausalAttn(false)
	defer ctx.c.SetCausalAttn(true)
	return ctx.decode(gctx, b)
}
