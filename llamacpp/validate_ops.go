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
	for op, names := range tensorOpNames {
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
