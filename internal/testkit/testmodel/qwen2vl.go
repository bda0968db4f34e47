package testmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// Qwen2VLText is a text model of llama.cpp's LLM_ARCH_QWEN2VL ("qwen2vl")
// with seeded random weights: Spec's llama blocks plus Q, K and V biases,
// rotated by M-RoPE (LLAMA_ROPE_TYPE_MROPE: NeoX pairs whose position is
// the temporal, height, width or extra plane by Sections), the text model
// the qwen2vl_merger projector feeds.
type Qwen2VLText struct {
	// Spec gives the sizes, weights (as WriteRandom draws them) and
	// vocabulary; Extra is not written.
	Spec Spec
	// Sections are rope.dimension_sections: pairs per plane, adding up to
	// at most HeadDim/2.
	Sections [4]int32
}

// TinyQwen2VLText returns tiny-f32's sizes and weights as a qwen2vl model
// with Qwen2-VL's section proportions for a head of 64 (8 temporal, 12
// height, 12 width pairs), biases of standard deviation 0.1: n_embd 256,
// the width of the tiny projectors.
func TinyQwen2VLText() Qwen2VLText {
	s := TinySpec(gguf.TensorF32)
	s.Name = "llamaloop-tiny-qwen2vl"
	return Qwen2VLText{Spec: s, Sections: [4]int32{8, 12, 12, 0}}
}

func (q Qwen2VLText) validate() error {
	if err := q.Spec.validate(); err != nil {
		return err
	}
	sum := q.Sections[0] + q.Sections[1] + q.Sections[2] + q.Sections[3]
	if sum <= 0 || int(sum) > q.Spec.HeadDim()/2 || q.Sections[0] < 0 || q.Sections[1] < 0 || q.Sections[2] < 0 || q.Sections[3] < 0 {
		return fmt.Errorf("testmodel: rope sections %v do not fit a head of %d", q.Sections, q.Spec.HeadDim())
	}
	return nil
}

func (q Qwen2VLText) metadata() []gguf.KV {
	s := q.Spec
	s.Extra = nil
	var md []gguf.KV
	for _, kv := range s.metadata() {
		if rest, ok := strings.CutPrefix(kv.Key, "llama."); ok {
			kv.Key = "qwen2vl." + rest
		}
		if kv.Key == "general.architecture" {
			kv.Value = "qwen2vl"
		}
		md = append(md, kv)
	}
	return append(md, gguf.KV{Key: "qwen2vl.rope.dimension_sections", Value: q.Sections[:]})
}

// Write writes the model to path, atomically.
func (q Qwen2VLText) Write(path string) error {
	if err := q.validate(); err != nil {
		return err
	}
	s := q.Spec
	tensors := randomTensors(s)
	d, kv := uint64(s.NEmbd), uint64(s.NEmbdKV())
	for i := range s.NLayer {
		for _, b := range []struct {
			name string
			n    uint64
		}{{"attn_q", d}, {"attn_k", kv}, {"attn_v", kv}} {
			info := gguf.TensorInfo{Name: fmt.Sprintf("blk.%d.%s.bias", i, b.name), Type: gguf.TensorF32, Shape: []uint64{b.n}}
			u := uniform{seed: s.Seed ^ nameHash(info.Name), halfWidth: 0.1 * math.Sqrt(3)}
			tensors = append(tensors, tensor{info: info, fill: func(w *gguf.Writer) error {
				return u.write(w, info.Type, info.Elements())
			}})
		}
	}
	return writeGGUF(path, q.metadata(), q.Fingerprint(), tensors)
}

// Fingerprint identifies the file Write produces.
func (q Qwen2VLText) Fingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s|qwen2vl-v1|%v", Random{q.Spec}.Fingerprint(), q.Sections)
	return hex.EncodeToString(h.Sum(nil))
}
