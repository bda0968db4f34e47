package llamacpp

// PoolThreads returns the worker counts of ctx's current thread pools and
// the number of retired pools it still holds.
func PoolThreads(ctx *Context) (single, batch, retired int) {
	return ctx.pools.nSingle, ctx.pools.nBatch, len(ctx.pools.retired)
}

// TokenizeDirect is llama_tokenize on the whole text, with llama.cpp's own
// special-token partition: what Tokenize gave before it found the special
// tokens in Go.
func TokenizeDirect(v *Vocab, text string, addSpecial, parseSpecial bool) []int32 {
	out := make([]int32, len(text)+8)
	n := v.c.Tokenize(text, out, addSpecial, parseSpecial)
	if n < 0 {
		out = make([]int32, -n)
		n = v.c.Tokenize(text, out, addSpecial, parseSpecial)
	}
	return out[:n]
}
