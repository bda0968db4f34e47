package llamacpp

// moeGating are the architectures whose graph gates its experts with the
// file's expert_gating_func (absent: 0, none); true where load_hparams
// replaces none by a default. TestMoEGatingMatchesLlamaCpp derives it.
var moeGating = map[string]bool{"afmoe": true, "deepseek2": true, "glm4moe": true, "bailingmoe2": false,
	"dots1": false, "lfm2moe": false, "smallthinker": false, "minimax-m2": false}

// archRelations checks what the pinned llama.cpp's loaders and graph
// builders assert on relations between an architecture's hyperparameters
// (the abort audit, testdata/aborts.tsv, names each site); layers is
// block_count and headsKV the key/value heads of each layer (nil when
// absent).
func (v *validator) archRelations(arch string, key func(string) string, layers uint64, headsKV []uint64) {
	embd, _ := v.uint(key("embedding_length"))
	if defaulted, ok := moeGating[arch]; ok {
		// build_moe_ffn aborts on a gating function it does not know.
		g, _ := v.uint(key("expert_gating_func"))
		if g > 3 || (g == 0 && !defaulted) {
			v.failf("%s: %d, but a %s model's experts need 1 (softmax), 2 (sigmoid) or 3 (softmax weights)",
				key("expert_gating_func"), g, arch)
			return
		}
	}
	switch arch {
	case "mamba2", "jamba", "granitehybrid":
		// load_tensors: GGML_ASSERT(2 * n_embd == d_inner)
		if d, ok := v.uint(key("ssm.inner_size")); ok && d != 2*embd {
			v.failf("%s: %d, but a %s model's inner size is twice its embedding width %d",
				key("ssm.inner_size"), d, arch, embd)
		}
	case "gemma-embedding":
		// load_hparams: the dense layers map to and from n_embd.
		for _, k := range []string{"dense_2_feat_in", "dense_3_feat_out"} {
			if x, ok := v.uint(key(k)); ok && x != 0 && x != embd {
				v.failf("%s: %d, want 0 or the embedding width %d", key(k), x, embd)
				return
			}
		}
	case "wavtokenizer-dec":
		// load_tensors: GGML_ASSERT(hparams.posnet.n_embd == hparams.convnext.n_embd)
		p, _ := v.uint(key("posnet.embedding_length"))
		c, _ := v.uint(key("convnext.embedding_length"))
		if p != c {
			v.failf("%s: %d, but %s is %d: a %s model needs both equal",
				key("posnet.embedding_length"), p, key("convnext.embedding_length"), c, arch)
		}
	case "deepseek2":
		// Temperature tuning divides positions by temperature_length
		// (llm_graph_input_attn_temp asserts it is not 0).
		if x, _ := v.float(key("attention.temperature_scale")); x != 0 {
			if n, _ := v.uint(key("attention.temperature_length")); n == 0 {
				v.failf("%s: missing or 0, but a %s model with %s %v needs it",
					key("attention.temperature_length"), arch, key("attention.temperature_scale"), v.raw(key("attention.temperature_scale")))
			}
		}
	case "smallthinker":
		// With a sliding window, every fourth block from the first is dense:
		// one block leaves none sliding, and create_memory asserts one.
		if w, _ := v.uint(key("attention.sliding_window")); w > 0 && layers < 2 {
			v.failf("%s: %d with %d block, but a %s model's first block is dense and no other slides",
				key("attention.sliding_window"), w, layers, arch)
		}
	case "qwen3next":
		// The linear-attention layers split the value heads (time_step_rank)
		// among the key heads (group_count).
		g, hasG := v.uint(key("ssm.group_count"))
		r, hasR := v.uint(key("ssm.time_step_rank"))
		if (hasG && g == 0) || (hasR && r == 0) || (hasG && hasR && r%g != 0) {
			v.failf("%s: %d value heads, not a positive multiple of the %d key heads (%s)",
				key("ssm.time_step_rank"), r, g, key("ssm.group_count"))
		}
	case "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7":
		// The time mix splits n_embd into heads of wkv.head_size (and a
		// division by 0 is SIGFPE).
		hs, ok := v.uint(key("wkv.head_size"))
		if !ok {
			return // llama.cpp reports the missing key
		}
		if hs == 0 || embd%hs != 0 {
			v.failf("%s: %d, want a positive divisor of the embedding width %d", key("wkv.head_size"), hs, embd)
			return
		}
		if arch != "rwkv6" && arch != "rwkv6qwen2" {
			return
		}
		// build_rwkv6_time_mix: GGML_ASSERT(n_head % n_head_kv == 0), with
		// n_head = n_embd / head_size.
		heads := embd / hs
		for i, kv := range headsKV {
			if kv != 0 && kv != heads && heads%kv != 0 {
				v.failf("%s: layer %d has %d key/value heads, which do not divide its %d heads of %d",
					key("attention.head_count_kv"), i, kv, heads, hs)
				return
			}
		}
	}
}
