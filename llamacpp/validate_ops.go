package llamacpp

import (
	"strings"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// Each tensor llama.cpp loads feeds one ggml operation (LLM_TENSOR_INFOS in
// llama-arch.cpp). Before it checks a tensor's shape, the loader builds that
// operation on the tensor to pick a buffer (weight_buft_supported), and the
// builder's GGML_ASSERTs abort on a tensor of the wrong rank; the first
// decode then runs the CPU kernels, which abort on an operand type they do
// not implement. tensorOps classifies the tensor names of the pinned
// llama.cpp by what their operation accepts; TestTensorOpsMatchLlamaCpp
// derives the same table from llama-arch.cpp.

// tensorOp is a class of ggml operations by the operand types and ranks
// their CPU kernels accept.
type tensorOp uint8

const (
	opF32      tensorOp = iota + 1 // element-wise with f32 activations (MUL, ADD, SCALE), RoPE factors, SSM scan, RWKV: f32 only
	opMatMul                       // MUL_MAT: any weight type
	opMatMulID                     // MUL_MAT_ID (experts): any weight type, at most 3-D, needs used experts
	opGetRows                      // GET_ROWS (embeddings): any weight type, at most 2-D
	opDiv                          // DIV by a vector: f32, 1-D
	opSSMConv                      // SSM_CONV: f32, 2-D
	opIm2Col                       // IM2COL (convolutions): f32 or f16
	opNone                         // loaded but unused
)

// tensorOps maps a tensor name without its suffix, block numbers written
// %d, to its operation.
var tensorOps = map[string]tensorOp{}

func init() {
	for op, names := range map[tensorOp]string{
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
	} {
		for _, n := range strings.Fields(names) {
			tensorOps[n] = op
		}
	}
}

// opOf returns the operation of the tensor named name and whether its
// suffix is "weight"; 0 for a name this llama.cpp does not know. Every
// other suffix (bias, scale) is added or multiplied: f32 only.
func opOf(name string) (tensorOp, bool) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return 0, false
	}
	parts := strings.Split(name[:i], ".")
	for j, p := range parts {
		if p != "" && strings.Trim(p, "0123456789") == "" {
			parts[j] = "%d"
		}
	}
	return tensorOps[strings.Join(parts, ".")], name[i+1:] == "weight"
}

// getRowsType reports whether ggml's CPU get_rows reads type t.
func getRowsType(t gguf.TensorType) bool {
	switch t {
	case gguf.TensorQ8_K, gguf.TensorI8, gguf.TensorI16, gguf.TensorI64, gguf.TensorF64:
		return false
	}
	_, _, ok := t.BlockSize()
	return ok
}
