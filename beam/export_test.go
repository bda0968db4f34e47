package beam

// BreakReorder returns opts with a deliberately broken reorder: a child that
// needs its parent's slot copied gets a free slot without the copy, so the
// backend scores a history the search never chose. Tests (also on llama.cpp)
// use it to prove that they detect a search whose backend state does not
// follow the parents.
func BreakReorder(opts Options) Options {
	opts.skipCopy = true
	return opts
}
