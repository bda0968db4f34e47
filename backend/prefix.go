package backend

// PrefixLookup is an optional interface of a Backend that reuses evaluated
// prompt prefixes (prefixcache.Cache): the first feed of an empty slot takes
// the longest prefix that the backend holds already, and only the rest is
// evaluated. The decoding loop of package generation asks it how much of a
// prompt is held, so that only the rest counts against a prompt chunk.
type PrefixLookup interface {
	Backend

	// Lookup returns the backend's slot that holds the longest prefix of
	// tokens with their input embeddings embd (nil, or one entry per
	// token as in Feed.Embd) (-1 when none), the length of that prefix,
	// and the number of tokens that slot holds.
	Lookup(tokens []int32, embd [][]float32) (slot, shared, held int)
}
