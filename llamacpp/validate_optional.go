package llamacpp

import (
	"fmt"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// Some tensors llama.cpp's loaders take as optional (TENSOR_NOT_REQUIRED)
// are not optional to the graph: a builder reads another block's tensor in
// place of a missing one, or one tensor of an alternative the loader does
// not complete, and multiplies by a null tensor (SIGSEGV in NewContext or
// the first Decode or Encode). optionalTensors requires what the graph will
// dereference; TestOptionalTensorsMatchLlamaCpp derives blockZeroTensors
// from the pinned sources and finds the source lines of the other rules.

// blockZeroTensors are, by architecture, the tensors that every block
// without its own takes from block 0 (t5's relative-attention bias:
// model.layers[il].X ? model.layers[il].X : model.layers[0].X), so block 0
// needs them. The value is the prefix of the blocks ("enc.blk", "dec.blk")
// and the tensor's name within a block.
var blockZeroTensors = map[string][]blockTensor{
	"t5":        {{"enc.blk", "attn_rel_b"}, {"dec.blk", "attn_rel_b"}},
	"t5encoder": {{"enc.blk", "attn_rel_b"}},
}

// blockTensor is a tensor of a block: prefix.N.name.weight.
type blockTensor struct{ prefix, name string }

func (b blockTensor) in(block uint64) string {
	return fmt.Sprintf("%s.%d.%s.weight", b.prefix, block, b.name)
}

// rwkv6Lerps are the five interpolation tensors an rwkv6 block without
// time_mix_lerp_fused adds (build_rwkv6_time_mix); the loader asserts only
// the first.
var rwkv6Lerps = []string{"time_mix_lerp_w", "time_mix_lerp_k", "time_mix_lerp_v", "time_mix_lerp_r", "time_mix_lerp_g"}

// optionalTensors checks the tensors the graph of arch needs although
// llama.cpp loads them as optional; layers is block_count.
func (v *validator) optionalTensors(arch string, key func(string) string, layers uint64) {
	for _, b := range blockZeroTensors[arch] {
		n := layers
		if b.prefix == "dec.blk" {
			if d, ok := v.uint(key("decoder_block_count")); ok {
				n = d
			}
		}
		if _, ok := v.tensor(b.in(0)); n > 0 && !ok {
			v.failf("tensor %s: missing, and a %s graph takes block 0's %s for every block without its own",
				gguf.Quote(b.in(0)), arch, b.name)
			return
		}
	}
	switch arch {
	case "rwkv6":
		for i := range layers {
			if _, fused := v.tensor(fmt.Sprintf("blk.%d.time_mix_lerp_fused.weight", i)); fused {
				continue
			}
			for _, n := range rwkv6Lerps {
				if name := fmt.Sprintf("blk.%d.%s.weight", i, n); !v.has(name) {
					v.failf("tensor %s: missing, and an rwkv6 block without time_mix_lerp_fused needs all of %v",
						gguf.Quote(name), rwkv6Lerps)
					return
				}
			}
		}
	case "qwen2vl":
		// llm_build_qwen2vl adds bq, bk and bv unchecked (qwen2's builder
		// checks them); the loader takes them as optional.
		for i := range layers {
			for _, n := range []string{"attn_q", "attn_k", "attn_v"} {
				if name := fmt.Sprintf("blk.%d.%s.bias", i, n); !v.has(name) {
					v.failf("tensor %s: missing, and llama.cpp's qwen2vl graph adds it unchecked", gguf.Quote(name))
					return
				}
			}
		}
	case "rwkv6qwen2":
		for i := range layers {
			if name := fmt.Sprintf("blk.%d.time_mix_first.weight", i); v.has(name) {
				v.failf("tensor %s: an rwkv6qwen2 block with it normalizes by time_mix_ln, "+
					"which llama.cpp does not load for rwkv6qwen2", gguf.Quote(name))
				return
			}
		}
	}
}

// has reports whether the model has a tensor named name.
func (v *validator) has(name string) bool {
	_, ok := v.tensor(name)
	return ok
}
