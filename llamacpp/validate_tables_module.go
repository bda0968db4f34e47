//go:build !llamacpp_external

package llamacpp

// The validation's tables for the default engine, the pinned module's
// llama.cpp ec98e2002: TestArchRulesMatchLlamaCpp, TestTensorOpsMatchLlamaCpp
// and TestPreTokenizersMatchLlamaCpp derive the same from its sources.
// validate_tables_external.go holds those of the external engine.

// seqStateMagic opens a sequence state, before the memory's part (0: the pinned llama.cpp writes none).
const seqStateMagic = 0

// unknownPreTokenizerFallsBack: the pinned llama.cpp falls back to its default pre-tokenizer for an unknown tokenizer.ggml.pre, as for a missing one.
const unknownPreTokenizerFallsBack = true

// tablesEngine names the llama.cpp these tables come from, for messages.
const tablesEngine = "llama.cpp ec98e2002 (the pinned module)"

// archRules holds the rules of every architecture the pinned llama.cpp can
// build a graph for. lfm2 shares lfm2moe's loader but no layer of it is a
// mixture of experts; lfm2moe needs experts only in the layers after its
// leading_dense_block_count.
var archRules = map[string]archRule{
	"afmoe":            sameKV | ropes,
	"apertus":          sameKV | rotIsV | ropes,
	"arcee":            sameKV | rotIsV | ropes,
	"arctic":           sameKV | rotIsV | ropes,
	"arwkv7":           0,
	"baichuan":         sameKV | rotIsV | ropes,
	"bailingmoe":       ropes | needsExperts,
	"bailingmoe2":      sameKV | ropes | needsExperts,
	"bert":             sameKV | ropes,
	"bitnet":           sameKV | ropes,
	"bloom":            sameKV,
	"chameleon":        sameKV | rotIsV | ropes,
	"chatglm":          sameKV | ropes,
	"codeshell":        sameKV | rotIsV | ropes,
	"cogvlm":           sameKV | rotIsV | ropes,
	"cohere2":          sameKV | ropes,
	"command-r":        sameKV | ropes,
	"dbrx":             sameKV | rotIsV | ropes | needsExperts,
	"deci":             sameKV | rotIsV | ropes,
	"deepseek":         sameKV | rotIsV | ropes | needsExperts,
	"deepseek2":        ropes | needsExperts,
	"dots1":            sameKV | rotIsV | ropes | needsExperts,
	"dream":            sameKV | rotIsV | ropes,
	"ernie4_5":         sameKV | rotIsV | ropes,
	"ernie4_5-moe":     sameKV | rotIsV | ropes,
	"exaone":           sameKV | rotIsV | ropes,
	"exaone4":          sameKV | rotIsK | ropes,
	"falcon":           sameKV | rotIsV | ropes,
	"falcon-h1":        ropes,
	"gemma":            ropes,
	"gemma-embedding":  ropes,
	"gemma2":           ropes,
	"gemma3":           ropes,
	"gemma3n":          ropes,
	"glm4":             sameKV | ropes,
	"glm4moe":          sameKV | ropes | needsExperts,
	"gpt-oss":          ropes,
	"gpt2":             sameKV,
	"gptneox":          sameKV | ropes,
	"granite":          sameKV | rotIsV | ropes,
	"granitehybrid":    sameKV | ropes,
	"granitemoe":       sameKV | rotIsV | ropes,
	"grok":             sameKV | rotIsV | ropes | needsExperts,
	"grovemoe":         sameKV | rotIsV | ropes | needsExperts,
	"hunyuan-dense":    sameKV | rotIsV | ropes,
	"hunyuan-moe":      sameKV | rotIsV | ropes,
	"internlm2":        sameKV | rotIsV | ropes,
	"jais":             sameKV,
	"jamba":            0,
	"jina-bert-v2":     sameKV | ropes,
	"jina-bert-v3":     sameKV | ropes,
	"lfm2":             sameKV | ropes,
	"lfm2moe":          sameKV | ropes | needsExperts,
	"llada":            sameKV | rotIsV | ropes,
	"llada-moe":        sameKV | rotIsV | ropes | needsExperts,
	"llama":            sameKV | rotIsV | ropes,
	"llama4":           sameKV | rotIsV | ropes,
	"mamba":            0,
	"mamba2":           0,
	"minicpm":          sameKV | rotIsV | ropes,
	"minicpm3":         ropes,
	"minimax-m2":       sameKV | ropes,
	"mistral3":         sameKV | rotIsV | ropes,
	"mpt":              sameKV,
	"nemotron":         sameKV | ropes,
	"nemotron_h":       sameKV,
	"nemotron_h_moe":   sameKV,
	"neo-bert":         sameKV | ropes,
	"nomic-bert":       sameKV | ropes,
	"nomic-bert-moe":   sameKV | ropes,
	"olmo":             sameKV | rotIsV | ropes,
	"olmo2":            sameKV | rotIsV | ropes,
	"olmoe":            sameKV | rotIsV | ropes | needsExperts,
	"openelm":          sameKV | ropes,
	"orion":            sameKV | rotIsV | ropes,
	"pangu-embedded":   sameKV | rotIsV | ropes,
	"phi2":             sameKV | ropes,
	"phi3":             sameKV | ropes,
	"phimoe":           sameKV | ropes,
	"plamo":            sameKV | rotIsV | ropes,
	"plamo2":           ropes,
	"plm":              ropes,
	"qwen":             sameKV | ropes,
	"qwen2":            sameKV | rotIsV | ropes,
	"qwen2moe":         sameKV | rotIsV | ropes | needsExperts,
	"qwen2vl":          sameKV | rotIsV | ropes,
	"qwen3":            sameKV | rotIsV | ropes,
	"qwen3moe":         sameKV | rotIsV | ropes | needsExperts,
	"qwen3next":        sameKV | ropes,
	"qwen3vl":          sameKV | rotIsV | ropes,
	"qwen3vlmoe":       sameKV | rotIsV | ropes | needsExperts,
	"refact":           sameKV,
	"rnd1":             sameKV | rotIsV | ropes | needsExperts,
	"rwkv6":            0,
	"rwkv6qwen2":       0,
	"rwkv7":            0,
	"seed_oss":         sameKV | rotIsV | ropes,
	"smallthinker":     sameKV | rotIsV | ropes | needsExperts,
	"smollm3":          sameKV | rotIsV | ropes,
	"solar":            sameKV | rotIsV | ropes | needsOutput,
	"stablelm":         sameKV | ropes,
	"starcoder":        sameKV,
	"starcoder2":       sameKV | rotIsV | ropes,
	"t5":               sameKV,
	"t5encoder":        sameKV,
	"wavtokenizer-dec": 0,
	"xverse":           sameKV | rotIsV | ropes,
}

// tensorOpNames lists the tensor names of each operation class (see
// tensorOps).
var tensorOpNames = map[tensorOp]string{
	opDiv: `blk.%d.ffn.act`,
	opF32: `blk.%d.altup_correct_scale blk.%d.altup_router_norm blk.%d.attn_k_norm blk.%d.attn_kv_a_norm
		blk.%d.attn_norm blk.%d.attn_norm_2 blk.%d.attn_output_norm blk.%d.attn_q_a_norm blk.%d.attn_q_norm
		blk.%d.attn_sinks blk.%d.attn_sub_norm blk.%d.channel_mix_lerp_k blk.%d.channel_mix_lerp_r
		blk.%d.exp_probs_b blk.%d.ffn_norm blk.%d.ffn_norm_exps blk.%d.ffn_sub_norm blk.%d.laurel_post_norm
		blk.%d.layer_output_norm blk.%d.nextn.hnorm blk.%d.nextn.shared_head_norm blk.%d.post_attention_norm
		blk.%d.post_ffw_norm blk.%d.post_norm blk.%d.ssm_a blk.%d.ssm_b_norm blk.%d.ssm_c_norm blk.%d.ssm_d
		blk.%d.ssm_dt_norm blk.%d.ssm_norm blk.%d.time_mix_a0 blk.%d.time_mix_decay blk.%d.time_mix_first
		blk.%d.time_mix_k_a blk.%d.time_mix_k_k blk.%d.time_mix_lerp_fused blk.%d.time_mix_lerp_g
		blk.%d.time_mix_lerp_k blk.%d.time_mix_lerp_r blk.%d.time_mix_lerp_v blk.%d.time_mix_lerp_w
		blk.%d.time_mix_lerp_x blk.%d.time_mix_ln blk.%d.time_mix_r_k blk.%d.time_mix_v0 blk.%d.time_mix_w0
		bskcn_tv convnext.%d.gamma convnext.%d.norm dec.blk.%d.attn_norm dec.blk.%d.cross_attn_norm
		dec.blk.%d.ffn_norm dec.output_norm enc.blk.%d.attn_norm enc.blk.%d.ffn_norm enc.output_norm
		output_norm per_layer_proj_norm posnet.%d.attn_norm posnet.%d.norm posnet.%d.norm1 posnet.%d.norm2
		rope_factors_long rope_factors_short rope_freqs token_embd_norm`,
	opGetRows: `blk.%d.nextn.embed_tokens blk.%d.nextn.enorm dec.blk.%d.attn_rel_b enc.blk.%d.attn_rel_b
		per_layer_token_embd position_embd token_embd token_types`,
	opIm2Col: `conv1d convnext.%d.dw posnet.%d.conv1 posnet.%d.conv2`,
	opMatMul: `altup_proj altup_unembd_proj blk.%d.altup_correct_coef blk.%d.altup_predict_coef blk.%d.altup_router
		blk.%d.attn_gate blk.%d.attn_k blk.%d.attn_k_b blk.%d.attn_kv_a_mqa blk.%d.attn_kv_b
		blk.%d.attn_output blk.%d.attn_q blk.%d.attn_q_a blk.%d.attn_q_b blk.%d.attn_qkv blk.%d.attn_v
		blk.%d.attn_v_b blk.%d.channel_mix_key blk.%d.channel_mix_receptance blk.%d.channel_mix_value
		blk.%d.ffn_down blk.%d.ffn_down_shexp blk.%d.ffn_gate blk.%d.ffn_gate_inp blk.%d.ffn_gate_inp_shexp
		blk.%d.ffn_gate_shexp blk.%d.ffn_up blk.%d.ffn_up_shexp blk.%d.inp_gate blk.%d.laurel_l
		blk.%d.laurel_r blk.%d.nextn.eh_proj blk.%d.nextn.shared_head_head blk.%d.proj
		blk.%d.shortconv.in_proj blk.%d.shortconv.out_proj blk.%d.ssm_ba blk.%d.ssm_dt blk.%d.ssm_in
		blk.%d.ssm_out blk.%d.ssm_x blk.%d.time_mix_a1 blk.%d.time_mix_a2 blk.%d.time_mix_decay_w1
		blk.%d.time_mix_decay_w2 blk.%d.time_mix_g1 blk.%d.time_mix_g2 blk.%d.time_mix_gate
		blk.%d.time_mix_key blk.%d.time_mix_output blk.%d.time_mix_receptance blk.%d.time_mix_v1
		blk.%d.time_mix_v2 blk.%d.time_mix_value blk.%d.time_mix_w1 blk.%d.time_mix_w2
		blk.%d.vis_attn_output blk.%d.vis_attn_qkv blk.%d.vis_down blk.%d.vis_gate blk.%d.vis_up cls
		cls.output convnext.%d.pw1 convnext.%d.pw2 dec.blk.%d.attn_k dec.blk.%d.attn_o dec.blk.%d.attn_q
		dec.blk.%d.attn_v dec.blk.%d.cross_attn_k dec.blk.%d.cross_attn_o dec.blk.%d.cross_attn_q
		dec.blk.%d.cross_attn_v dec.blk.%d.ffn_down dec.blk.%d.ffn_gate dec.blk.%d.ffn_up dense_2 dense_3
		enc.blk.%d.attn_k enc.blk.%d.attn_o enc.blk.%d.attn_q enc.blk.%d.attn_v enc.blk.%d.ffn_down
		enc.blk.%d.ffn_gate enc.blk.%d.ffn_up output per_layer_model_proj posnet.%d.attn_k
		posnet.%d.attn_output posnet.%d.attn_q posnet.%d.attn_v`,
	opMatMulID: `blk.%d.ffn_down_chexps blk.%d.ffn_down_exps blk.%d.ffn_gate_chexps blk.%d.ffn_gate_exps
		blk.%d.ffn_up_chexps blk.%d.ffn_up_exps`,
	opNone:    `dec.blk.%d.cross_attn_rel_b`,
	opSSMConv: `blk.%d.shortconv.conv blk.%d.ssm_conv1d`,
}

// preTokenizerNames are the tokenizer.ggml.pre values llama_vocab::impl::load
// recognises (see knownPreTokenizers).
const preTokenizerNames = `default llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2
		deepseek-llm deepseek-coder deepseek-v3 falcon mpt starcoder gpt-2 phi-2 jina-es jina-de gigachat
		jina-v2-es jina-v2-de a.x-4.0 mellum jina-v1-en jina-v2-code roberta-bpe refact command-r qwen2
		deepseek-r1-qwen kormo stablelm2 olmo dbrx smaug-bpe poro-chat glm4 chatglm-bpe viking jais tekken
		smollm codeshell bloom gpt3-finnish exaone exaone4 chameleon minerva-7b megrez gpt-4o llama4 superbpe
		trillion granite-docling bailingmoe bailingmoe2 llada-moe seed-coder hunyuan hunyuan-dense kimi-k2
		grok-2 afmoe minimax-m2`
