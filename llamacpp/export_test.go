package llamacpp

// PoolThreads returns the worker counts of ctx's current thread pools and
// the number of retired pools it still holds.
func PoolThreads(ctx *Context) (single, batch, retired int) {
	return ctx.pools.nSingle, ctx.pools.nBatch, len(ctx.pools.retired)
}
