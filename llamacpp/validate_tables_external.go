//go:build llamacpp_external

package llamacpp

// The validation's tables for the external engine (build tag
// llamacpp_external): those of llama.cpp master of 2026-08-22, 3f545becc,
// derived from its sources by the same tests that derive the pinned
// module's (TestArchRulesMatchLlamaCpp, TestTensorOpsMatchLlamaCpp,
// TestPreTokenizersMatchLlamaCpp; make test-external LLAMA_CPP_SRC=DIR checks
// them against a source tree). Against an older llama.cpp an architecture
// these accept and it lacks is refused by llama.cpp itself ("unknown model
// architecture"), an error and not a crash.

// seqStateMagic opens a sequence state, before the memory's part (0: llama_context::state_seq_get_data writes it, then the sequence id).
const seqStateMagic = 0xaf143cd8

// unknownPreTokenizerFallsBack: llama.cpp 3f545becc refuses an unknown tokenizer.ggml.pre ("unknown pre-tokenizer type") and falls back only for a missing one.
const unknownPreTokenizerFallsBack = false

// tablesEngine names the llama.cpp these tables come from, for messages.
const tablesEngine = "llama.cpp 3f545becc (master of 2026-08-22; the external engine's tables)"

// archRules holds the rules of every architecture llama.cpp 3f545becc can
// build a graph for.
var archRules = map[string]archRule{
	"afmoe":            sameKV | ropes,
	"apertus":          sameKV | rotIsV | ropes,
	"arcee":            sameKV | rotIsV | ropes,
	"arctic":           sameKV | rotIsV | ropes,
	"arwkv7":           0,
	"baichuan":         sameKV | rotIsV | ropes,
	"bailingmoe":       ropes | needsExperts,
	"bailingmoe2":      sameKV | ropes | needsExperts,
	"bailingmoe3":      ropes | needsOutput,
	"bert":             sameKV | ropes,
	"bitnet":           sameKV | ropes,
	"bloom":            sameKV,
	"chameleon":        sameKV | rotIsV | ropes,
	"chatglm":          sameKV | ropes,
	"codeshell":        sameKV | rotIsV | ropes,
	"cogvlm":           sameKV | rotIsV | ropes,
	"cohere2":          sameKV | ropes,
	"cohere2moe":       sameKV | rotIsV | ropes | needsExperts,
	"command-r":        sameKV | ropes,
	"dbrx":             sameKV | rotIsV | ropes | needsExperts,
	"deci":             sameKV | rotIsV | ropes,
	"deepseek":         sameKV | rotIsV | ropes | needsExperts,
	"deepseek2":        ropes | needsExperts,
	"deepseek2-ocr":    ropes | needsExperts,
	"deepseek32":       ropes | needsExperts,
	"deepseek4":        ropes,
	"dflash":           ropes | needsOutput,
	"dots1":            sameKV | rotIsV | ropes | needsExperts,
	"dots3note":        ropes,
	"dream":            sameKV | rotIsV | ropes,
	"eagle3":           sameKV | ropes | needsOutput,
	"ernie4_5":         sameKV | rotIsV | ropes,
	"ernie4_5-moe":     sameKV | rotIsV | ropes,
	"eurobert":         sameKV | ropes,
	"exaone":           sameKV | rotIsV | ropes,
	"exaone-moe":       sameKV | rotIsK | ropes | needsExperts,
	"exaone4":          sameKV | rotIsK | ropes,
	"falcon":           sameKV | rotIsV | ropes,
	"falcon-h1":        ropes,
	"gemma":            ropes,
	"gemma-embedding":  ropes,
	"gemma2":           ropes,
	"gemma3":           ropes,
	"gemma3n":          ropes,
	"gemma4":           ropes,
	"gemma4-assistant": ropes,
	"glm-dsa":          ropes | needsExperts,
	"glm4":             sameKV | ropes,
	"glm4moe":          sameKV | ropes | needsExperts,
	"gpt-oss":          ropes,
	"gpt2":             sameKV,
	"gptneox":          sameKV | ropes,
	"granite":          sameKV | rotIsV | ropes,
	"granite_swa":      sameKV | rotIsV | ropes,
	"granitehybrid":    sameKV | ropes,
	"granitemoe":       sameKV | rotIsV | ropes,
	"graniteswitch":    sameKV | rotIsV | ropes,
	"grok":             sameKV | rotIsV | ropes | needsExperts,
	"grovemoe":         sameKV | rotIsV | ropes | needsExperts,
	"hunyuan-dense":    sameKV | rotIsV | ropes,
	"hunyuan-moe":      sameKV | rotIsV | ropes,
	"hunyuan_vl":       sameKV | rotIsV | ropes,
	"hy_v3":            sameKV | rotIsV | ropes,
	"internlm2":        sameKV | rotIsV | ropes,
	"jais":             sameKV,
	"jais2":            sameKV | rotIsV | ropes,
	"jamba":            0,
	"jina-bert-v2":     sameKV | ropes,
	"jina-bert-v3":     sameKV | ropes,
	"kimi-k3":          0,
	"kimi-linear":      0,
	"laguna":           sameKV | ropes,
	"lfm2":             sameKV | ropes,
	"lfm2moe":          sameKV | ropes | needsExperts,
	"llada":            sameKV | rotIsV | ropes,
	"llada-moe":        sameKV | rotIsV | ropes | needsExperts,
	"llama":            sameKV | rotIsV | ropes,
	"llama-embed":      sameKV | rotIsV | ropes,
	"llama4":           sameKV | rotIsV | ropes | needsExperts,
	"maincoder":        sameKV | rotIsV | ropes,
	"mamba":            0,
	"mamba2":           0,
	"mellum":           sameKV | rotIsV | ropes | needsExperts,
	"mimo2":            ropes,
	"minicpm":          sameKV | rotIsV | ropes,
	"minicpm3":         ropes,
	"minimax-01":       sameKV | ropes,
	"minimax-m2":       sameKV | ropes,
	"minimax-m3":       sameKV | ropes,
	"mistral3":         sameKV | rotIsV | ropes,
	"mistral4":         ropes | needsExperts,
	"modern-bert":      sameKV | ropes,
	"mpt":              sameKV,
	"muse-glimmer":     sameKV | ropes,
	"nanbeige":         sameKV | ropes,
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
	"paddleocr":        sameKV | rotIsV | ropes,
	"pangu-embedded":   sameKV | rotIsV | ropes,
	"phi2":             sameKV | ropes,
	"phi3":             sameKV | ropes,
	"phimoe":           sameKV | ropes,
	"plamo":            sameKV | rotIsV | ropes,
	"plamo2":           ropes,
	"plamo3":           ropes,
	"plm":              ropes,
	"pockettts":        sameKV | rotIsV | ropes,
	"qwen":             sameKV | ropes,
	"qwen2":            sameKV | rotIsV | ropes,
	"qwen2moe":         sameKV | rotIsV | ropes | needsExperts,
	"qwen2vl":          sameKV | rotIsV | ropes,
	"qwen3":            sameKV | rotIsV | ropes,
	"qwen35":           sameKV | ropes,
	"qwen35moe":        sameKV | ropes,
	"qwen3moe":         sameKV | rotIsV | ropes | needsExperts,
	"qwen3next":        sameKV | ropes | needsExperts,
	"qwen3tts":         sameKV | rotIsV | ropes,
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
	"stablelm":         sameKV | ropes,
	"starcoder":        sameKV,
	"starcoder2":       sameKV | rotIsV | ropes,
	"step35":           ropes,
	"t5":               sameKV,
	"t5encoder":        sameKV,
	"talkie":           sameKV | rotIsK | ropes,
	"wavtokenizer-dec": 0,
	"xverse":           sameKV | rotIsV | ropes,
}

// tensorOpNames lists the tensor names of each operation class (see
// tensorOps).
var tensorOpNames = map[tensorOp]string{
	opDiv: `blk.%d.ffn.act`,
	opF32: `blk.%d.altup_correct_scale blk.%d.altup_router_norm blk.%d.attn_compressor_norm blk.%d.attn_k_norm
		blk.%d.attn_kv_a_norm blk.%d.attn_norm blk.%d.attn_norm_2 blk.%d.attn_output_norm
		blk.%d.attn_q_a_norm blk.%d.attn_q_norm blk.%d.attn_res_score blk.%d.attn_sinks blk.%d.attn_sub_norm
		blk.%d.channel_mix_lerp_k blk.%d.channel_mix_lerp_r blk.%d.exp_probs_b blk.%d.ffn_norm
		blk.%d.ffn_norm_exps blk.%d.ffn_res_score blk.%d.ffn_routed_norm blk.%d.ffn_sub_norm
		blk.%d.hc_attn_base blk.%d.hc_attn_scale blk.%d.hc_ffn_base blk.%d.hc_ffn_scale
		blk.%d.indexer.k_norm blk.%d.indexer.q_norm blk.%d.indexer_compressor_norm blk.%d.laurel_post_norm
		blk.%d.layer_output_norm blk.%d.layer_output_scale blk.%d.nextn.enorm blk.%d.nextn.hnorm
		blk.%d.nextn.shared_head_norm blk.%d.post_attention_norm blk.%d.post_ffw_norm blk.%d.post_ffw_norm_1
		blk.%d.post_ffw_norm_2 blk.%d.post_norm blk.%d.pre_ffw_norm_2 blk.%d.ssm_a blk.%d.ssm_b_norm
		blk.%d.ssm_c_norm blk.%d.ssm_conv1d_k blk.%d.ssm_conv1d_q blk.%d.ssm_conv1d_v blk.%d.ssm_d
		blk.%d.ssm_dt_norm blk.%d.ssm_norm blk.%d.time_mix_a0 blk.%d.time_mix_decay blk.%d.time_mix_first
		blk.%d.time_mix_k_a blk.%d.time_mix_k_k blk.%d.time_mix_lerp_fused blk.%d.time_mix_lerp_g
		blk.%d.time_mix_lerp_k blk.%d.time_mix_lerp_r blk.%d.time_mix_lerp_v blk.%d.time_mix_lerp_w
		blk.%d.time_mix_lerp_x blk.%d.time_mix_ln blk.%d.time_mix_r_k blk.%d.time_mix_v0 blk.%d.time_mix_w0
		cls.norm convnext.%d.gamma convnext.%d.norm dec.blk.%d.attn_norm dec.blk.%d.cross_attn_norm
		dec.blk.%d.ffn_norm dec.output_norm enc.blk.%d.attn_norm enc.blk.%d.ffn_norm enc.output_norm
		output_hc_base output_hc_scale output_norm output_res_score per_layer_proj_norm posnet.%d.attn_norm
		posnet.%d.norm posnet.%d.norm1 posnet.%d.norm2 rope_factors_long rope_factors_short rope_freqs
		token_embd_norm`,
	opGetRows: `blk.%d.attn_compressor_ape blk.%d.ffn_gate_tid2eid blk.%d.indexer_compressor_ape
		blk.%d.nextn.embed_tokens d2t dec.blk.%d.attn_rel_b enc.blk.%d.attn_rel_b markov_w1
		per_layer_token_embd position_embd token_embd token_types`,
	opIm2Col: `conv1d convnext.%d.dw posnet.%d.conv1 posnet.%d.conv2`,
	opMatMul: `altup_proj altup_unembd_proj blk.%d.altup_correct_coef blk.%d.altup_predict_coef blk.%d.altup_router
		blk.%d.attn_compressor_gate blk.%d.attn_compressor_kv blk.%d.attn_gate blk.%d.attn_k blk.%d.attn_k_b
		blk.%d.attn_kv blk.%d.attn_kv_a_mqa blk.%d.attn_kv_b blk.%d.attn_output blk.%d.attn_output_a
		blk.%d.attn_output_b blk.%d.attn_q blk.%d.attn_q_a blk.%d.attn_q_b blk.%d.attn_qkv blk.%d.attn_v
		blk.%d.attn_v_b blk.%d.channel_mix_key blk.%d.channel_mix_receptance blk.%d.channel_mix_value
		blk.%d.ffn_down blk.%d.ffn_down_shexp blk.%d.ffn_gate blk.%d.ffn_gate_inp blk.%d.ffn_gate_inp_shexp
		blk.%d.ffn_gate_shexp blk.%d.ffn_latent_down blk.%d.ffn_latent_up blk.%d.ffn_routed_down
		blk.%d.ffn_routed_up blk.%d.ffn_up blk.%d.ffn_up_shexp blk.%d.hc_attn_fn blk.%d.hc_ffn_fn
		blk.%d.indexer.attn_k blk.%d.indexer.attn_q_b blk.%d.indexer.k_proj blk.%d.indexer.proj
		blk.%d.indexer.q_proj blk.%d.indexer_compressor_gate blk.%d.indexer_compressor_kv blk.%d.inp_gate
		blk.%d.laurel_l blk.%d.laurel_r blk.%d.nextn.eh_proj blk.%d.nextn.shared_head_head blk.%d.proj
		blk.%d.shortconv.in_proj blk.%d.shortconv.out_proj blk.%d.ssm_alpha blk.%d.ssm_ba blk.%d.ssm_beta
		blk.%d.ssm_dt blk.%d.ssm_f_a blk.%d.ssm_f_b blk.%d.ssm_g blk.%d.ssm_g_a blk.%d.ssm_g_b blk.%d.ssm_in
		blk.%d.ssm_out blk.%d.ssm_x blk.%d.time_mix_a1 blk.%d.time_mix_a2 blk.%d.time_mix_decay_w1
		blk.%d.time_mix_decay_w2 blk.%d.time_mix_g1 blk.%d.time_mix_g2 blk.%d.time_mix_gate
		blk.%d.time_mix_key blk.%d.time_mix_output blk.%d.time_mix_receptance blk.%d.time_mix_v1
		blk.%d.time_mix_v2 blk.%d.time_mix_value blk.%d.time_mix_w1 blk.%d.time_mix_w2
		blk.%d.vis_attn_output blk.%d.vis_attn_qkv blk.%d.vis_down blk.%d.vis_gate blk.%d.vis_up cls
		cls.output conf_proj convnext.%d.pw1 convnext.%d.pw2 dec.blk.%d.attn_k dec.blk.%d.attn_o
		dec.blk.%d.attn_q dec.blk.%d.attn_v dec.blk.%d.cross_attn_k dec.blk.%d.cross_attn_o
		dec.blk.%d.cross_attn_q dec.blk.%d.cross_attn_v dec.blk.%d.ffn_down dec.blk.%d.ffn_gate
		dec.blk.%d.ffn_up dense_2 dense_3 enc.blk.%d.attn_k enc.blk.%d.attn_o enc.blk.%d.attn_q
		enc.blk.%d.attn_v enc.blk.%d.ffn_down enc.blk.%d.ffn_gate enc.blk.%d.ffn_up fc markov_w2
		nextn.post_projection nextn.pre_projection output output_hc_fn per_layer_model_proj posnet.%d.attn_k
		posnet.%d.attn_output posnet.%d.attn_q posnet.%d.attn_v`,
	opMatMulID: `blk.%d.ffn_down_chexps blk.%d.ffn_down_exps blk.%d.ffn_gate_chexps blk.%d.ffn_gate_exps
		blk.%d.ffn_gate_up_exps blk.%d.ffn_up_chexps blk.%d.ffn_up_exps`,
	opNone:    `dec.blk.%d.cross_attn_rel_b masked_embd_centroids masked_embd_ordering`,
	opSSMConv: `blk.%d.shortconv.conv blk.%d.ssm_conv1d`,
}

// preTokenizerNames are the tokenizer.ggml.pre values llama_vocab::impl::load
// recognises (see knownPreTokenizers).
const preTokenizerNames = `a.x-4.0 afmoe bailingmoe bailingmoe2 bloom chameleon chatglm-bpe codeshell cohere2moe command-r dbrx
	deepseek-coder deepseek-llm deepseek-r1-qwen deepseek-v3 default exaone exaone-moe exaone4 f2llmv2
	falcon falcon-h1 falcon3 gemma4 gigachat glm4 gpt-2 gpt-4o gpt3-finnish granite-docling
	granite-embed-multi-311m granite-embed-multi-97m grok-2 hunyuan hunyuan-dense jais jais-2 jina-de
	jina-es jina-v1-en jina-v2-code jina-v2-de jina-v2-es jina-v5-nano joyai-llm kanana2 kimi-k2 kormo
	laguna lfm2 llada-moe llama-bpe llama-v3 llama3 llama4 megrez mellum mellum2 midm-2.0 minerva-7b
	minicpm5 minimax-m2 modern-bert mpt olmo phi-2 pixtral poro-chat qwen2 qwen35 refact roberta-bpe
	sarvam-moe seed-coder smaug-bpe smollm solar-open stablelm2 starcoder superbpe talkie tekken
	tiny_aya trillion viking whitespace youtu`
