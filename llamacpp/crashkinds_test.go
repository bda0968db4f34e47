package llamacpp_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crashKindsDirEnv names a directory TestCrashKinds writes its files to, so
// that they can be tried on another build.
const crashKindsDirEnv = "LLAMALOOP_CRASH_KINDS_DIR"

// crashKinds are the ten kinds of well-formed GGUF that aborted the pinned
// llama.cpp in issue 26 (in LoadModel, NewContext, the first Decode or the
// first Tokenize) and those the structure-aware mutations found since,
// made from their base model, each with the words of its refusal. Each of
// them but one marked aborted the process (or, for the none vocabulary,
// allocated 2.36 GB) with the previous pre-check; run with crashKindsDirEnv to try the files
// on another build.
var crashKinds = []struct {
	name string
	edit func(p *parts)
	want string
}{
	// binary_op: unsupported types (src1 bf16): ggml multiplies by a norm only in f32.
	{"bf16 norm", func(p *parts) { p.tensor("blk.0.attn_norm.weight").Type = gguf.TensorBF16 },
		`tensor "blk.0.attn_norm.weight": type bf16, but ggml's kernels take it only as f32`},
	{"q8_0 norm", func(p *parts) { p.tensor("output_norm.weight").Type = gguf.TensorQ8_0 },
		`tensor "output_norm.weight": type q8_0`},
	{"q4_K norm", func(p *parts) { p.tensor("blk.1.ffn_norm.weight").Type = gguf.TensorQ4_K },
		`tensor "blk.1.ffn_norm.weight": type q4_K`},
	// GGML_ASSERT(n_embd_head == hparams.n_embd_head_k) in the llama graph.
	{"llama key_length != value_length", func(p *parts) {
		p.set("llama.attention.key_length", uint32(64))
		p.set("llama.attention.value_length", uint32(32))
		p.conform()
	}, "llama.attention.key_length: 64, but the value heads are 32 wide"},
	// GGML_ASSERT(n_dims % 2 == 0) in the rope kernel.
	{"odd head size", func(p *parts) {
		p.set("llama.attention.key_length", uint32(63))
		p.set("llama.attention.value_length", uint32(63))
		p.set("llama.rope.dimension_count", uint32(63))
		p.conform()
	}, "llama.rope.dimension_count: 63, want an even number"},
	// GGML_ASSERT(a->ne[2] == b->ne[1]) in ggml_get_rows, built on the
	// tensor before its shape is checked.
	{"3-D token_embd", func(p *parts) {
		te := p.tensor("token_embd.weight")
		te.Shape = append(te.Shape, 2)
	}, `tensor "token_embd.weight": shape [256 854 2], but an embedding is a matrix`},
	// SIGSEGV in the first decode: the solar graph multiplies by a null output head.
	{"solar without output.weight", func(p *parts) { p.setArch("solar") },
		`tensor "output.weight": missing, and a solar model has no fallback`},
	// GGML_ASSERT(n_embd_head == hparams.n_rot) in the baichuan graph.
	{"baichuan", func(p *parts) {
		p.setArch("baichuan")
		p.addTensor("output.weight", gguf.TensorF16, 256, 854)
		p.set("baichuan.block_count", uint32(32))
		p.set("baichuan.rope.dimension_count", uint32(32))
	}, "baichuan.rope.dimension_count: 32, but a baichuan model rotates whole heads of 64"},
	// GGML_ASSERT(n_expert > 0) in the loaders.
	{"smallthinker without experts", func(p *parts) { p.setArch("smallthinker") },
		"smallthinker.expert_count: 0 experts, 0 used: a smallthinker model needs experts"},
	{"llada-moe without experts", func(p *parts) {
		p.setArch("llada-moe")
		p.addTensor("output.weight", gguf.TensorF16, 256, 854)
	}, "llada-moe.expert_count: 0 experts, 0 used: a llada-moe model needs experts"},
	// GGML_ASSERT(n_embd_head == hparams.n_rot) in the hunyuan-dense graph.
	{"hunyuan-dense rope dimensions", func(p *parts) {
		p.setArch("hunyuan-dense")
		p.set("hunyuan-dense.rope.dimension_count", uint32(32))
		for _, n := range []string{"blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight",
			"blk.1.attn_q_norm.weight", "blk.1.attn_k_norm.weight"} {
			p.addTensor(n, gguf.TensorF32, 64)
		}
	}, "hunyuan-dense.rope.dimension_count: 32, but a hunyuan-dense model rotates whole heads of 64"},
	// GGML_ASSERT(special_bos_id != LLAMA_TOKEN_NULL) in the first Tokenize.
	{"t5 vocabulary adding a BOS it lacks", func(p *parts) {
		p.set("tokenizer.ggml.model", "t5")
		p.del("tokenizer.ggml.bos_token_id")
		p.set("tokenizer.ggml.add_bos_token", true)
	}, `tokenizer.ggml.add_bos_token: true, but the "t5" vocabulary has no BOS token`},
	// The same in the BPE tokenizer of the glm4 pre-tokenizer, which has no
	// BOS by default (the abort audit).
	{"glm4 vocabulary adding a BOS it lacks", func(p *parts) {
		p.set("tokenizer.ggml.model", "gpt2")
		p.set("tokenizer.ggml.pre", "glm4")
		p.set("tokenizer.ggml.merges", []string{"a b"})
		p.del("tokenizer.ggml.bos_token_id")
		p.set("tokenizer.ggml.add_bos_token", true)
	}, `tokenizer.ggml.add_bos_token: true, but the "gpt2" vocabulary has no BOS token`},
	// 2.36 GB of empty tokens before llama.cpp reads a tensor.
	{"none vocabulary of 60M tokens", func(p *parts) {
		p.set("tokenizer.ggml.model", "none")
		p.set("llama.vocab_size", uint32(60_000_000))
	}, `llama.vocab_size: 60000000 tokens, but tensor "token_embd.weight" embeds 854`},
	// The same without an embedding: bounded by the file.
	{"none vocabulary of 60M tokens, no embedding", func(p *parts) {
		p.set("tokenizer.ggml.model", "none")
		p.set("llama.vocab_size", uint32(60_000_000))
		p.dropTensor("token_embd.weight")
	}, "llama.vocab_size: 60000000 tokens in a file of"},
	// Found here, by the same families: a UGM normalization map whose
	// walk leaves its array throws out of llama_tokenize (terminate).
	{"t5 charsmap past its array", func(p *parts) {
		p.set("tokenizer.ggml.model", "t5")
		p.set("tokenizer.ggml.precompiled_charsmap", damageCharsmap(charsmap(), 'H', ('H'^5000)<<10|1<<8|'H'))
	}, `tokenizer.ggml.precompiled_charsmap: node 5000 is past the array's 512`},
	// GGML_ASSERT(ctx->kv[key_id].is_array) in gguf_get_arr_type.
	{"t5 charsmap not an array", func(p *parts) {
		p.set("tokenizer.ggml.model", "t5")
		p.set("tokenizer.ggml.precompiled_charsmap", uint32(7))
	}, `tokenizer.ggml.precompiled_charsmap: is a uint32, want an array of bytes`},
	// The same and gguf_get_arr_str's type assertion on the merges: both
	// are read before the tokens.
	{"t5 charsmap not an array, no tokens", func(p *parts) {
		p.set("tokenizer.ggml.model", "t5")
		p.set("tokenizer.ggml.precompiled_charsmap", "x")
		p.del("tokenizer.ggml.tokens")
	}, `tokenizer.ggml.precompiled_charsmap: is a string, want an array of bytes`},
	{"gpt2 merges not strings, no tokens", func(p *parts) {
		p.set("tokenizer.ggml.model", "gpt2")
		p.set("tokenizer.ggml.merges", uint32(1))
		p.del("tokenizer.ggml.tokens")
	}, `tokenizer.ggml.merges: is a uint32, want an array of strings`},
	// By rule only: the probe llama.cpp builds for an expert tensor divides
	// by expert_used_count (a llama loader, as here, does not load it and
	// refuses the extra tensor itself).
	{"expert tensor without used experts", func(p *parts) {
		p.addTensor("blk.0.ffn_up_exps.weight", gguf.TensorF16, 256, 256, 2)
	}, `tensor "blk.0.ffn_up_exps.weight": expert weights, but no expert is used`},
	// GGML_ASSERT(c->type == GGML_TYPE_F32) in ggml_rope_ext.
	{"f16 rope factors", func(p *parts) { p.addTensor("rope_freqs.weight", gguf.TensorF16, 32) },
		`tensor "rope_freqs.weight": type f16, but ggml's kernels take it only as f32`},
	// Issue 35: SIGSEGV in the first Encode (get_rows of a null bias): every
	// encoder block without its own relative-attention bias takes block 0's.
	{"t5 without enc.blk.0.attn_rel_b", func(p *parts) {
		p.becomeT5()
		p.dropTensor("enc.blk.0.attn_rel_b.weight")
	}, `tensor "enc.blk.0.attn_rel_b.weight": missing, and a t5 graph takes block 0's attn_rel_b for every block without its own`},
	// The same in the decoder: SIGSEGV in NewContext, which reserves the
	// decoder's graph.
	{"t5 without dec.blk.0.attn_rel_b", func(p *parts) {
		p.becomeT5()
		p.dropTensor("dec.blk.0.attn_rel_b.weight")
	}, `tensor "dec.blk.0.attn_rel_b.weight": missing, and a t5 graph takes block 0's attn_rel_b`},
	// By rule: the encoder-only variant's graph is the same (llamaloop makes
	// no context for an encoder-only model, so nothing crashed).
	{"t5encoder without enc.blk.0.attn_rel_b", func(p *parts) {
		p.becomeT5()
		p.setArch("t5encoder")
		p.ts = slices.DeleteFunc(p.ts, func(ti gguf.TensorInfo) bool { return strings.HasPrefix(ti.Name, "dec.") })
		p.dropTensor("enc.blk.0.attn_rel_b.weight")
	}, `tensor "enc.blk.0.attn_rel_b.weight": missing, and a t5encoder graph takes block 0's attn_rel_b`},
	// By rule: an rwkv6 block without time_mix_lerp_fused adds the five
	// separate interpolations; the loader asserts only the first.
	{"rwkv6 with time_mix_lerp_w alone", func(p *parts) {
		p.setArch("rwkv6")
		p.addTensor("blk.0.time_mix_lerp_w.weight", gguf.TensorF32, 256, 1, 1)
	}, `tensor "blk.0.time_mix_lerp_k.weight": missing, and an rwkv6 block without time_mix_lerp_fused needs all of`},
	// By rule: an rwkv6qwen2 block with time_mix_first takes the RWKV6 path,
	// which multiplies by a time_mix_ln that rwkv6qwen2 never loads.
	{"rwkv6qwen2 with time_mix_first", func(p *parts) {
		p.setArch("rwkv6qwen2")
		p.set("rwkv6qwen2.token_shift_count", uint32(1))
		p.addTensor("blk.1.time_mix_first.weight", gguf.TensorF32, 64, 4)
	}, `tensor "blk.1.time_mix_first.weight": an rwkv6qwen2 block with it normalizes by time_mix_ln`},
	// The abort audit (testdata/aborts.tsv). GGML_ABORT in the baichuan
	// graph, which knows the model types of 32 and 40 blocks only.
	{"baichuan of 2 blocks", func(p *parts) {
		p.setArch("baichuan")
		p.addTensor("output.weight", gguf.TensorF16, 256, 854)
	}, "baichuan.block_count: 2, but a baichuan model needs it 32 or 40"},
	// By rule, each an assertion of a loader or graph builder on two
	// hyperparameters.
	{"rwkv6qwen2 shifting two tokens", func(p *parts) { p.setArch("rwkv6qwen2") },
		"rwkv6qwen2.token_shift_count: 2, but a rwkv6qwen2 model needs it 1"},
	{"rwkv7 heads not dividing the width", func(p *parts) {
		p.setArch("rwkv7")
		p.set("rwkv7.wkv.head_size", uint32(100))
	}, "rwkv7.wkv.head_size: 100, want a positive divisor of the embedding width 256"},
	{"lfm2 key_length != value_length", func(p *parts) {
		p.setArch("lfm2")
		p.set("lfm2.attention.head_count", []int32{0, 4})
		p.set("lfm2.attention.key_length", uint32(64))
	}, "lfm2.attention.key_length: 64, but the value heads are 0 wide"},
	{"mamba2 inner size", func(p *parts) {
		p.setArch("mamba2")
		p.set("mamba2.ssm.inner_size", uint32(300))
	}, "mamba2.ssm.inner_size: 300, but a mamba2 model's inner size is twice its embedding width 256"},
	{"qwen3next value heads", func(p *parts) {
		p.setArch("qwen3next")
		p.set("qwen3next.ssm.group_count", uint32(3))
		p.set("qwen3next.ssm.time_step_rank", uint32(4))
	}, "qwen3next.ssm.time_step_rank: 4 value heads, not a positive multiple of the 3 key heads"},
	{"smallthinker sliding window in one block", func(p *parts) {
		p.setArch("smallthinker")
		p.set("smallthinker.block_count", uint32(1))
		p.set("smallthinker.expert_count", uint32(4))
		p.set("smallthinker.expert_used_count", uint32(2))
		p.set("smallthinker.expert_gating_func", uint32(2))
		p.set("smallthinker.attention.sliding_window", uint32(4096))
	}, "smallthinker.attention.sliding_window: 4096 with 1 block"},
	{"dots1 without a gating function", func(p *parts) {
		p.setArch("dots1")
		p.set("dots1.expert_count", uint32(4))
		p.set("dots1.expert_used_count", uint32(2))
	}, "dots1.expert_gating_func: 0, but a dots1 model's experts need 1 (softmax), 2 (sigmoid) or 3"},
	{"gemma-embedding dense width", func(p *parts) {
		p.setArch("gemma-embedding")
		p.set("gemma-embedding.dense_2_feat_in", uint32(100))
	}, "gemma-embedding.dense_2_feat_in: 100, want 0 or the embedding width 256"},
	{"wavtokenizer-dec posnet of 7 blocks", func(p *parts) {
		p.setArch("wavtokenizer-dec")
		p.set("wavtokenizer-dec.posnet.block_count", uint32(7))
	}, "wavtokenizer-dec.posnet.block_count: 7, but a wavtokenizer-dec model needs it at most 6"},
	{"wavtokenizer-dec posnet width", func(p *parts) {
		p.setArch("wavtokenizer-dec")
		p.set("wavtokenizer-dec.posnet.embedding_length", uint32(128))
		p.set("wavtokenizer-dec.convnext.embedding_length", uint32(256))
	}, "wavtokenizer-dec.posnet.embedding_length: 128, but wavtokenizer-dec.convnext.embedding_length is 256"},
	{"deepseek2 temperature without its length", func(p *parts) {
		p.setArch("deepseek2")
		p.set("deepseek2.expert_count", uint32(4))
		p.set("deepseek2.expert_used_count", uint32(2))
		p.set("deepseek2.attention.temperature_scale", float32(0.1))
	}, "deepseek2.attention.temperature_length: missing or 0, but a deepseek2 model with deepseek2.attention.temperature_scale 0.1 needs it"},
	{"grovemoe without experts per group", func(p *parts) {
		p.setArch("grovemoe")
		p.set("grovemoe.expert_count", uint32(4))
		p.set("grovemoe.expert_used_count", uint32(2))
		p.set("grovemoe.experts_per_group", uint32(0))
	}, "grovemoe.experts_per_group: 0, but a grovemoe model needs it above 0"},
}

// TestUGMCharsmap: a t5 (UGM) vocabulary with a well-formed normalization
// map loads, and its rule applies ("A" tokenizes as "a" does).
func TestUGMCharsmap(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	src := filepath.Join(t.TempDir(), "struct.gguf")
	require.NoError(t, writeStruct(src))
	p := readParts(t, src)
	p.set("tokenizer.ggml.model", "t5")
	p.set("tokenizer.ggml.precompiled_charsmap", charsmap())
	path := filepath.Join(t.TempDir(), "t5.gguf")
	require.NoError(t, p.write(path))
	require.Equal(t, "ok", runChild(t, path, false).result)
	m, err := llamacpp.LoadModel(path, llamacpp.ModelParams{VocabOnly: true})
	require.NoError(t, err)
	defer m.Close()
	upper, err := m.Vocab().Tokenize("A", false, false)
	require.NoError(t, err)
	lower, err := m.Vocab().Tokenize("a", false, false)
	require.NoError(t, err)
	assert.Equal(t, lower, upper)
	// Without the map, "A" is a token of its own.
	p.del("tokenizer.ggml.precompiled_charsmap")
	plain := filepath.Join(t.TempDir(), "t5-plain.gguf")
	require.NoError(t, p.write(plain))
	m2, err := llamacpp.LoadModel(plain, llamacpp.ModelParams{VocabOnly: true})
	require.NoError(t, err)
	defer m2.Close()
	upper2, err := m2.Vocab().Tokenize("A", false, false)
	require.NoError(t, err)
	assert.NotEqual(t, lower, upper2)
}

// TestCrashKinds: each kind of crafted model that aborted llama.cpp is
// refused by LoadModel, before llama.cpp reads it, with an error
// naming the key or tensor, and in a child process nothing crashes
// or allocates more than 512 MB. The unmutated base model loads, decodes
// and tokenizes.
func TestCrashKinds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process per case")
	}
	src := filepath.Join(t.TempDir(), "struct.gguf")
	require.NoError(t, writeStruct(src))
	require.Equal(t, "ok", runChild(t, src, false).result)
	base := readParts(t, src)
	dir := t.TempDir()
	if d := os.Getenv(crashKindsDirEnv); d != "" {
		dir = d
	}
	for i, c := range crashKinds {
		t.Run(c.name, func(t *testing.T) {
			p := base.clone()
			c.edit(p)
			path := filepath.Join(dir, "kind"+string(rune('a'+i))+".gguf")
			require.NoError(t, p.write(path))
			want := c.want
			if _, ok := llamacpp.ArchRuleNames()[p.arch()]; !ok {
				// an architecture this engine lacks (solar after the pin) is refused as such
				want = fmt.Sprintf("general.architecture: %q is not an architecture", p.arch())
			} else if p.arch() == "qwen3next" && slices.Contains(llamacpp.ArchRuleNames()[p.arch()], "needsExperts") {
				// qwen3next's loader asserts experts after the pin (not in the pinned
				// engine's rules): refused for that first
				want = "needs experts"
			}
			requireRefused(t, path, want)
			err := loadReadingHeaderOnly(t, path)
			require.ErrorIs(t, err, llamacpp.ErrLoad)
			assert.Contains(t, err.Error(), want)
		})
	}
}

// writeSplit writes p as a model in two files, as llama-gguf-split does:
// the metadata and the first tensors in the first, the other tensors in
// the second, both with the split keys; second edits the second file's.
func writeSplit(t *testing.T, p *parts, dir string, second func(q *parts)) string {
	t.Helper()
	n := len(p.ts)
	first, rest := p.clone(), p.clone()
	first.ts, rest.ts = first.ts[:n/2], rest.ts[n/2:]
	rest.md = nil
	for i, q := range []*parts{first, rest} {
		q.set("split.no", uint16(i))
		q.set("split.count", uint16(2))
		q.set("split.tensors.count", int32(n))
	}
	second(rest)
	require.NoError(t, first.write(filepath.Join(dir, "m-00001-of-00002.gguf")))
	require.NoError(t, rest.write(filepath.Join(dir, "m-00002-of-00002.gguf")))
	return filepath.Join(dir, "m-00001-of-00002.gguf")
}

// TestSplitModel: llama.cpp opens the other files of a split model itself;
// LoadModel checks them too. A well-formed split model loads and decodes;
// a second file with a bf16 norm or a split.no that is not a u16 (which
// gguf_get_val_u16 asserts) is refused, naming it.
func TestSplitModel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	src := filepath.Join(t.TempDir(), "struct.gguf")
	require.NoError(t, writeStruct(src))
	base := readParts(t, src)
	ok := writeSplit(t, base, t.TempDir(), func(*parts) {})
	require.Equal(t, "ok", runChild(t, ok, false).result)

	norm := writeSplit(t, base, t.TempDir(), func(q *parts) { q.tensor("output_norm.weight").Type = gguf.TensorBF16 })
	requireRefused(t, norm, `tensor "output_norm.weight": type bf16`)

	dir := t.TempDir()
	no := writeSplit(t, base, dir, func(q *parts) { q.set("split.no", uint32(1)) })
	requireRefused(t, no, "m-00002-of-00002.gguf: split.no: is a uint32, want a u16")
}

// crashesUnchecked are the kinds that TestCrashKindsUnchecked shows still
// crash the pinned llama.cpp when LoadModel hands them over unchecked.
var crashesUnchecked = []string{"t5 without enc.blk.0.attn_rel_b", "t5 without dec.blk.0.attn_rel_b",
	"baichuan of 2 blocks", "glm4 vocabulary adding a BOS it lacks"}

// crashKindsUncheckedEnv runs TestCrashKindsUnchecked, whose children
// crash on purpose (each abort may print a backtrace through gdb).
const crashKindsUncheckedEnv = "LLAMALOOP_CRASH_KINDS_UNCHECKED"

// TestCrashKindsUnchecked: without the validation, each kind of
// crashesUnchecked crashes a child process: its check is what prevents it.
func TestCrashKindsUnchecked(t *testing.T) {
	if os.Getenv(crashKindsUncheckedEnv) == "" {
		t.Skip("crashes child processes on purpose; set " + crashKindsUncheckedEnv + "=1")
	}
	src := filepath.Join(t.TempDir(), "struct.gguf")
	require.NoError(t, writeStruct(src))
	base := readParts(t, src)
	for _, name := range crashesUnchecked {
		i := slices.IndexFunc(crashKinds, func(c struct {
			name string
			edit func(p *parts)
			want string
		}) bool {
			return c.name == name
		})
		require.GreaterOrEqual(t, i, 0, name)
		t.Run(name, func(t *testing.T) {
			p := base.clone()
			crashKinds[i].edit(p)
			path := filepath.Join(t.TempDir(), "kind.gguf")
			require.NoError(t, p.write(path))
			run := runChildEnv(t, path, childUncheckedEnv+"=1")
			assert.True(t, run.crashed, "the child did not crash: %s", run.result)
			t.Logf("unchecked: %s", crashCause(run.output))
		})
	}
}

// TestNoVocabTokenQueries: a model without a tokenizer ("none") loads, and
// the token queries that llama.cpp asserts a vocabulary type for (the
// abort audit: token_get_attr, get_token_data) are errors.
func TestNoVocabTokenQueries(t *testing.T) {
	src := filepath.Join(t.TempDir(), "struct.gguf")
	require.NoError(t, writeStruct(src))
	p := readParts(t, src)
	p.set("tokenizer.ggml.model", "none")
	p.set("llama.vocab_size", uint32(854))
	path := filepath.Join(t.TempDir(), "none.gguf")
	require.NoError(t, p.write(path))
	m, err := llamacpp.LoadModel(path, llamacpp.ModelParams{})
	require.NoError(t, err)
	defer m.Close()
	v := m.Vocab()
	require.Equal(t, 854, v.Size())
	_, err = v.Attr(0)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	_, err = v.Text(0)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	_, err = v.Score(0)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	_, err = v.Piece(0, true)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
}
