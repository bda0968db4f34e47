package llamacpp

import "maps"

// PoolThreads returns the worker counts of ctx's current thread pools and
// the number of retired pools it still holds.
func PoolThreads(ctx *Context) (single, batch, retired int) {
	return ctx.pools.nSingle, ctx.pools.nBatch, len(ctx.pools.retired)
}

// ArchRuleNames returns the architecture rules of the validation by
// architecture, each as the names of its constraints.
func ArchRuleNames() map[string][]string {
	names := []string{"sameKV", "rotIsK", "rotIsV", "ropes", "needsExperts", "needsOutput"}
	out := map[string][]string{}
	for arch, r := range archRules {
		out[arch] = []string{}
		for i, n := range names {
			if r&(1<<i) != 0 {
				out[arch] = append(out[arch], n)
			}
		}
	}
	return out
}

// TensorOpNames returns the validation's operation class of every tensor
// name it knows: "f32", "matmul", "matmul_id", "get_rows", "div",
// "ssm_conv", "im2col" or "none".
func TensorOpNames() map[string]string {
	names := map[tensorOp]string{opF32: "f32", opMatMul: "matmul", opMatMulID: "matmul_id", opGetRows: "get_rows",
		opDiv: "div", opSSMConv: "ssm_conv", opIm2Col: "im2col", opNone: "none"}
	out := map[string]string{}
	for n, op := range tensorOps {
		out[n] = names[op]
	}
	return out
}

// KnownPreTokenizers returns the validation's pre-tokenizer names.
func KnownPreTokenizers() map[string]bool { return maps.Clone(knownPreTokenizers) }

// ArchValueAsserts returns, by architecture, the llama.cpp assertions the
// validation's single-value checks mirror.
func ArchValueAsserts() map[string][]string {
	out := map[string][]string{}
	for arch, cs := range archValues {
		for _, c := range cs {
			out[arch] = append(out[arch], c.assert)
		}
	}
	return out
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

// CheckBackendLibrary is the check a library in the backend folder passes
// before ggml loads it.
var CheckBackendLibrary = checkBackendLibrary

// CheckSharedLibrary is checkBackendLibrary without the backend's symbols.
func CheckSharedLibrary(path string) error { return checkLibrary(path, false, 0) }

// LoadUnchecked makes LoadModel hand files it refuses to llama.cpp, for a
// child process that shows a crash kind crashes without its check.
func LoadUnchecked() { uncheckedForTests = true }

// BlockZeroTensors returns, by architecture, the tensors ("enc.blk.0.x")
// the validation requires in block 0 because the graph falls back to them.
func BlockZeroTensors() map[string][]string {
	out := map[string][]string{}
	for arch, bs := range blockZeroTensors {
		for _, b := range bs {
			out[arch] = append(out[arch], b.in(0))
		}
	}
	return out
}

// MoEGating returns the validation's table of expert gating functions.
func MoEGating() map[string]bool { return moeGating }

// SeqStateHeaderLen is the length of the header before a sequence state's
// KV-cache part: 0 on the pinned engine.
func SeqStateHeaderLen() int {
	if seqStateMagic == 0 {
		return 0
	}
	return 8
}

// UnknownPreTokenizerFallsBack reports whether the engine's llama.cpp falls
// back to its default pre-tokenizer for an unknown one (the pin) rather
// than refusing it (master).
const UnknownPreTokenizerFallsBack = unknownPreTokenizerFallsBack

// KVStateLen is the length of the KV-cache part of a sequence state.
func KVStateLen(state []byte) (int, error) { return kvStateLen(state) }

// ObserveValidationReads makes every read the validation makes from a
// model file call f until the returned function restores the default.
func ObserveValidationReads(f func(path string, off int64, n int)) (restore func()) {
	readsForTests = f
	return func() { readsForTests = nil }
}

// ForceEvalThread makes the contexts created until the test ends evaluate
// on an OS thread of their own, as they do on an OpenMP build of ggml.
func ForceEvalThread(t interface{ Cleanup(func()) }) {
	forceEvalThread = true
	t.Cleanup(func() { forceEvalThread = false })
}
