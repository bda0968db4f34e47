package testmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// Projector types of clip.cpp (clip-impl.h's PROJECTOR_TYPE_NAMES).
const (
	// ProjectorGemma3 is Gemma 3's: a SigLIP tower, average pooling, RMS
	// norm and a linear projection.
	ProjectorGemma3 = "gemma3"
	// ProjectorQwen2VL is Qwen2-VL's: a tower with two patch convolutions
	// and 2-D rotary positions (M-RoPE), then a merger MLP over 2×2 patches.
	ProjectorQwen2VL = "qwen2vl_merger"
)

// VisionProjector is a projector file (mmproj) for llama.cpp's multimodal
// library (tools/mtmd, clip.cpp) with seeded random F32 weights: a vision
// transformer of pre-norm blocks (LayerNorm with bias, biased Q/K/V/output
// projections, an up/down feed-forward with biases) and a final LayerNorm,
// then the projector of Type:
//
//   - ProjectorGemma3 (clip_graph_siglip): the tower is SigLIP's (patch
//     convolution with bias, learned position embeddings); the projector
//     average-pools MergeFactor×MergeFactor patches, applies an RMS norm
//     times mm.soft_emb_norm, then mm.input_projection to TextEmbd.
//   - ProjectorQwen2VL (clip_graph_qwen2vl): the tower sums two bias-free
//     patch convolutions (v.patch_embd.weight and .weight.1), has no
//     learned positions but rotates queries and keys by the patch's row and
//     column (ggml's vision M-RoPE); the merger concatenates each 2×2 block
//     of patches and applies mm.0, GELU, mm.2 (MergerFF wide inside).
//
// The tower's feed-forward uses SiLU (clip.use_silu) rather than GELU:
// ggml's CPU GELU reads an f16 table, which would put a 1e-3 error floor
// under the comparison with the float64 reference. Qwen2-VL's merger GELU
// is fixed by clip.cpp; the reference reproduces its table.
type VisionProjector struct {
	// Name is written as general.name.
	Name string
	// Type is the projector type, ProjectorGemma3 or ProjectorQwen2VL.
	Type string
	// ImageSize is the square input's side in pixels; PatchSize divides it.
	ImageSize, PatchSize int
	// NEmbd is the tower's width, NHead*head width.
	NEmbd int
	// NHead is the number of attention heads.
	NHead int
	// NFF is the feed-forward width.
	NFF int
	// NLayer is the block count.
	NLayer int
	// MergeFactor is gemma3's pooling kernel (clip.vision.projector.scale_factor),
	// which divides ImageSize/PatchSize, or Qwen2-VL's spatial merge size
	// (clip.vision.spatial_merge_size), which must be 2.
	MergeFactor int
	// MergerFF is the width inside Qwen2-VL's merger MLP.
	MergerFF int
	// TextEmbd is the projector's output width, which must equal the text
	// model's n_embd (mtmd refuses a mismatch).
	TextEmbd int
	// Eps is the LayerNorm epsilon, also used by the projector's RMS norm.
	Eps float32
	// Mean and Std normalise pixel values (x/255 - Mean[c]) / Std[c].
	Mean, Std [3]float32
	// Seed makes the weights reproducible.
	Seed uint64
}

// TinyGemma3Projector returns the tiny gemma3 projector: 32×32-pixel
// images in 4×4 patches (64 patches), width 64 in 4 heads of 16, n_ff 128,
// 2 blocks, 2×2 pooling (16 image tokens), projected to 256, the width of
// tiny-f32.gguf (TinySpec), with which it is meant to be used.
func TinyGemma3Projector() VisionProjector {
	return VisionProjector{
		Name: "llamaloop-tiny-gemma3-mmproj", Type: ProjectorGemma3, ImageSize: 32, PatchSize: 4, NEmbd: 64, NHead: 4, NFF: 128, NLayer: 2,
		MergeFactor: 2, TextEmbd: 256, Eps: 1e-6,
		Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}, Seed: 39,
	}
}

// TinyQwen2VLProjector returns the tiny Qwen2-VL projector: 4×4-pixel
// patches, width 64 in 4 heads of 16 (rotary sections of 4 pairs for rows
// and 4 for columns), n_ff 128, 2 blocks, a merger 256 wide inside,
// projected to 256, the width of tiny-f32.gguf. Images of any size whose
// sides are multiples of 8 pixels and that make 8 to 4096 merged tokens
// are encoded unresized (clip.cpp's limits); clip.vision.image_size, 32,
// only sizes clip.cpp's warm-up.
func TinyQwen2VLProjector() VisionProjector {
	return VisionProjector{
		Name: "llamaloop-tiny-qwen2vl-mmproj", Type: ProjectorQwen2VL, ImageSize: 32, PatchSize: 4, NEmbd: 64, NHead: 4,
		NFF: 128, NLayer: 2, MergeFactor: 2, MergerFF: 256, TextEmbd: 256, Eps: 1e-6,
		Mean: [3]float32{0.48145466, 0.4578275, 0.40821073}, Std: [3]float32{0.26862954, 0.26130258, 0.27577711}, Seed: 40,
	}
}

// NPatches returns the number of patches per image side.
func (s VisionProjector) NPatches() int { return s.ImageSize / s.PatchSize }

// NTokens returns the number of embeddings an ImageSize×ImageSize image
// becomes.
func (s VisionProjector) NTokens() int {
	n := s.NPatches() / s.MergeFactor
	return n * n
}

func (s VisionProjector) validate() error {
	switch {
	case s.ImageSize <= 0 || s.PatchSize <= 0 || s.NEmbd <= 0 || s.NHead <= 0 || s.NFF <= 0 || s.NLayer <= 0 ||
		s.MergeFactor <= 0 || s.TextEmbd <= 0:
		return fmt.Errorf("testmodel: projector %q has a size below its minimum", s.Name)
	case s.ImageSize%s.PatchSize != 0 || s.NPatches()%s.MergeFactor != 0:
		return fmt.Errorf("testmodel: projector %q: patch %d and merge %d do not divide image size %d",
			s.Name, s.PatchSize, s.MergeFactor, s.ImageSize)
	case s.NEmbd%s.NHead != 0:
		return fmt.Errorf("testmodel: projector n_embd %d does not split into %d heads", s.NEmbd, s.NHead)
	case s.Type != ProjectorGemma3 && s.Type != ProjectorQwen2VL:
		return fmt.Errorf("testmodel: projector type %q is not written", s.Type)
	case s.Type == ProjectorQwen2VL && (s.MergeFactor != 2 || s.MergerFF <= 0 || (s.NEmbd/s.NHead)%4 != 0):
		return fmt.Errorf("testmodel: qwen2vl projector %q needs merge 2, a merger width and head width divisible by 4", s.Name)
	case s.Std[0] == 0 || s.Std[1] == 0 || s.Std[2] == 0:
		return errors.New("testmodel: projector image_std must not be 0")
	}
	return nil
}

func (s VisionProjector) metadata() []gguf.KV {
	merge := gguf.KV{Key: "clip.vision.projector.scale_factor", Value: uint32(s.MergeFactor)}
	if s.Type == ProjectorQwen2VL {
		merge.Key = "clip.vision.spatial_merge_size"
	}
	return []gguf.KV{
		{Key: "general.architecture", Value: "clip"},
		{Key: "general.name", Value: s.Name},
		{Key: "general.file_type", Value: uint32(0)},
		{Key: "clip.has_vision_encoder", Value: true},
		{Key: "clip.projector_type", Value: s.Type},
		{Key: "clip.use_silu", Value: true},
		{Key: "clip.vision.image_size", Value: uint32(s.ImageSize)},
		{Key: "clip.vision.patch_size", Value: uint32(s.PatchSize)},
		{Key: "clip.vision.embedding_length", Value: uint32(s.NEmbd)},
		{Key: "clip.vision.feed_forward_length", Value: uint32(s.NFF)},
		{Key: "clip.vision.block_count", Value: uint32(s.NLayer)},
		{Key: "clip.vision.projection_dim", Value: uint32(s.TextEmbd)},
		{Key: "clip.vision.attention.head_count", Value: uint32(s.NHead)},
		{Key: "clip.vision.attention.layer_norm_epsilon", Value: s.Eps},
		{Key: "clip.vision.image_mean", Value: s.Mean[:]},
		{Key: "clip.vision.image_std", Value: s.Std[:]},
		merge,
	}
}

// projectorRole is one tensor: name, ggml shape, and the uniform
// distribution of its values.
type projectorRole struct {
	name          string
	shape         []uint64
	center, stdev float64
}

// roles lists the tensors with clip-impl.h's names, in the order written.
func (s VisionProjector) roles() []projectorRole {
	e, f, p, n := uint64(s.NEmbd), uint64(s.NFF), uint64(s.PatchSize), uint64(s.NPatches()*s.NPatches())
	inv := func(fanIn uint64) float64 { return 1 / math.Sqrt(float64(fanIn)) }
	norm := func(name string, dim uint64) []projectorRole {
		return []projectorRole{
			{name + ".weight", []uint64{dim}, 1, 0.2 / math.Sqrt(3)},
			{name + ".bias", []uint64{dim}, 0, 0.1},
		}
	}
	linear := func(name string, in, out uint64) []projectorRole {
		return []projectorRole{
			{name + ".weight", []uint64{in, out}, 0, inv(in)},
			{name + ".bias", []uint64{out}, 0, 0.1},
		}
	}
	var r []projectorRole
	if s.Type == ProjectorQwen2VL {
		// the two halves of Qwen2-VL's temporal convolution, summed
		r = []projectorRole{
			{"v.patch_embd.weight", []uint64{p, p, 3, e}, 0, inv(6 * p * p)},
			{"v.patch_embd.weight.1", []uint64{p, p, 3, e}, 0, inv(6 * p * p)},
		}
	} else {
		r = []projectorRole{
			{"v.patch_embd.weight", []uint64{p, p, 3, e}, 0, inv(3 * p * p)},
			{"v.patch_embd.bias", []uint64{e}, 0, 0.1},
			{"v.position_embd.weight", []uint64{e, n}, 0, 0.5},
		}
	}
	for i := range s.NLayer {
		b := fmt.Sprintf("v.blk.%d.", i)
		r = append(r, norm(b+"ln1", e)...)
		r = append(r, linear(b+"attn_q", e, e)...)
		r = append(r, linear(b+"attn_k", e, e)...)
		r = append(r, linear(b+"attn_v", e, e)...)
		r = append(r, linear(b+"attn_out", e, e)...)
		r = append(r, norm(b+"ln2", e)...)
		r = append(r, linear(b+"ffn_up", e, f)...)
		r = append(r, linear(b+"ffn_down", f, e)...)
	}
	r = append(r, norm("v.post_ln", e)...)
	if s.Type == ProjectorQwen2VL {
		r = append(r, linear("mm.0", 4*e, uint64(s.MergerFF))...)
		return append(r, linear("mm.2", uint64(s.MergerFF), uint64(s.TextEmbd))...)
	}
	return append(r,
		projectorRole{"mm.soft_emb_norm.weight", []uint64{e}, 1, 0.2 / math.Sqrt(3)},
		// gemma3's projection is stored [text width, tower width] in ggml
		// order and transposed by the graph.
		projectorRole{"mm.input_projection.weight", []uint64{uint64(s.TextEmbd), e}, 0, inv(e)})
}

// Write writes the projector to path, atomically. Weights are uniform:
// matrices with standard deviation 1/sqrt(fan-in), biases 0.1, norm weights
// around 1 within ±0.2, position embeddings 0.5.
func (s VisionProjector) Write(path string) error {
	if err := s.validate(); err != nil {
		return err
	}
	var tensors []tensor
	for _, r := range s.roles() {
		info := gguf.TensorInfo{Name: r.name, Type: gguf.TensorF32, Shape: r.shape}
		u := uniform{seed: s.Seed ^ nameHash(r.name), center: r.center, halfWidth: r.stdev * math.Sqrt(3)}
		tensors = append(tensors, tensor{info: info, fill: func(w *gguf.Writer) error {
			return u.write(w, info.Type, info.Elements())
		}})
	}
	return writeGGUF(path, s.metadata(), s.Fingerprint(), tensors)
}

// Fingerprint identifies the file Write produces.
func (s VisionProjector) Fingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "mmproj-v1|%+v|", s)
	for _, r := range s.roles() {
		fmt.Fprintf(h, "%s%v;", r.name, r.shape)
	}
	return hex.EncodeToString(h.Sum(nil))
}
