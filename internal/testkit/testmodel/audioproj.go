package testmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// ProjectorQwen2Audio is clip.cpp's "qwen2a" projector type: a Whisper
// encoder whose output is average-pooled by 2 in time, normalised and
// projected by one linear layer.
const ProjectorQwen2Audio = "qwen2a"

// AudioProjector is an audio projector file (mmproj) for llama.cpp's mtmd
// of projector type "qwen2a" (clip.cpp's clip_graph_whisper_enc) with seeded
// random weights: a Whisper-style encoder over a log-mel spectrogram of
// NMel bins (two 1-D convolutions of width 3, the second of stride 2, each
// followed by an erf GELU; learned positions; pre-norm blocks with
// LayerNorm, Q and V biases but no K bias, an erf-GELU feed-forward), an
// average pool of 2 in time, a final LayerNorm and a linear projection to
// TextEmbd. mtmd cuts audio into 30-second chunks of 3000 mel frames, so a
// chunk becomes 750 embeddings.
//
// The convolution kernels are F16, the other tensors F32: ggml's 1-D
// convolution rounds its input and kernel to float16 anyway (its im2col is
// F16), so F16 kernels keep the reference exact on the kernel side.
type AudioProjector struct {
	// Name is written as general.name.
	Name string
	// NMel is the number of mel bins (clip.audio.num_mel_bins).
	NMel int
	// NEmbd is the encoder width, NHead*head width.
	NEmbd int
	// NHead is the number of attention heads.
	NHead int
	// NFF is the feed-forward width.
	NFF int
	// NLayer is the block count.
	NLayer int
	// NPos is the number of learned positions: at least 1500, half a chunk's
	// frames.
	NPos int
	// TextEmbd is the output width, the text model's n_embd.
	TextEmbd int
	// Eps is the LayerNorm epsilon.
	Eps float32
	// Seed makes the weights reproducible.
	Seed uint64
}

// TinyQwen2AudioProjector returns the tiny qwen2a projector: 80 mel bins
// (Whisper's), width 64 in 4 heads of 16, n_ff 128, 2 blocks, 1500
// positions, projected to 256, the width of tiny-f32.gguf.
func TinyQwen2AudioProjector() AudioProjector {
	return AudioProjector{Name: "llamaloop-tiny-qwen2a-mmproj", NMel: 80, NEmbd: 64, NHead: 4, NFF: 128, NLayer: 2,
		NPos: 1500, TextEmbd: 256, Eps: 1e-5, Seed: 41}
}

func (s AudioProjector) validate() error {
	switch {
	case s.NMel <= 0 || s.NEmbd <= 0 || s.NHead <= 0 || s.NFF <= 0 || s.NLayer <= 0 || s.TextEmbd <= 0:
		return fmt.Errorf("testmodel: audio projector %q has a size below its minimum", s.Name)
	case s.NPos < 1500:
		return fmt.Errorf("testmodel: audio projector %q needs 1500 positions for a 3000-frame chunk", s.Name)
	case s.NEmbd%s.NHead != 0:
		return fmt.Errorf("testmodel: audio projector n_embd %d does not split into %d heads", s.NEmbd, s.NHead)
	}
	return nil
}

func (s AudioProjector) metadata() []gguf.KV {
	return []gguf.KV{
		{Key: "general.architecture", Value: "clip"},
		{Key: "general.name", Value: s.Name},
		{Key: "general.file_type", Value: uint32(1)},
		{Key: "clip.has_audio_encoder", Value: true},
		{Key: "clip.projector_type", Value: ProjectorQwen2Audio},
		{Key: "clip.audio.num_mel_bins", Value: uint32(s.NMel)},
		{Key: "clip.audio.embedding_length", Value: uint32(s.NEmbd)},
		{Key: "clip.audio.feed_forward_length", Value: uint32(s.NFF)},
		{Key: "clip.audio.block_count", Value: uint32(s.NLayer)},
		{Key: "clip.audio.projection_dim", Value: uint32(s.TextEmbd)},
		{Key: "clip.audio.attention.head_count", Value: uint32(s.NHead)},
		{Key: "clip.audio.attention.layer_norm_epsilon", Value: s.Eps},
	}
}

// roles lists the tensors with clip-impl.h's names and their types, in
// the order written.
func (s AudioProjector) roles() []struct {
	projectorRole
	typ gguf.TensorType
} {
	e, f, m := uint64(s.NEmbd), uint64(s.NFF), uint64(s.NMel)
	inv := func(fanIn uint64) float64 { return 1 / math.Sqrt(float64(fanIn)) }
	var r []projectorRole
	add := func(rs ...projectorRole) { r = append(r, rs...) }
	norm := func(name string) {
		add(projectorRole{name + ".weight", []uint64{e}, 1, 0.2 / math.Sqrt(3)},
			projectorRole{name + ".bias", []uint64{e}, 0, 0.1})
	}
	linear := func(name string, in, out uint64, bias bool) {
		add(projectorRole{name + ".weight", []uint64{in, out}, 0, inv(in)})
		if bias {
			add(projectorRole{name + ".bias", []uint64{out}, 0, 0.1})
		}
	}
	add(projectorRole{"a.conv1d.1.weight", []uint64{3, m, e}, 0, 3 * inv(3*m)},
		projectorRole{"a.conv1d.1.bias", []uint64{1, e}, 0, 0.1},
		projectorRole{"a.conv1d.2.weight", []uint64{3, e, e}, 0, inv(3 * e)},
		projectorRole{"a.conv1d.2.bias", []uint64{1, e}, 0, 0.1},
		projectorRole{"a.position_embd.weight", []uint64{e, uint64(s.NPos)}, 0, 0.5})
	for i := range s.NLayer {
		b := fmt.Sprintf("a.blk.%d.", i)
		norm(b + "ln1")
		linear(b+"attn_q", e, e, true)
		linear(b+"attn_k", e, e, false)
		linear(b+"attn_v", e, e, true)
		linear(b+"attn_out", e, e, true)
		norm(b + "ln2")
		linear(b+"ffn_up", e, f, true)
		linear(b+"ffn_down", f, e, true)
	}
	norm("a.post_ln")
	linear("mm.a.fc", e, uint64(s.TextEmbd), true)
	out := make([]struct {
		projectorRole
		typ gguf.TensorType
	}, len(r))
	for i, x := range r {
		out[i].projectorRole, out[i].typ = x, gguf.TensorF32
		if x.name == "a.conv1d.1.weight" || x.name == "a.conv1d.2.weight" {
			out[i].typ = gguf.TensorF16
		}
	}
	return out
}

// Write writes the projector to path, atomically. Weights are uniform:
// matrices with standard deviation 1/sqrt(fan-in) (the first convolution
// 3/sqrt(fan-in), as log-mel inputs are small), biases 0.1, norm weights
// around 1 within ±0.2, position embeddings 0.5.
func (s AudioProjector) Write(path string) error {
	if err := s.validate(); err != nil {
		return err
	}
	var tensors []tensor
	for _, r := range s.roles() {
		info := gguf.TensorInfo{Name: r.name, Type: r.typ, Shape: r.shape}
		u := uniform{seed: s.Seed ^ nameHash(r.name), center: r.center, halfWidth: r.stdev * math.Sqrt(3)}
		tensors = append(tensors, tensor{info: info, fill: func(w *gguf.Writer) error {
			return u.write(w, info.Type, info.Elements())
		}})
	}
	return writeGGUF(path, s.metadata(), s.Fingerprint(), tensors)
}

// Fingerprint identifies the file Write produces.
func (s AudioProjector) Fingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "mmproj-audio-v1|%+v|", s)
	for _, r := range s.roles() {
		fmt.Fprintf(h, "%s%v%d;", r.name, r.shape, r.typ)
	}
	return hex.EncodeToString(h.Sum(nil))
}
