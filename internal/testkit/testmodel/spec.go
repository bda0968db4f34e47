// Package testmodel writes llama-architecture GGUF models that llama.cpp
// loads, for tests and benchmarks on machines that cannot download one:
// seeded random models of several sizes, oracle models whose outputs are
// known in closed form, and a demo model that continues English text.
//
// Every builder records its Spec (hyperparameters and vocabulary), so tests
// know what they load.
package testmodel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// Spec holds the hyperparameters of a llama model and its vocabulary.
type Spec struct {
	// Name is written as general.name.
	Name string
	// NEmbd is the embedding width; NHead*HeadDim() == NEmbd.
	NEmbd int
	// NLayer is the number of transformer blocks.
	NLayer int
	// NHead and NHeadKV are the query and key/value head counts
	// (NHeadKV < NHead is grouped-query attention).
	NHead, NHeadKV int
	// NFF is the feed-forward width.
	NFF int
	// NCtxTrain is written as llama.context_length.
	NCtxTrain int
	// RopeFreqBase is the RoPE base frequency (theta).
	RopeFreqBase float32
	// RMSEps is the RMSNorm epsilon.
	RMSEps float32
	// WeightType is the type of the matrices and the token embedding,
	// gguf.TensorF32 or gguf.TensorF16; norm weights are always F32.
	WeightType gguf.TensorType
	// Tied omits output.weight: llama.cpp then uses token_embd.weight as the
	// output head.
	Tied bool
	// Seed makes random weights reproducible.
	Seed uint64
	// Vocab is the tokenizer.
	Vocab *Vocab
	// Extra are more GGUF keys, written after the others (e.g.
	// llama.pooling_type).
	Extra []gguf.KV
	// Arch is general.architecture and the prefix of the hyperparameters'
	// keys: "" is "llama"; "maincoder" (an architecture llama.cpp has
	// since 2026, not the pinned one) is llama with each head of Q and K
	// RMS-normalized after RoPE, by blk.N.attn_q_norm and attn_k_norm.
	Arch string
}

// arch returns general.architecture.
func (s Spec) arch() string {
	if s.Arch == "" {
		return "llama"
	}
	return s.Arch
}

// qkNorm reports whether the architecture normalizes Q and K per head.
func (s Spec) qkNorm() bool { return s.Arch == "maincoder" }

// HeadDim returns NEmbd/NHead, the per-head width (and the RoPE dimension).
func (s Spec) HeadDim() int { return s.NEmbd / s.NHead }

// NEmbdKV returns the key/value width, HeadDim()*NHeadKV.
func (s Spec) NEmbdKV() int { return s.HeadDim() * s.NHeadKV }

// Params returns the number of weights in the file.
func (s Spec) Params() int64 {
	d, kv, f, v := int64(s.NEmbd), int64(s.NEmbdKV()), int64(s.NFF), int64(s.Vocab.Size())
	perLayer := 2*d + d*d*2 + 2*d*kv + 3*d*f
	n := v*d + d + int64(s.NLayer)*perLayer
	if !s.Tied {
		n += v * d
	}
	return n
}

func (s Spec) validate() error {
	switch {
	case s.Vocab == nil || s.Vocab.Size() < int(FirstByte)+256:
		return errors.New("testmodel: spec needs a vocabulary with the byte tokens")
	case s.NEmbd <= 0 || s.NLayer <= 0 || s.NHead <= 0 || s.NHeadKV <= 0 || s.NFF <= 0 || s.NCtxTrain <= 0:
		return fmt.Errorf("testmodel: spec %q has a non-positive size", s.Name)
	case s.NEmbd%s.NHead != 0 || s.HeadDim()%2 != 0:
		return fmt.Errorf("testmodel: n_embd %d must split into %d heads of even width", s.NEmbd, s.NHead)
	case s.NHead%s.NHeadKV != 0:
		return fmt.Errorf("testmodel: n_head %d is not a multiple of n_head_kv %d", s.NHead, s.NHeadKV)
	case s.WeightType != gguf.TensorF32 && s.WeightType != gguf.TensorF16:
		return fmt.Errorf("testmodel: weight type %v is not f32 or f16", s.WeightType)
	}
	return nil
}

// metadata returns the GGUF key/values llama.cpp's loader reads for
// LLM_ARCH_LLAMA with an SPM vocabulary.
func (s Spec) metadata() []gguf.KV {
	fileType := uint32(0) // LLAMA_FTYPE_ALL_F32
	if s.WeightType == gguf.TensorF16 {
		fileType = 1 // LLAMA_FTYPE_MOSTLY_F16
	}
	a := s.arch()
	md := []gguf.KV{
		{Key: "general.architecture", Value: a},
		{Key: "general.name", Value: s.Name},
		{Key: "general.file_type", Value: fileType},
		{Key: a + ".vocab_size", Value: uint32(s.Vocab.Size())},
		{Key: a + ".context_length", Value: uint32(s.NCtxTrain)},
		{Key: a + ".embedding_length", Value: uint32(s.NEmbd)},
		{Key: a + ".block_count", Value: uint32(s.NLayer)},
		{Key: a + ".feed_forward_length", Value: uint32(s.NFF)},
		{Key: a + ".attention.head_count", Value: uint32(s.NHead)},
		{Key: a + ".attention.head_count_kv", Value: uint32(s.NHeadKV)},
		{Key: a + ".attention.layer_norm_rms_epsilon", Value: s.RMSEps},
		{Key: a + ".rope.freq_base", Value: s.RopeFreqBase},
		{Key: a + ".rope.dimension_count", Value: uint32(s.HeadDim())},
	}
	md = append(md, vocabMetadata(s.Vocab)...)
	return append(md, s.Extra...)
}

// vocabMetadata returns the tokenizer key/values of an SPM vocabulary, which
// llama.cpp reads the same way for every architecture.
func vocabMetadata(v *Vocab) []gguf.KV {
	types := make([]int32, len(v.Types))
	for i, t := range v.Types {
		types[i] = int32(t)
	}
	md := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "llama"},
		{Key: "tokenizer.ggml.tokens", Value: v.Tokens},
		{Key: "tokenizer.ggml.scores", Value: v.Scores},
		{Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(BOS)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(EOS)},
		{Key: "tokenizer.ggml.unknown_token_id", Value: uint32(UNK)},
		{Key: "tokenizer.ggml.add_bos_token", Value: v.AddBOS},
		{Key: "tokenizer.ggml.add_eos_token", Value: v.AddEOS},
	}
	if v.ChatTemplate != "" {
		md = append(md, gguf.KV{Key: "tokenizer.chat_template", Value: v.ChatTemplate})
	}
	return md
}

// tensor is one tensor to write: its info and a function that writes its
// values, in storage order, through the writer.
type tensor struct {
	info gguf.TensorInfo
	fill func(w *gguf.Writer) error
}

// Tensor names as llama.cpp's llama-arch.cpp spells them.
const (
	nameTokEmbd    = "token_embd.weight"
	nameOutputNorm = "output_norm.weight"
	nameOutput     = "output.weight"
)

func blk(i int, name string) string { return fmt.Sprintf("blk.%d.%s.weight", i, name) }

// tensorRole describes one llama weight: name, shape in ggml order, and
// whether it is a norm (always F32).
type tensorRole struct {
	name  string
	shape []uint64
	norm  bool
}

// roles lists the model's tensors in the order they are written.
func (s Spec) roles() []tensorRole {
	d, kv, f, v := uint64(s.NEmbd), uint64(s.NEmbdKV()), uint64(s.NFF), uint64(s.Vocab.Size())
	r := []tensorRole{{nameTokEmbd, []uint64{d, v}, false}}
	for i := 0; i < s.NLayer; i++ {
		r = append(r,
			tensorRole{blk(i, "attn_norm"), []uint64{d}, true},
			tensorRole{blk(i, "attn_q"), []uint64{d, d}, false},
			tensorRole{blk(i, "attn_k"), []uint64{d, kv}, false},
			tensorRole{blk(i, "attn_v"), []uint64{d, kv}, false},
			tensorRole{blk(i, "attn_output"), []uint64{d, d}, false},
		)
		if s.qkNorm() {
			hd := uint64(s.HeadDim())
			r = append(r, tensorRole{blk(i, "attn_q_norm"), []uint64{hd}, true}, tensorRole{blk(i, "attn_k_norm"), []uint64{hd}, true})
		}
		r = append(r,
			tensorRole{blk(i, "ffn_norm"), []uint64{d}, true},
			tensorRole{blk(i, "ffn_gate"), []uint64{d, f}, false},
			tensorRole{blk(i, "ffn_up"), []uint64{d, f}, false},
			tensorRole{blk(i, "ffn_down"), []uint64{f, d}, false},
		)
	}
	r = append(r, tensorRole{nameOutputNorm, []uint64{d}, true})
	if !s.Tied {
		r = append(r, tensorRole{nameOutput, []uint64{d, v}, false})
	}
	return r
}

// writeModel writes the spec's metadata, the fingerprint and the tensors to
// path, through a temporary file renamed into place, so a file at path is
// always complete.
func writeModel(path string, s Spec, fingerprint string, tensors []tensor) error {
	if err := s.validate(); err != nil {
		return err
	}
	return writeGGUF(path, s.metadata(), fingerprint, tensors)
}

// writeGGUF writes metadata md, the fingerprint and the tensors to path
// atomically.
func writeGGUF(path string, md []gguf.KV, fingerprint string, tensors []tensor) (err error) {
	infos := make([]gguf.TensorInfo, len(tensors))
	for i, t := range tensors {
		infos[i] = t.info
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	md = append(md[:len(md):len(md)], gguf.KV{Key: KeyFingerprint, Value: fingerprint})
	w, err := gguf.NewWriter(f, md, infos)
	if err != nil {
		return err
	}
	for _, t := range tensors {
		if err := t.fill(w); err != nil {
			return fmt.Errorf("testmodel: writing %s: %w", t.info.Name, err)
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// matrixTensors turns explicit weights (row-major, rows of Shape[0] values)
// into tensors, in the order of s.roles().
func matrixTensors(s Spec, weights map[string][]float32) ([]tensor, error) {
	var out []tensor
	for _, r := range s.roles() {
		vals, ok := weights[r.name]
		info := gguf.TensorInfo{Name: r.name, Type: s.WeightType, Shape: r.shape}
		if r.norm {
			info.Type = gguf.TensorF32
		}
		if !ok || uint64(len(vals)) != info.Elements() {
			return nil, fmt.Errorf("testmodel: weights for %s: have %d values, want %d", r.name, len(vals), info.Elements())
		}
		out = append(out, tensor{info: info, fill: func(w *gguf.Writer) error { return w.WriteFloat32s(vals) }})
	}
	return out, nil
}
