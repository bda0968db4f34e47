package testmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// T5 is an encoder-decoder model of llama.cpp's LLM_ARCH_T5 ("t5") with
// seeded random F32 weights: the original T5's blocks (RMS norms without
// bias, attention without 1/sqrt(head_dim) scaling, a ReLU feed-forward
// without gate), the relative attention bias in the first encoder and the
// first decoder block only (llama.cpp, like transformers, lets the other
// blocks share it), and an untied output head, so that the unscaled lm head
// of llama.cpp's graph and transformers' agree. ReLU rather than flan-T5's
// gated GELU keeps llama.cpp exact: ggml's CPU GELU reads an f16 table.
type T5 struct {
	// Name is written as general.name.
	Name string
	// NEmbd is the model width (d_model), NHead*HeadDim().
	NEmbd int
	// NHead is the number of attention heads.
	NHead int
	// NFF is the feed-forward width (d_ff).
	NFF int
	// NEncLayer and NDecLayer are the encoder and decoder block counts.
	NEncLayer, NDecLayer int
	// NBuckets is relative_attention_num_buckets.
	NBuckets int
	// NCtxTrain is written as t5.context_length.
	NCtxTrain int
	// RMSEps is the RMS norm epsilon.
	RMSEps float32
	// DecoderStart is decoder_start_token_id.
	DecoderStart int32
	// Seed makes the weights reproducible.
	Seed uint64
	// Vocab is the tokenizer: an SPM vocabulary, which llama.cpp accepts for
	// t5 as for any architecture.
	Vocab *Vocab
}

// TinyT5 returns the tiny encoder-decoder test model: n_embd 256 in 4 heads
// of 64, n_ff 512, 2 encoder and 2 decoder blocks, 32 relative position
// buckets, context 512, RMS eps 1e-6, the TinyVocab without chat tokens,
// adding EOS and no BOS as T5's tokenizer does, and decoder_start_token_id
// 0, which is T5's (its pad token; <unk> here).
func TinyT5() T5 {
	v := TinyVocab(false)
	v.AddBOS, v.AddEOS = false, true
	return T5{Name: "llamaloop-tiny-t5", NEmbd: 256, NHead: 4, NFF: 512, NEncLayer: 2, NDecLayer: 2, NBuckets: 32,
		NCtxTrain: 512, RMSEps: 1e-6, DecoderStart: UNK, Seed: 30, Vocab: v}
}

// HeadDim returns NEmbd/NHead.
func (s T5) HeadDim() int { return s.NEmbd / s.NHead }

func (s T5) validate() error {
	switch {
	case s.Vocab == nil || s.Vocab.Size() < int(FirstByte)+256:
		return errors.New("testmodel: t5 needs a vocabulary with the byte tokens")
	case s.NEmbd <= 0 || s.NHead <= 0 || s.NFF <= 0 || s.NEncLayer <= 0 || s.NDecLayer <= 0 || s.NBuckets < 4 || s.NCtxTrain <= 0:
		return fmt.Errorf("testmodel: t5 %q has a size below its minimum", s.Name)
	case s.NEmbd%s.NHead != 0:
		return fmt.Errorf("testmodel: t5 n_embd %d does not split into %d heads", s.NEmbd, s.NHead)
	case s.DecoderStart < 0 || int(s.DecoderStart) >= s.Vocab.Size():
		return fmt.Errorf("testmodel: t5 decoder_start_token_id %d outside the vocabulary", s.DecoderStart)
	}
	return nil
}

func (s T5) metadata() []gguf.KV {
	md := []gguf.KV{
		{Key: "general.architecture", Value: "t5"},
		{Key: "general.name", Value: s.Name},
		{Key: "general.file_type", Value: uint32(0)},
		{Key: "t5.vocab_size", Value: uint32(s.Vocab.Size())},
		{Key: "t5.context_length", Value: uint32(s.NCtxTrain)},
		{Key: "t5.embedding_length", Value: uint32(s.NEmbd)},
		{Key: "t5.block_count", Value: uint32(s.NEncLayer)},
		{Key: "t5.decoder_block_count", Value: uint32(s.NDecLayer)},
		{Key: "t5.feed_forward_length", Value: uint32(s.NFF)},
		{Key: "t5.attention.head_count", Value: uint32(s.NHead)},
		{Key: "t5.attention.key_length", Value: uint32(s.HeadDim())},
		{Key: "t5.attention.value_length", Value: uint32(s.HeadDim())},
		{Key: "t5.attention.layer_norm_rms_epsilon", Value: s.RMSEps},
		{Key: "t5.attention.relative_buckets_count", Value: uint32(s.NBuckets)},
		{Key: "t5.decoder_start_token_id", Value: uint32(s.DecoderStart)},
	}
	return append(md, vocabMetadata(s.Vocab)...)
}

// roles lists the tensors with llama-arch.cpp's names, in the order written.
func (s T5) roles() []tensorRole {
	d, f, v, b, h := uint64(s.NEmbd), uint64(s.NFF), uint64(s.Vocab.Size()), uint64(s.NBuckets), uint64(s.NHead)
	r := []tensorRole{{nameTokEmbd, []uint64{d, v}, false}}
	attn := func(prefix string) []tensorRole {
		return []tensorRole{
			{prefix + "_q.weight", []uint64{d, d}, false},
			{prefix + "_k.weight", []uint64{d, d}, false},
			{prefix + "_v.weight", []uint64{d, d}, false},
			{prefix + "_o.weight", []uint64{d, d}, false},
		}
	}
	ffn := func(p string) []tensorRole {
		return []tensorRole{
			{p + "ffn_norm.weight", []uint64{d}, true},
			{p + "ffn_up.weight", []uint64{d, f}, false},
			{p + "ffn_down.weight", []uint64{f, d}, false},
		}
	}
	for i := range s.NEncLayer {
		p := fmt.Sprintf("enc.blk.%d.", i)
		r = append(r, tensorRole{p + "attn_norm.weight", []uint64{d}, true})
		if i == 0 {
			r = append(r, tensorRole{p + "attn_rel_b.weight", []uint64{h, b}, false})
		}
		r = append(r, attn(p+"attn")...)
		r = append(r, ffn(p)...)
	}
	r = append(r, tensorRole{"enc.output_norm.weight", []uint64{d}, true})
	for i := range s.NDecLayer {
		p := fmt.Sprintf("dec.blk.%d.", i)
		r = append(r, tensorRole{p + "attn_norm.weight", []uint64{d}, true})
		if i == 0 {
			r = append(r, tensorRole{p + "attn_rel_b.weight", []uint64{h, b}, false})
		}
		r = append(r, attn(p+"attn")...)
		r = append(r, tensorRole{p + "cross_attn_norm.weight", []uint64{d}, true})
		r = append(r, attn(p+"cross_attn")...)
		r = append(r, ffn(p)...)
	}
	return append(r,
		tensorRole{"dec.output_norm.weight", []uint64{d}, true},
		tensorRole{nameOutput, []uint64{d, v}, false})
}

// Write writes the model to path, atomically. Weights are uniform with
// these standard deviations: embeddings 1, norms around 1 within ±0.2,
// query and key projections 0.5/sqrt(n_embd) (T5 does not scale the
// attention scores, so the dot products of head width 64 stay O(1)),
// relative attention biases 1, the output head 3/sqrt(n_embd) (logits of
// standard deviation about 3), the other matrices 1/sqrt(fan-in).
func (s T5) Write(path string) error {
	if err := s.validate(); err != nil {
		return err
	}
	d, f := float64(s.NEmbd), float64(s.NFF)
	var tensors []tensor
	for _, r := range s.roles() {
		info := gguf.TensorInfo{Name: r.name, Type: gguf.TensorF32, Shape: r.shape}
		center, std := 0.0, 1/math.Sqrt(d)
		switch {
		case r.norm:
			center, std = 1, 0.2/math.Sqrt(3)
		case r.name == nameTokEmbd, strings.HasSuffix(r.name, "attn_rel_b.weight"):
			std = 1
		case r.name == nameOutput:
			std = 3 / math.Sqrt(d)
		case strings.HasSuffix(r.name, "_q.weight"), strings.HasSuffix(r.name, "_k.weight"):
			std = 0.5 / math.Sqrt(d)
		case strings.HasSuffix(r.name, "ffn_down.weight"):
			std = 1 / math.Sqrt(f)
		}
		u := uniform{seed: s.Seed ^ nameHash(r.name), center: center, halfWidth: std * math.Sqrt(3)}
		tensors = append(tensors, tensor{info: info, fill: func(w *gguf.Writer) error {
			return u.write(w, info.Type, info.Elements())
		}})
	}
	return writeGGUF(path, s.metadata(), s.Fingerprint(), tensors)
}

// Fingerprint identifies the file Write produces.
func (s T5) Fingerprint() string {
	llama := Spec{Name: s.Name, NEmbd: s.NEmbd, NLayer: s.NEncLayer, NHead: s.NHead, NHeadKV: s.NHead, NFF: s.NFF,
		NCtxTrain: s.NCtxTrain, RMSEps: s.RMSEps, WeightType: gguf.TensorF32, Seed: s.Seed, Vocab: s.Vocab}
	h := sha256.New()
	fmt.Fprintf(h, "%s|%d %d %d|", fingerprint(llama, "t5-v1", nil), s.NDecLayer, s.NBuckets, s.DecoderStart)
	return hex.EncodeToString(h.Sum(nil))
}
