package llamacpp_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/llamaloop/llamaloop/cgo"
	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/require"
)

// Structure-aware mutations: instead of flipping bytes, they edit a parsed
// model (metadata, tensor infos) and write it back, so that the file stays a
// well-formed GGUF and reaches llama.cpp's hyperparameter and tensor loaders
// and its compute graph, where the crashes of issue 26 were.

// structSpec is the model the structure-aware mutations edit: two layers
// wide enough (256) for every quantized block size, so that a norm or an
// embedding stored as a k-quant is a well-formed file.
func structSpec() testmodel.Spec {
	return testmodel.Spec{
		Name: "llamaloop-struct", NEmbd: 256, NLayer: 2, NHead: 4, NHeadKV: 2, NFF: 256, NCtxTrain: 128,
		RopeFreqBase: 10000, RMSEps: 1e-5, WeightType: gguf.TensorF16, Tied: true, Seed: 5,
		Vocab: testmodel.TinyVocab(false),
	}
}

// parts is a model taken apart: metadata, tensor infos and tensor bytes.
type parts struct {
	md   []gguf.KV
	ts   []gguf.TensorInfo
	data map[string][]byte
}

// readParts parses the model at path.
func readParts(t testing.TB, path string) *parts {
	t.Helper()
	p, err := readPartsFile(path)
	require.NoError(t, err)
	return p
}

func readPartsFile(path string) (*parts, error) {
	r, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	p := &parts{md: append([]gguf.KV(nil), r.Metadata...), data: map[string][]byte{}}
	for _, ti := range r.Tensors {
		ti.Shape = slices.Clone(ti.Shape)
		p.ts = append(p.ts, ti)
		b, err := r.TensorBytes(ti.Name)
		if err != nil {
			return nil, err
		}
		p.data[ti.Name] = slices.Clone(b)
	}
	return p, nil
}

// tinyT5Parts is testmodel.TinyT5 taken apart, written once.
var tinyT5Parts = sync.OnceValues(func() (*parts, error) {
	dir, err := os.MkdirTemp("", "t5parts")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "t5.gguf")
	if err := testmodel.TinyT5().Write(path); err != nil {
		return nil, err
	}
	return readPartsFile(path)
})

// becomeT5 replaces the model by the tiny T5 model, whose relative
// attention bias is in block 0 of the encoder and of the decoder only.
func (p *parts) becomeT5() {
	q, err := tinyT5Parts()
	if err != nil {
		panic(err)
	}
	*p = *q.clone()
}

// clone copies everything a mutation may change; tensor bytes are shared
// (write never changes them).
func (p *parts) clone() *parts {
	q := &parts{md: slices.Clone(p.md), data: p.data}
	for _, ti := range p.ts {
		ti.Shape = slices.Clone(ti.Shape)
		q.ts = append(q.ts, ti)
	}
	return q
}

// write writes the model to path; each tensor keeps the bytes of the source
// tensor of its name, cut or repeated to its new size.
func (p *parts) write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := gguf.NewWriter(f, p.md, p.ts)
	if err != nil {
		return err
	}
	for _, ti := range p.ts {
		size, _ := ti.Size()
		if size > 64<<20 {
			return fmt.Errorf("tensor %s of %d bytes", ti.Name, size)
		}
		b := make([]byte, size)
		if src := p.data[ti.Name]; len(src) > 0 {
			for i := 0; i < len(b); i += len(src) {
				copy(b[i:], src)
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return w.Close()
}

func (p *parts) get(key string) (any, bool) {
	for _, kv := range p.md {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

func (p *parts) set(key string, v any) { p.md = setKV(p.md, key, v) }

func (p *parts) del(key string) {
	p.md = slices.DeleteFunc(p.md, func(kv gguf.KV) bool { return kv.Key == key })
}

func (p *parts) arch() string {
	a, _ := p.get("general.architecture")
	s, _ := a.(string)
	return s
}

// akey is an architecture-specific key of the model's architecture.
func (p *parts) akey(k string) string { return p.arch() + "." + k }

// setArch renames the architecture and every key of the old one.
func (p *parts) setArch(arch string) {
	old := p.arch() + "."
	for i := range p.md {
		if s, ok := strings.CutPrefix(p.md[i].Key, old); ok {
			p.md[i].Key = arch + "." + s
		}
	}
	p.set("general.architecture", arch)
}

func (p *parts) tensor(name string) *gguf.TensorInfo {
	for i := range p.ts {
		if p.ts[i].Name == name {
			return &p.ts[i]
		}
	}
	return nil
}

func (p *parts) dropTensor(name string) {
	p.ts = slices.DeleteFunc(p.ts, func(ti gguf.TensorInfo) bool { return ti.Name == name })
}

// addTensor adds (or replaces) a tensor of zeros.
func (p *parts) addTensor(name string, typ gguf.TensorType, shape ...uint64) {
	p.dropTensor(name)
	p.ts = append(p.ts, gguf.TensorInfo{Name: name, Type: typ, Shape: shape})
}

func (p *parts) uintKey(k string) uint64 {
	v, _ := p.get(p.akey(k))
	switch x := v.(type) {
	case uint32:
		return uint64(x)
	case uint64:
		return x
	case int32:
		return uint64(x)
	}
	return 0
}

// conform reshapes the attention tensors of a llama-shaped model to its
// hyperparameters (heads, key and value lengths), so that a changed head
// size passes llama.cpp's shape checks and reaches the code that uses it.
func (p *parts) conform() {
	embd, heads, kv := p.uintKey("embedding_length"), p.uintKey("attention.head_count"), p.uintKey("attention.head_count_kv")
	if heads == 0 || embd == 0 {
		return
	}
	if kv == 0 {
		kv = heads
	}
	hk, hv := embd/heads, embd/heads
	if _, ok := p.get(p.akey("attention.key_length")); ok {
		hk = p.uintKey("attention.key_length")
	}
	if _, ok := p.get(p.akey("attention.value_length")); ok {
		hv = p.uintKey("attention.value_length")
	}
	shapes := map[string][]uint64{
		"attn_q": {embd, hk * heads}, "attn_k": {embd, hk * kv},
		"attn_v": {embd, hv * kv}, "attn_output": {hk * heads, embd}, // llama.cpp shapes it by the key heads
	}
	for i := range p.ts {
		parts := strings.Split(p.ts[i].Name, ".")
		if len(parts) == 4 && parts[0] == "blk" {
			if s, ok := shapes[parts[2]]; ok {
				p.ts[i].Shape = slices.Clone(s)
			}
		}
	}
}

var (
	normTypes = []gguf.TensorType{gguf.TensorBF16, gguf.TensorF16, gguf.TensorQ4_0, gguf.TensorQ8_0,
		gguf.TensorQ4_K, gguf.TensorQ6_K, gguf.TensorIQ4_NL, gguf.TensorQ5_1, gguf.TensorQ2_K}
	allTypes = []gguf.TensorType{gguf.TensorF32, gguf.TensorF16, gguf.TensorQ4_0, gguf.TensorQ4_1,
		gguf.TensorQ5_0, gguf.TensorQ5_1, gguf.TensorQ8_0, gguf.TensorQ8_1, gguf.TensorQ2_K, gguf.TensorQ3_K,
		gguf.TensorQ4_K, gguf.TensorQ5_K, gguf.TensorQ6_K, gguf.TensorQ8_K, gguf.TensorIQ2_XXS,
		gguf.TensorIQ2_XS, gguf.TensorIQ3_XXS, gguf.TensorIQ1_S, gguf.TensorIQ4_NL, gguf.TensorIQ3_S,
		gguf.TensorIQ2_S, gguf.TensorIQ4_XS, gguf.TensorI8, gguf.TensorI16, gguf.TensorI32, gguf.TensorI64,
		gguf.TensorF64, gguf.TensorIQ1_M, gguf.TensorBF16, gguf.TensorTQ1_0, gguf.TensorTQ2_0, gguf.TensorMXFP4}
	vocabModels = []string{"llama", "gpt2", "bert", "t5", "rwkv", "plamo2", "none", "no_vocab"}
	// extraTensors are tensors other architectures load, which a renamed
	// model may then be given.
	extraTensors = []string{"output.weight", "output_norm.bias", "rope_freqs.weight", "token_embd_norm.weight",
		"token_types.weight", "position_embd.weight", "blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight",
		"blk.0.attn_q.bias", "blk.0.attn_qkv.weight", "blk.0.ffn_gate_inp.weight", "blk.0.ffn_up_exps.weight",
		"blk.0.ffn_down_exps.weight", "blk.0.ffn_gate_exps.weight", "blk.0.post_attention_norm.weight",
		"blk.0.attn_norm_2.weight", "blk.0.ssm_conv1d.weight", "blk.0.ffn_up_shexp.weight", "blk.1.attn_sinks.weight"}
)

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// oddSizes are head and rope sizes around the model's head size of 64.
var oddSizes = []uint32{0, 1, 3, 7, 31, 32, 33, 63, 64, 65, 96, 127, 128, 255}

// structFamilies are the structure-aware mutations, one per kind of damage
// the campaign of issue 26 found (and the neighbours of each), by name.
var structFamilies = []struct {
	name   string
	mutate func(rng *rand.Rand, p *parts)
}{
	// A norm weight stored as bf16, f16 or a quantized type.
	{"norm type", func(rng *rand.Rand, p *parts) {
		var norms []int
		for i, ti := range p.ts {
			if strings.Contains(ti.Name, "norm") {
				norms = append(norms, i)
			}
		}
		p.ts[pick(rng, norms)].Type = pick(rng, normTypes)
	}},
	// key_length != value_length, the tensors shaped to match.
	{"key/value length", func(rng *rand.Rand, p *parts) {
		hk, hv := pick(rng, []uint32{32, 64, 128}), pick(rng, []uint32{32, 64, 128})
		if rng.IntN(2) == 0 {
			p.set(p.akey("attention.key_length"), hk)
		}
		p.set(p.akey("attention.value_length"), hv)
		p.conform()
	}},
	// Head sizes that are odd or do not match the rope dimensions.
	{"head size", func(rng *rand.Rand, p *parts) {
		switch rng.IntN(3) {
		case 0:
			h := pick(rng, oddSizes)
			p.set(p.akey("attention.key_length"), h)
			p.set(p.akey("attention.value_length"), h)
		case 1:
			p.set(p.akey("attention.head_count"), pick(rng, []uint32{3, 5, 6, 7, 12, 256}))
			p.set(p.akey("attention.head_count_kv"), pick(rng, []uint32{1, 3, 5}))
		default:
			p.set(p.akey("attention.key_length"), pick(rng, oddSizes))
		}
		// llama and falcon refuse a rope dimension count other than the
		// key length themselves: make them agree, or drop it for the default.
		switch rng.IntN(3) {
		case 0:
			p.set(p.akey("rope.dimension_count"), uint32(p.uintKey("attention.key_length")))
		case 1:
			p.del(p.akey("rope.dimension_count"))
		}
		p.conform()
	}},
	// A tensor of more dimensions than llama.cpp expects.
	{"tensor rank", func(rng *rand.Rand, p *parts) {
		ti := p.tensor("token_embd.weight")
		if ti == nil || rng.IntN(3) == 0 {
			ti = &p.ts[rng.IntN(len(p.ts))]
		}
		switch rng.IntN(3) {
		case 0:
			ti.Shape = append(ti.Shape, pick(rng, []uint64{1, 2, 3}))
		case 1:
			if len(ti.Shape) > 1 && ti.Shape[1]%2 == 0 {
				ti.Shape = append([]uint64{ti.Shape[0], ti.Shape[1] / 2, 2}, ti.Shape[2:]...)
			} else {
				ti.Shape = append(ti.Shape, 2)
			}
		default:
			for len(ti.Shape) < 4 {
				ti.Shape = append(ti.Shape, 1)
			}
			ti.Shape[3] = 2
		}
	}},
	// Another architecture's name, and the tensors it optionally loads.
	{"architecture", func(rng *rand.Rand, p *parts) {
		p.setArch(pick(rng, archNames))
		switch rng.IntN(4) {
		case 0:
			p.addTensor("output.weight", gguf.TensorF16, 256, uint64(testmodel.TinyVocab(false).Size()))
		case 1:
			p.dropTensor(pick(rng, p.ts).Name)
		case 2:
			// what the qwen3, olmo2 and hunyuan loaders add to llama's
			p.addTensor("output.weight", gguf.TensorF16, 256, uint64(testmodel.TinyVocab(false).Size()))
			for _, n := range []string{"attn_q_norm", "attn_k_norm"} {
				for l := range 2 {
					p.addTensor(fmt.Sprintf("blk.%d.%s.weight", l, n), gguf.TensorF32, 64)
				}
			}
		}
	}},
	// A tensor removed.
	{"missing tensor", func(rng *rand.Rand, p *parts) {
		p.dropTensor(pick(rng, p.ts).Name)
	}},
	// Expert counts on any architecture, MoE or not.
	{"experts", func(rng *rand.Rand, p *parts) {
		if rng.IntN(2) == 0 {
			p.setArch(pick(rng, archNames))
		}
		switch rng.IntN(3) {
		case 0:
			p.set(p.akey("expert_count"), pick(rng, []uint32{0, 1, 2, 4, 8, 600}))
			p.set(p.akey("expert_used_count"), pick(rng, []uint32{0, 1, 2, 9}))
		case 1:
			p.set(p.akey("expert_count"), uint32(0))
		default:
			p.set(p.akey("expert_used_count"), pick(rng, []uint32{0, 1, 2}))
		}
		if rng.IntN(2) == 0 {
			p.set(p.akey("expert_feed_forward_length"), pick(rng, []uint32{0, 1, 64, 256}))
		}
	}},
	// RoPE dimensions other than the head size.
	{"rope dimensions", func(rng *rand.Rand, p *parts) {
		if rng.IntN(2) == 0 {
			p.setArch(pick(rng, archNames))
		}
		p.set(p.akey("rope.dimension_count"), pick(rng, oddSizes))
		if rng.IntN(4) == 0 {
			p.set(p.akey("rope.dimension_sections"), []int32{int32(rng.IntN(64)), int32(rng.IntN(64)), 0, 0})
		}
	}},
	// A vocabulary of another kind, special tokens missing, sizes wrong.
	{"vocabulary", func(rng *rand.Rand, p *parts) {
		if rng.IntN(3) > 0 {
			p.set("tokenizer.ggml.model", pick(rng, vocabModels))
		}
		for _, k := range []string{"bos", "eos", "unknown", "seperator", "padding"} {
			switch rng.IntN(4) {
			case 0:
				p.del("tokenizer.ggml." + k + "_token_id")
			case 1:
				p.set("tokenizer.ggml."+k+"_token_id", pick(rng, []uint32{0, 1, 2, 101, 1 << 20, math.MaxUint32}))
			}
		}
		for _, k := range []string{"add_bos_token", "add_eos_token", "add_sep_token"} {
			if rng.IntN(2) == 0 {
				p.set("tokenizer.ggml."+k, rng.IntN(2) == 0)
			}
		}
		if rng.IntN(3) == 0 {
			p.set(p.akey("vocab_size"), pick(rng, []uint32{0, 1, 100, 1000, 60_000_000, math.MaxUint32}))
		}
		if rng.IntN(4) == 0 {
			p.del("tokenizer.ggml.tokens")
		}
		if rng.IntN(3) == 0 {
			p.set("tokenizer.ggml.model", "t5")
			m := charsmap()
			switch rng.IntN(5) {
			case 0:
				m = damageCharsmap(m, rng.IntN(512), rng.Uint32())
			case 1:
				m = damageCharsmap(m, 'A', uint32(rng.IntN(1<<21))<<10|uint32(rng.IntN(2))<<8|'A')
			case 2:
				m = m[:rng.IntN(len(m))]
			case 3:
				binary.LittleEndian.PutUint32(m, rng.Uint32())
			}
			p.set("tokenizer.ggml.precompiled_charsmap", pick(rng, []any{m, m, m, []string{"x"}, []uint32{1, 2}, uint32(7), "x"}))
		}
	}},
	// Any tensor of any type.
	{"tensor type", func(rng *rand.Rand, p *parts) {
		p.ts[rng.IntN(len(p.ts))].Type = pick(rng, allTypes)
	}},
	// Any dimension of any tensor.
	{"tensor shape", func(rng *rand.Rand, p *parts) {
		ti := &p.ts[rng.IntN(len(p.ts))]
		i := rng.IntN(len(ti.Shape))
		ti.Shape[i] = pick(rng, []uint64{1, 2, ti.Shape[i] - 1, ti.Shape[i] + 1, ti.Shape[i] * 2, ti.Shape[i] / 2, 255})
	}},
	// Any metadata value replaced by one of another type or range.
	{"metadata value", func(rng *rand.Rand, p *parts) {
		i := rng.IntN(len(p.md))
		p.md[i].Value = pick(rng, []any{uint32(0), uint32(1), uint32(math.MaxUint32), int32(-1), uint64(1 << 40),
			float32(0), float32(-1), float32(math.NaN()), float32(math.Inf(1)), "x", true, []uint32{},
			[]uint32{1, 2}, []int32{-1, 0}, []float32{1}, []string{"a"}})
	}},
	// Per-layer arrays with surprising elements.
	{"per-layer arrays", func(rng *rand.Rand, p *parts) {
		k := pick(rng, []string{"attention.head_count", "attention.head_count_kv", "feed_forward_length",
			"attention.sliding_window_pattern", "swin_norm"})
		n := pick(rng, []int{1, 2, 3})
		a := make([]int32, n)
		for i := range a {
			a[i] = pick(rng, []int32{0, 1, 2, 3, 4, 256, -1})
		}
		p.set(p.akey(k), a)
		p.conform()
	}},
	// A tensor of another architecture, of any type and shape.
	{"extra tensor", func(rng *rand.Rand, p *parts) {
		if rng.IntN(2) == 0 {
			p.setArch(pick(rng, archNames))
		}
		shape := []uint64{256}
		for range rng.IntN(3) {
			shape = append(shape, pick(rng, []uint64{1, 2, 4, 64, 256}))
		}
		p.addTensor(pick(rng, extraTensors), pick(rng, []gguf.TensorType{gguf.TensorF32, gguf.TensorF16,
			gguf.TensorQ8_0, gguf.TensorBF16, gguf.TensorQ4_K}), shape...)
	}},
}

// structMutate writes to path the base model with one to three
// structure-aware mutations applied and returns the first one's family. A
// result the Writer refuses (a row not a multiple of its block) is drawn
// again: such files are the business of the byte-level mutations.
func structMutate(rng *rand.Rand, base *parts, path string) string {
	for {
		p := base.clone()
		fam := rng.IntN(len(structFamilies))
		structFamilies[fam].mutate(rng, p)
		for range rng.IntN(3) {
			structFamilies[rng.IntN(len(structFamilies))].mutate(rng, p)
		}
		if err := p.write(path); err == nil {
			return structFamilies[fam].name
		}
	}
}

// archNames are the architecture names the pinned llama.cpp knows, read
// from its source (llama-arch.cpp) by loadArchNames.
var (
	archNames    []string
	archNamesErr error
	archOnce     sync.Once
)

// llamaSource returns the directory of the sources of the llama.cpp the
// tests run on: the pinned module's in the module cache, or for the
// external engine (build tag llamacpp_external) the folder that
// LLAMALOOP_LLAMA_SRC names (make test-external LLAMA_CPP_SRC=DIR); without
// it the tests that read the sources skip.
func llamaSource(t testing.TB) string {
	t.Helper()
	if cgo.Engine != "module" {
		src := os.Getenv("LLAMALOOP_LLAMA_SRC")
		if src == "" {
			t.Skip("the external engine's sources are unknown: set LLAMALOOP_LLAMA_SRC (make test-external LLAMA_CPP_SRC=DIR)")
		}
		return src
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/ollama/ollama").Output()
	require.NoError(t, err, "go list the ollama module")
	return filepath.Join(strings.TrimSpace(string(out)), "llama", "llama.cpp")
}

func loadArchNames(t testing.TB) {
	t.Helper()
	src := llamaSource(t) // before Do: it may skip
	archOnce.Do(func() {
		var b []byte
		b, archNamesErr = os.ReadFile(filepath.Join(src, "src", "llama-arch.cpp"))
		for _, m := range regexp.MustCompile(`\{\s*LLM_ARCH_[A-Z0-9_]+,\s*"([^"]+)"\s*\}`).FindAllSubmatch(b, -1) {
			archNames = append(archNames, string(m[1]))
		}
	})
	require.NoError(t, archNamesErr)
	require.Greater(t, len(archNames), 50, "architecture names in llama-arch.cpp")
}

// writeStruct writes the structure-aware base model to path.
func writeStruct(path string) error { return testmodel.WriteRandom(path, structSpec()) }

// charsmap returns a precompiled UGM normalization map of one rule, "A"
// becomes "a": a 4-byte size, 512 nodes of a XOR-compressed double array
// (root base 0, the node of 'A' a leaf whose base leads to node 300, which
// holds offset 0 of the replacements), then "a\x00".
func charsmap() []uint8 {
	nodes := make([]uint32, 512)
	nodes['A'] = (('A' ^ 300) << 10) | 1<<8 | 'A'
	nodes[300] = 1 << 31
	b := binary.LittleEndian.AppendUint32(nil, uint32(4*len(nodes)))
	for _, x := range nodes {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	return append(b, 'a', 0)
}

// damageCharsmap overwrites one node of m with x.
func damageCharsmap(m []uint8, node int, x uint32) []uint8 {
	m = slices.Clone(m)
	binary.LittleEndian.PutUint32(m[4+4*node:], x)
	return m
}
