package llamacpp

import "github.com/llamaloop/llamaloop/internal/gguf"

// What the pinned llama.cpp asserts per architecture, beyond the checks of
// load_hparams that hold for all: the graph builders (src/models/*.cpp)
// assert on head sizes when a context is made, some tensor loaders
// (load_tensors) assert that a mixture-of-experts model has experts, and one
// loader takes the output head as optional without the fallback to the
// token embedding that its graph needs (a null dereference in the first
// decode). TestArchRulesMatchLlamaCpp derives archRules (validate_tables_*.go,
// one per engine) from those sources.

// archRule is a set of an architecture's constraints.
type archRule uint8

const (
	sameKV       archRule = 1 << iota // GGML_ASSERT(n_embd_head_k == n_embd_head_v)
	rotIsK                            // GGML_ASSERT(n_rot == n_embd_head_k)
	rotIsV                            // GGML_ASSERT(n_rot == n_embd_head_v)
	ropes                             // the graph applies RoPE over n_rot dimensions: even, at most n_embd_head_k
	needsExperts                      // the loader asserts n_expert > 0 and n_expert_used > 0
	needsOutput                       // output.weight is optional to the loader but not to the graph
)

// archHparams checks an architecture's rules on the head sizes as
// load_hparams computes them: n_embd_head_k and n_embd_head_v default to
// n_embd / n_head of layer 0 (all zero without heads), n_rot to
// n_embd_head_k.
func (v *validator) archHparams(arch string, key func(string) string, heads []uint64, layers uint64) {
	rule, ok := archRules[arch]
	if !ok {
		return // llama.cpp refuses an architecture it cannot build
	}
	if v.archValueChecks(arch); v.err != "" {
		return
	}
	if len(heads) > 0 && heads[0] > 0 {
		embd, _ := v.uint(key("embedding_length"))
		hk, hv := embd/heads[0], embd/heads[0]
		if x, ok := v.uint(key("attention.key_length")); ok {
			hk = x
		}
		if x, ok := v.uint(key("attention.value_length")); ok {
			hv = x
		}
		rot := hk
		if x, ok := v.uint(key("rope.dimension_count")); ok {
			rot = x
		}
		switch {
		case rule&sameKV != 0 && hk != hv:
			v.failf("%s: %d, but the value heads are %d wide (%s): a %s model needs both equal",
				key("attention.key_length"), hk, hv, key("attention.value_length"), arch)
		case rule&rotIsK != 0 && rot != hk:
			v.failf("%s: %d, but a %s model rotates whole heads of %d", key("rope.dimension_count"), rot, arch, hk)
		case rule&rotIsV != 0 && rot != hv:
			v.failf("%s: %d, but a %s model rotates whole heads of %d", key("rope.dimension_count"), rot, arch, hv)
		case rule&ropes != 0 && (rot%2 != 0 || rot > hk):
			v.failf("%s: %d, want an even number of at most the head size %d", key("rope.dimension_count"), rot, hk)
		}
		if v.err != "" {
			return
		}
	}
	if len(heads) > 0 && heads[0] == 0 && rule&sameKV != 0 {
		// A hybrid whose first layer has no attention: llama.cpp's head
		// sizes are the key and value lengths, 0 when absent.
		hk, _ := v.uint(key("attention.key_length"))
		hv, _ := v.uint(key("attention.value_length"))
		if hk != hv {
			v.failf("%s: %d, but the value heads are %d wide (%s): a %s model needs both equal",
				key("attention.key_length"), hk, hv, key("attention.value_length"), arch)
			return
		}
	}
	if rule&needsExperts != 0 {
		n, _ := v.uint(key("expert_count"))
		used, _ := v.uint(key("expert_used_count"))
		dense, _ := v.uint(key("leading_dense_block_count"))
		if (n == 0 || used == 0) && (arch != "lfm2moe" || dense < layers) {
			v.failf("%s: %d experts, %d used: a %s model needs experts", key("expert_count"), n, used, arch)
			return
		}
	}
	if _, ok := v.tensor("output.weight"); rule&needsOutput != 0 && !ok {
		v.failf(`tensor "output.weight": missing, and a %s model has no fallback for its output head`, arch)
	}
}

// tensorUses checks each tensor against the operation it feeds (see
// tensorOps); usedExperts is expert_used_count, the width of the probe
// llama.cpp builds for an expert tensor.
func (v *validator) tensorUses(usedExperts uint64) {
	for _, t := range v.ts {
		op, weight := opOf(t.Name)
		if op == 0 || op == opNone {
			continue // llama.cpp does not load it, or does not use it
		}
		if !weight {
			op = opF32 // a bias or scale is added or multiplied
		}
		rank := len(t.Shape)
		for rank > 1 && t.Shape[rank-1] == 1 {
			rank--
		}
		name := gguf.Quote(t.Name)
		switch {
		case (op == opF32 || op == opDiv || op == opSSMConv) && t.Type != gguf.TensorF32:
			v.failf("tensor %s: type %v, but ggml's kernels take it only as f32", name, t.Type)
		case op == opIm2Col && t.Type != gguf.TensorF32 && t.Type != gguf.TensorF16:
			v.failf("tensor %s: type %v, but a convolution kernel is f32 or f16", name, t.Type)
		case op == opGetRows && !getRowsType(t.Type):
			v.failf("tensor %s: type %v, whose rows ggml cannot read", name, t.Type)
		case op == opGetRows && rank > 2:
			v.failf("tensor %s: shape %v, but an embedding is a matrix", name, t.Shape)
		case op == opDiv && rank > 1:
			v.failf("tensor %s: shape %v, but it divides by a vector", name, t.Shape)
		case op == opSSMConv && rank != 2:
			v.failf("tensor %s: shape %v, but a convolution kernel is a matrix", name, t.Shape)
		case op == opMatMulID && rank > 3:
			v.failf("tensor %s: shape %v, but expert weights have at most 3 dimensions", name, t.Shape)
		case op == opMatMulID && usedExperts == 0:
			v.failf("tensor %s: expert weights, but no expert is used (expert_used_count is 0)", name)
		}
		if v.err != "" {
			return
		}
	}
}

// archValue is a graph builder's assertion on one hyperparameter.
type archValue struct {
	key    string // without the architecture's prefix
	def    uint64 // llama.cpp's value when the key is absent
	ok     func(uint64) bool
	want   string // for the message
	assert string // the assertion in src/models, which TestArchValuesInLlamaCpp finds
}

var (
	tokenShift = archValue{"token_shift_count", 2, func(x uint64) bool { return x == 2 }, "2",
		"GGML_ASSERT(hparams.token_shift_count == 2)"}
	shortConv = archValue{"shortconv.l_cache", 2, func(x uint64) bool { return x > 1 }, "above 1",
		"GGML_ASSERT(hparams.n_shortconv_l_cache > 1)"}

	// rwkv6qwen2 and arwkv7 keep one shifted token: n_embd_r() is
	// token_shift_count * n_embd.
	oneTokenShift = archValue{"token_shift_count", 2, func(x uint64) bool { return x == 1 }, "1",
		"GGML_ASSERT(n_embd == hparams.n_embd_r())"}
)

// archValues holds the builders' (and some loaders') assertions on single
// hyperparameters.
var archValues = map[string][]archValue{
	// The graph switches on the model type, which load_hparams derives
	// from the block count, and aborts on any other.
	"baichuan": {{"block_count", 0, func(x uint64) bool { return x == 32 || x == 40 }, "32 or 40",
		`GGML_ABORT("fatal error")`}},
	"ernie4_5-moe": {{"interleave_moe_layer_step", 1, func(x uint64) bool { return x > 0 }, "above 0",
		`GGML_ASSERT(hparams.n_moe_layer_step > 0 && "Ernie 4.5 MoE requires n_moe_layer_step > 0")`}},
	"grovemoe": {{"experts_per_group", 1, func(x uint64) bool { return x > 0 }, "above 0",
		`GGML_ASSERT(hparams.n_group_experts > 0 && "n_group_experts must be > 0 for GROVEMOE")`}},
	"lfm2":       {shortConv},
	"lfm2moe":    {shortConv},
	"rwkv6":      {tokenShift},
	"rwkv7":      {tokenShift},
	"rwkv6qwen2": {oneTokenShift},
	"arwkv7":     {oneTokenShift},
	// Both the loader and the graph build posnet blocks 0 to 5 and abort
	// on another.
	"wavtokenizer-dec": {{"posnet.block_count", 0, func(x uint64) bool { return x <= 6 }, "at most 6",
		`GGML_ABORT("unknown posnet layer")`}},
}

// archValueChecks checks arch's values of archValues.
func (v *validator) archValueChecks(arch string) {
	for _, c := range archValues[arch] {
		x, ok := v.uint(arch + "." + c.key)
		if !ok {
			x = c.def
		}
		if !c.ok(x) {
			v.failf("%s.%s: %d, but a %s model needs it %s", arch, c.key, x, arch, c.want)
			return
		}
	}
}
