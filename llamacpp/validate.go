package llamacpp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strings"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// llama.cpp trusts a GGUF file: corrupt metadata makes it abort, divide by
// zero, read out of bounds or allocate far more than the file holds, and
// some damage only shows at the first decode. validateModel reads the header
// with the project's own reader, which bounds every count and length by the
// bytes left in the file, and refuses what this llama.cpp (the one pinned in
// go.mod) would crash on, before llama.cpp opens the file. It never reads
// tensor data, so it costs milliseconds even for gigabyte models.

// Limits of the pinned llama.cpp (llama-hparams.h).
const (
	maxLayers  = 512 // LLAMA_MAX_LAYERS
	maxExperts = 512 // LLAMA_MAX_EXPERTS
)

// knownPreTokenizers are the tokenizer.ggml.pre values the pinned llama.cpp
// recognises for BPE vocabularies (llama_vocab::impl::load); any other falls
// back to the "default" pre-tokenizer with only a log line, and the model
// then tokenizes differently from its reference tokenizer.
var knownPreTokenizers = map[string]bool{}

func init() {
	for _, s := range strings.Fields(preTokenizerNames) {
		knownPreTokenizers[s] = true
	}
}

// invalidModel is the error for a file validateModel refuses.
type invalidModel struct {
	path string
	msg  string
}

func (e *invalidModel) Error() string { return fmt.Sprintf("%v %s: %s", ErrLoad, e.path, e.msg) }
func (e *invalidModel) Unwrap() error { return ErrLoad }

// validateModel checks the GGUF file at path as LoadModel with p would
// load it. full is false for Quantize, which reads the file's structure and
// tensors but neither its vocabulary nor its hyperparameters into a model.
func validateModel(path string, p ModelParams, full bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrLoad, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrLoad, err)
	}
	file, err := readHeader(observed(f, path), st, path)
	if err != nil {
		return err
	}
	v := validator{f: file, ts: file.Tensors, size: st.Size()}
	// llama.cpp opens the other files of a split model itself.
	for _, split := range splitPaths(path, file) {
		sf, err := readSplit(split)
		if err != nil {
			return err
		}
		if no, ok := sf.Lookup("split.no"); ok {
			if _, ok := no.(uint16); !ok {
				// gguf_get_val_u16 asserts the type.
				return &invalidModel{split, fmt.Sprintf("split.no: is %s, want a u16", describe(no))}
			}
		}
		v.ts = append(v.ts, sf.Tensors...)
	}
	v.tensors()
	if full {
		v.vocab(p.AllowUnknownPreTokenizer, !p.VocabOnly)
		if !p.VocabOnly {
			// llama.cpp reads no hyperparameters for a vocabulary.
			v.hparams()
		}
	}
	if v.err != "" {
		return &invalidModel{path, v.err}
	}
	return nil
}

// readsForTests, set only by the test binary, is told of every read the
// validation makes from a model file: where it starts and how many bytes
// it returned. A test shows with it that the validation reads the header
// only, whatever the machine's speed.
var readsForTests func(path string, off int64, n int)

// modelFile is what the validation reads a model file through.
type modelFile interface {
	io.Reader
	io.ReaderAt
}

// observed is f, reporting its reads to readsForTests where that is set.
func observed(f *os.File, path string) modelFile {
	if readsForTests == nil {
		return f
	}
	return &observedFile{f: f, path: path}
}

// observedFile reports each read of f to readsForTests.
type observedFile struct {
	f    *os.File
	path string
	off  int64 // of the next Read
}

func (o *observedFile) Read(p []byte) (int, error) {
	n, err := o.f.Read(p)
	readsForTests(o.path, o.off, n)
	o.off += int64(n)
	return n, err
}

func (o *observedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := o.f.ReadAt(p, off)
	readsForTests(o.path, off, n)
	return n, err
}

// readHeader parses the header of the GGUF file f at path.
func readHeader(f modelFile, st os.FileInfo, path string) (*gguf.File, error) {
	if err := checkGGUF(f, st, path); err != nil {
		return nil, err
	}
	r, err := gguf.NewReader(f, st.Size())
	if err != nil {
		return nil, &invalidModel{path, strings.ReplaceAll(err.Error(), "gguf: ", "")}
	}
	return r.File, nil
}

// readSplit parses the header of the split file at path; a missing file is
// llama.cpp's clean error.
func readSplit(path string) (*gguf.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return &gguf.File{}, nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLoad, err)
	}
	return readHeader(observed(f, path), st, path)
}

// splitPaths returns the other files of a model that file's split.count
// (a u16, as llama.cpp reads it) says is split, named as llama.cpp names
// them from path ("x-00001-of-00003.gguf": "x-00002-of-00003.gguf", ...);
// none where llama.cpp refuses the name.
func splitPaths(path string, file *gguf.File) []string {
	raw, _ := file.Lookup("split.count")
	n, _ := raw.(uint16)
	prefix, ok := strings.CutSuffix(path, fmt.Sprintf("-%05d-of-%05d.gguf", 1, n))
	if n < 2 || !ok || prefix == "" {
		return nil
	}
	var paths []string
	for i := 2; i <= int(n); i++ {
		paths = append(paths, fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, i, n))
	}
	return paths
}

// validator keeps the first problem found.
type validator struct {
	f    *gguf.File
	ts   []gguf.TensorInfo // of every file of a split model
	size int64             // of the file, in bytes
	err  string
}

// tensor returns the first tensor named name.
func (v *validator) tensor(name string) (gguf.TensorInfo, bool) {
	for _, t := range v.ts {
		if t.Name == name {
			return t, true
		}
	}
	return gguf.TensorInfo{}, false
}

func (v *validator) failf(format string, args ...any) {
	if v.err == "" {
		v.err = fmt.Sprintf(format, args...)
	}
}

// tensors checks what gguf.cpp and the compute graph take for granted: no
// zero dimension (gguf.cpp divides by each dimension), and weight types the
// matrix and element-wise kernels implement (integer types have no dot
// product: the first decode calls a null function).
func (v *validator) tensors() {
	for _, t := range v.ts {
		for i, d := range t.Shape {
			if d == 0 {
				v.failf("tensor %s: dimension %d is 0 (shape %v)", gguf.Quote(t.Name), i, t.Shape)
				return
			}
		}
		if !weightType(t.Type) {
			v.failf("tensor %s: type %v is not a float or quantized weight type", gguf.Quote(t.Name), t.Type)
			return
		}
	}
}

// weightType reports whether ggml computes with weights of type t: the
// float types and the quantized storage types. Q8_1 and Q8_K exist only as
// the other operand of quantized dot products; I8..I64 and F64 have no
// matrix kernels.
func weightType(t gguf.TensorType) bool {
	switch t {
	case gguf.TensorI8, gguf.TensorI16, gguf.TensorI32, gguf.TensorI64, gguf.TensorF64,
		gguf.TensorQ8_1, gguf.TensorQ8_K:
		return false
	}
	_, _, ok := t.BlockSize()
	return ok
}

// vocab checks what llama_vocab::impl::load and the tokenizers assert or
// index without bounds checks.
// withTensors is false for a vocabulary-only load, which reads no tensors.
func (v *validator) vocab(allowUnknownPre, withTensors bool) {
	model, ok := v.f.Lookup("tokenizer.ggml.model")
	if !ok {
		return // llama.cpp reports the missing key itself
	}
	name, ok := model.(string)
	if !ok {
		return // a wrong type is a clean error in llama.cpp
	}
	if name == "no_vocab" || name == "none" {
		// llama.cpp makes vocab_size empty tokens (some 40 bytes each)
		// before it reads a tensor.
		a, _ := v.f.Lookup("general.architecture")
		arch, _ := a.(string)
		if n, ok := v.uint(arch + ".vocab_size"); ok {
			v.vocabSize(arch+".vocab_size", n, true)
		}
		return
	}
	// llama.cpp reads the merges and the normalization map before the
	// tokens.
	switch name {
	case "gpt2":
		if m, ok := v.f.Lookup("tokenizer.ggml.merges"); ok {
			if _, ok := m.([]string); !ok {
				v.failf("tokenizer.ggml.merges: is %s, want an array of strings", describe(m))
				return
			}
		}
	case "t5":
		if v.charsmap(); v.err != "" {
			return
		}
	}
	raw, ok := v.f.Lookup("tokenizer.ggml.tokens")
	if !ok {
		return // llama.cpp: "cannot find tokenizer vocab"
	}
	tokens, ok := raw.([]string)
	if !ok {
		v.failf("tokenizer.ggml.tokens: is %s, want an array of strings", describe(raw))
		return
	}
	if len(tokens) == 0 {
		v.failf("tokenizer.ggml.tokens: the vocabulary is empty")
		return
	}
	if len(tokens) > math.MaxInt32 {
		v.failf("tokenizer.ggml.tokens: %d tokens do not fit token ids", len(tokens))
		return
	}
	if withTensors {
		if v.vocabSize("tokenizer.ggml.tokens", uint64(len(tokens)), false); v.err != "" {
			return
		}
	}
	if v.specialTokens(name, len(tokens)); v.err != "" {
		return
	}
	// llama.cpp reads scores and types through raw pointers, n_tokens of
	// them, whatever the arrays hold.
	if s, ok := v.f.Lookup("tokenizer.ggml.scores"); ok {
		if a, ok := s.([]float32); !ok || len(a) < len(tokens) {
			v.failf("tokenizer.ggml.scores: is %s, want an array of at least %d f32", describe(s), len(tokens))
			return
		}
	}
	var types []int32
	if s, ok := v.f.Lookup("tokenizer.ggml.token_type"); ok {
		if types, ok = s.([]int32); !ok || len(types) < len(tokens) {
			v.failf("tokenizer.ggml.token_type: is %s, want an array of at least %d i32", describe(s), len(tokens))
			return
		}
	}
	if name == "gpt2" {
		v.preTokenizer(allowUnknownPre)
		if v.err != "" {
			return
		}
	}
	v.tokenStrings(name, tokens, types)
}

// tokenStrings checks what llama.cpp asserts of the token strings of a
// vocabulary of tokenizer name: distinct strings, byte tokens it can parse,
// and the byte fallback a SentencePiece vocabulary needs.
func (v *validator) tokenStrings(name string, tokens []string, types []int32) {
	// llama.cpp asserts that every token string is distinct (it names empty
	// tokens "[EMPTY_<id>]").
	seen := make(map[string]int, len(tokens))
	for i, tok := range tokens {
		// llama.cpp reads each token as a C string: it ends at a NUL.
		if j := strings.IndexByte(tok, 0); j >= 0 {
			tok = tok[:j]
		}
		if len(tok) >= math.MaxInt32 {
			// token_to_piece aborts on a piece whose length is not an int32.
			v.failf("tokenizer.ggml.tokens: token %d of %d bytes", i, len(tok))
			return
		}
		if tok == "" {
			tok = fmt.Sprintf("[EMPTY_%d]", i)
		}
		if j, dup := seen[tok]; dup {
			v.failf("tokenizer.ggml.tokens: token %d %s repeats token %d", i, gguf.Quote(tok), j)
			return
		}
		seen[tok] = i
	}
	const byteType = 6 // LLAMA_TOKEN_TYPE_BYTE
	for i := range tokens {
		if types == nil || types[i] != byteType {
			continue
		}
		switch name {
		case "llama", "t5":
			// token_to_byte parses the hex digits of "<0xXX>" at offset 3.
			if len(tokens[i]) < 3 {
				v.failf("tokenizer.ggml.tokens: byte token %d %s is not of the form <0xXX>", i, gguf.Quote(tokens[i]))
				return
			}
		case "bert":
			// WordPiece has no byte tokens: token_to_byte aborts.
			v.failf("tokenizer.ggml.token_type: token %d %s is a byte token, which a %q tokenizer cannot have", i, gguf.Quote(tokens[i]), name)
			return
		}
	}
	if name == "llama" {
		// The SentencePiece tokenizer falls back to a byte token for every
		// byte no piece covers, and throws (killing the process) when the
		// vocabulary has none.
		for b := range 256 {
			if _, ok := seen[fmt.Sprintf("<0x%02X>", b)]; !ok {
				if _, ok := seen[string([]byte{byte(b)})]; !ok {
					v.failf("tokenizer.ggml.tokens: no byte token <0x%02X>, which the %q tokenizer needs", b, name)
					return
				}
			}
		}
	}
}

// vocabSize compares the vocabulary size n, read from key, with the rows of
// the token embedding, which llama.cpp requires to be equal, but only after
// it has built the vocabulary. Without an embedding, bound refuses a size
// beyond the file's bytes: a vocabulary of that many empty tokens is more
// than any file justifies.
func (v *validator) vocabSize(key string, n uint64, bound bool) {
	if t, ok := v.tensor("token_embd.weight"); ok && len(t.Shape) > 1 {
		if n != t.Shape[1] {
			v.failf("%s: %d tokens, but tensor \"token_embd.weight\" embeds %d", key, n, t.Shape[1])
		}
		return
	}
	if bound && n > uint64(v.size) {
		v.failf("%s: %d tokens in a file of %d bytes", key, n, v.size)
	}
}

// specialTokens mirrors how llama_vocab::impl::load picks the special
// tokens (a default per tokenizer, replaced by a key that names a token of
// the vocabulary) and whether it adds BOS and EOS: the tokenizers assert
// that a token they add exists. Only the UGM ("t5") tokenizer and BPE with
// the glm4 or chatglm-bpe pre-tokenizer have a default without a token
// (BOS); the others' defaults are ids, and rwkv adds none.
func (v *validator) specialTokens(name string, n int) {
	pre, _ := v.f.Lookup("tokenizer.ggml.pre")
	if name != "t5" && (name != "gpt2" || (pre != "glm4" && pre != "chatglm-bpe")) {
		return
	}
	addBOS := false
	if b, ok := v.f.Lookup("tokenizer.ggml.add_bos_token"); ok {
		addBOS, _ = b.(bool)
	}
	if id, ok := v.uint("tokenizer.ggml.bos_token_id"); addBOS && (!ok || id >= uint64(n)) {
		v.failf("tokenizer.ggml.add_bos_token: true, but the %q vocabulary has no BOS token "+
			"(tokenizer.ggml.bos_token_id missing or beyond its %d tokens)", name, n)
	}
}

// charsmap checks the UGM tokenizer's precompiled normalization map, which
// llama.cpp reads as raw bytes and walks at each Tokenize: a 4-byte size, a
// XOR-compressed double array of 32-bit nodes, then NUL-terminated
// replacements. An index past the array throws
// from inside llama_tokenize, which ends the process, and a replacement
// without its NUL is read past the map. The walk visits every state the
// tokenizer can reach, with every byte.
func (v *validator) charsmap() {
	const key = "tokenizer.ggml.precompiled_charsmap"
	raw, ok := v.f.Lookup(key)
	if !ok {
		return
	}
	// gguf.cpp asserts that it is an array, keeps the elements of one as
	// bytes (none for strings), and llama.cpp takes those as the map.
	if reflect.ValueOf(raw).Kind() != reflect.Slice {
		v.failf("%s: is %s, want an array of bytes", key, describe(raw))
		return
	}
	b, ok := raw.([]uint8)
	if _, isStrings := raw.([]string); !ok && !isStrings {
		var err error
		if b, err = binary.Append(nil, binary.LittleEndian, raw); err != nil {
			v.failf("%s: is %s, want an array of bytes", key, describe(raw))
			return
		}
	}
	if len(b) == 0 {
		return
	}
	if len(b) < 4 {
		v.failf("%s: %d bytes, want a 4-byte size first", key, len(b))
		return
	}
	blob := uint64(binary.LittleEndian.Uint32(b))
	if blob+4 >= uint64(len(b)) {
		v.failf("%s: an array of %d bytes in a map of %d", key, blob, len(b))
		return
	}
	nodes, repl := b[4:4+blob], b[4+blob:]
	n := uint64(len(nodes) / 4)
	if n == 0 {
		return // llama.cpp then skips the map
	}
	node := func(i uint32) (uint32, bool) {
		if uint64(i) >= n {
			return 0, false
		}
		return binary.LittleEndian.Uint32(nodes[4*i:]), true
	}
	base := func(p uint32) uint32 { return (p >> 10) << ((p & (1 << 9)) >> 6) }
	root, _ := node(0)
	start := base(root)
	seen := map[uint32]bool{start: true}
	for queue := []uint32{start}; len(queue) > 0; queue = queue[1:] {
		for c := uint32(1); c < 256; c++ {
			idx := queue[0] ^ c
			p, ok := node(idx)
			if !ok {
				v.failf("%s: node %d is past the array's %d", key, idx, n)
				return
			}
			if p&(1<<31|0xff) != c {
				continue
			}
			next := idx ^ base(p)
			if p>>8&1 != 0 { // a leaf: next holds the replacement's offset
				q, ok := node(next)
				if !ok {
					v.failf("%s: node %d is past the array's %d", key, next, n)
					return
				}
				if off := uint64(q & (1<<31 - 1)); off >= uint64(len(repl)) || bytes.IndexByte(repl[off:], 0) < 0 {
					v.failf("%s: replacement at %d is not a NUL-terminated string of the map", key, off)
					return
				}
			}
			if !seen[next] {
				seen[next] = true
				queue = append(queue, next)
			}
		}
	}
}

// preTokenizer refuses a BPE vocabulary whose pre-tokenizer this llama.cpp
// does not know, unless the caller accepts llama.cpp's fallback.
func (v *validator) preTokenizer(allowUnknown bool) {
	if allowUnknown && unknownPreTokenizerFallsBack {
		return
	}
	pre, ok := v.f.Lookup("tokenizer.ggml.pre")
	if !ok {
		if !allowUnknown {
			v.failf("tokenizer.ggml.pre: missing, and llama.cpp would split text with its default pre-tokenizer " +
				"(set ModelParams.AllowUnknownPreTokenizer to accept that)")
		}
		return
	}
	s, ok := pre.(string)
	if !ok {
		return // llama.cpp reports the wrong type
	}
	if !knownPreTokenizers[s] && allowUnknown {
		v.failf("tokenizer.ggml.pre: pre-tokenizer %q is unknown to %s, which refuses it rather than falling back "+
			"to its default pre-tokenizer (AllowUnknownPreTokenizer accepts only a missing one there)", s, tablesEngine)
		return
	}
	if !knownPreTokenizers[s] {
		v.failf("tokenizer.ggml.pre: pre-tokenizer %q is unknown to this llama.cpp, which would split text with its "+
			"default pre-tokenizer (set ModelParams.AllowUnknownPreTokenizer to accept that)", s)
	}
}

// hparams checks the hyperparameters llama_model::load_hparams asserts on
// and those that later divide by zero or abort in the first decode.
func (v *validator) hparams() {
	a, ok := v.f.Lookup("general.architecture")
	arch, isStr := a.(string)
	if !ok || !isStr || arch == "" {
		return // llama.cpp reports it
	}
	if _, ok := archRules[arch]; !ok {
		// llama.cpp would refuse it too, but only after reading the file
		// with its own loader: refused here, the message names the engine.
		v.failf("general.architecture: %q is not an architecture that %s can run", arch, tablesEngine)
		return
	}
	key := func(k string) string { return arch + "." + k }
	layers, hasLayers := v.uint(key("block_count"))
	if hasLayers && (layers == 0 || layers > maxLayers) {
		v.failf("%s: %d layers, want 1 to %d", key("block_count"), layers, maxLayers)
		return
	}
	for _, k := range []string{"context_length", "embedding_length"} {
		if n, ok := v.uint(key(k)); ok && n == 0 {
			v.failf("%s: is 0", key(k))
			return
		}
	}
	for _, k := range []string{"attention.layer_norm_rms_epsilon", "attention.layer_norm_epsilon"} {
		if x, ok := v.float(key(k)); ok && !(x > 0 && !math.IsInf(x, 0)) {
			v.failf("%s: is %v, want a finite positive number", key(k), v.raw(key(k)))
			return
		}
	}
	if x, ok := v.float(key("rope.freq_base")); ok && !(x > 0 && !math.IsInf(x, 0)) {
		v.failf("%s: is %v, want a finite positive number", key("rope.freq_base"), v.raw(key("rope.freq_base")))
		return
	}
	for _, k := range []string{"rope.scaling.factor", "rope.scale_linear"} {
		if x, ok := v.float(key(k)); ok && !(x >= 0 && !math.IsInf(x, 0)) {
			v.failf("%s: is %v, want a finite number >= 0", key(k), v.raw(key(k)))
			return
		}
	}
	if s, ok := v.f.Lookup(key("rope.scaling.type")); ok {
		if s, ok := s.(string); ok {
			switch s {
			case "none", "linear", "yarn", "longrope":
			default:
				v.failf("%s: unknown RoPE scaling %q", key("rope.scaling.type"), s)
				return
			}
		}
	}
	v.experts(key)
	if v.err != "" {
		return
	}
	used, _ := v.uint(key("expert_used_count"))
	v.tensorUses(used)
	if v.err != "" || !hasLayers {
		return
	}
	// Per-layer values may be arrays of n_layer integers; llama.cpp asserts
	// on any other element type.
	heads := v.perLayer(key("attention.head_count"), int(layers))
	headsKV := v.perLayer(key("attention.head_count_kv"), int(layers))
	v.perLayer(key("feed_forward_length"), int(layers))
	if v.err != "" {
		return
	}
	if v.archHparams(arch, key, heads, layers); v.err != "" {
		return
	}
	if v.optionalTensors(arch, key, layers); v.err != "" {
		return
	}
	if headsKV == nil {
		headsKV = heads
	}
	if v.archRelations(arch, key, layers, headsKV); v.err != "" || heads == nil {
		return
	}
	embd, hasEmbd := v.uint(key("embedding_length"))
	_, hasKeyLen := v.f.Lookup(key("attention.key_length"))
	for i := range heads {
		if heads[i] == 0 {
			continue // a layer without attention (recurrent hybrids)
		}
		if headsKV[i] == 0 || heads[i]%headsKV[i] != 0 {
			v.failf("%s: layer %d has %d query heads, not a multiple of its %d key/value heads",
				key("attention.head_count_kv"), i, heads[i], headsKV[i])
			return
		}
		if hasEmbd && !hasKeyLen && embd%heads[i] != 0 {
			v.failf("%s: layer %d has %d heads, which do not divide the embedding width %d",
				key("attention.head_count"), i, heads[i], embd)
			return
		}
	}
}

// experts mirrors load_hparams' assertions on the expert counts.
func (v *validator) experts(key func(string) string) {
	n, _ := v.uint(key("expert_count"))
	used, _ := v.uint(key("expert_used_count"))
	groups, _ := v.uint(key("expert_group_count"))
	groupUsed, _ := v.uint(key("expert_group_used_count"))
	switch {
	case n > maxExperts:
		v.failf("%s: %d experts, at most %d", key("expert_count"), n, maxExperts)
	case used > n:
		v.failf("%s: %d used experts of %d", key("expert_used_count"), used, n)
	case n > 0 && used == 0:
		v.failf("%s: no expert used of %d", key("expert_used_count"), n)
	case n > 0 && groups >= n:
		v.failf("%s: %d groups of %d experts", key("expert_group_count"), groups, n)
	case n > 0 && groups > 1 && (n%groups != 0 || groupUsed == 0 || groupUsed >= groups):
		v.failf("%s: %d experts in %d groups with %d used", key("expert_group_used_count"), n, groups, groupUsed)
	case n == 0 && groups != 0:
		v.failf("%s: %d groups without experts", key("expert_group_count"), groups)
	}
}

// perLayer returns the per-layer values of key: its scalar repeated, or its
// array, or nil when absent or of a type llama.cpp itself refuses cleanly.
func (v *validator) perLayer(key string, layers int) []uint64 {
	raw, ok := v.f.Lookup(key)
	if !ok {
		return nil
	}
	var out []uint64
	switch a := raw.(type) {
	case []uint32:
		for _, x := range a {
			out = append(out, uint64(x))
		}
	case []int32:
		for _, x := range a {
			if x < 0 {
				v.failf("%s: negative value %d", key, x)
				return nil
			}
			out = append(out, uint64(x))
		}
	case []float32, []string:
		v.failf("%s: is %s, want an integer or an array of %d integers", key, describe(raw), layers)
		return nil
	default:
		n, ok := v.uint(key)
		if !ok {
			return nil
		}
		out = make([]uint64, layers)
		for i := range out {
			out[i] = n
		}
	}
	if len(out) != layers {
		return nil // llama.cpp: "wrong array length"
	}
	return out
}

// uint returns an integer metadata value of any integer type; ok is false
// when it is absent, negative or not an integer (llama.cpp refuses the
// wrong types itself).
func (v *validator) uint(key string) (uint64, bool) {
	raw, ok := v.f.Lookup(key)
	if !ok {
		return 0, false
	}
	switch x := raw.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}

// raw returns a metadata value as stored, so that messages print an f32 as
// the file holds it.
func (v *validator) raw(key string) any {
	x, _ := v.f.Lookup(key)
	return x
}

// float returns a floating-point metadata value.
func (v *validator) float(key string) (float64, bool) {
	raw, ok := v.f.Lookup(key)
	if !ok {
		return 0, false
	}
	switch x := raw.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// describe names a metadata value's GGUF type for error messages.
func describe(v any) string {
	switch a := v.(type) {
	case []string:
		return fmt.Sprintf("an array of %d strings", len(a))
	case []float32:
		return fmt.Sprintf("an array of %d f32", len(a))
	case []int32:
		return fmt.Sprintf("an array of %d i32", len(a))
	}
	return fmt.Sprintf("a %T", v)
}
