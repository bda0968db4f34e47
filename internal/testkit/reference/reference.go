// Package reference evaluates llama-architecture GGUF models (F32 and F16
// weights) in float64, computing exactly what llama.cpp's LLM_ARCH_LLAMA
// graph computes, so that llama.cpp's float32 logits can be compared against
// it:
//
//	x      = token_embd[token]
//	for each layer:
//	  a    = RMSNorm(x) * attn_norm            RMSNorm(x) = x / sqrt(mean(x^2) + eps)
//	  q, k, v = Wq a, Wk a, Wv a               split into heads of head_dim
//	  q, k = RoPE(q, pos), RoPE(k, pos)        adjacent pairs (2i, 2i+1) rotate by
//	                                           pos * base^(-2i/head_dim) (LLAMA_ROPE_TYPE_NORM)
//	  o    = softmax(q·k_j / sqrt(head_dim), j <= pos) · v_j  per head; query head h
//	                                           reads key/value head h / (n_head/n_head_kv)
//	  x    = x + Wo o
//	  f    = RMSNorm(x) * ffn_norm
//	  x    = x + Wdown (silu(Wgate f) * Wup f)
//	logits = output · (RMSNorm(x) * output_norm)   output = token_embd when output.weight is absent
//
// Weights are widened from the file's float32/float16 values exactly; all
// arithmetic is float64.
package reference

import (
	"errors"
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// Hparams are the hyperparameters read from the file.
type Hparams struct {
	// Arch is general.architecture: "llama", "maincoder", or "qwen2vl"
	// (Q/K/V biases and M-RoPE).
	Arch                                                string
	NVocab, NEmbd, NLayer, NHead, NHeadKV, HeadDim, NFF int
	// RMSEps and RopeFreqBase are the file's float32 values, widened.
	RMSEps, RopeFreqBase float64
	// RopeSections are qwen2vl's rope.dimension_sections: how many of a
	// head's HeadDim/2 rotated pairs take the temporal, height, width and
	// extra position (cycling when they add up to less); zero for llama.
	RopeSections [4]int
}

// layer holds one block's weights, matrices row-major [out][in].
type layer struct {
	attnNorm, wq, wk, wv, wo []float64
	bq, bk, bv               []float64 // qwen2vl only
	ffnNorm, gate, up, down  []float64
	qNorm, kNorm             []float64 // maincoder's per-head norms of Q and K, after RoPE
}

// Model is a loaded model.
type Model struct {
	Hparams
	tokEmbd    []float64 // [vocab][embd]
	output     []float64 // [vocab][embd]; aliases tokEmbd when tied
	outputNorm []float64
	layers     []layer
	// invFreq[i] = base^(-2i/head_dim)
	invFreq []float64
}

// Load reads the model at path. It supports general.architecture "llama"
// with F32 or F16 tensors, no biases and no RoPE scaling; "maincoder"
// (llama.cpp after the pin): llama whose heads of Q and K are RMS-normalized
// after RoPE by attn_q_norm and attn_k_norm; and "qwen2vl",
// which adds Q, K and V biases and rotates by M-RoPE (llama.cpp's
// LLAMA_ROPE_TYPE_MROPE): pair i of a head (elements i and i+HeadDim/2,
// NeoX-style) turns by p*base^(-2i/HeadDim), where p is the position's
// temporal, height, width or extra plane as i mod the sections' sum falls
// into RopeSections. Text positions have all three first planes equal (and
// the extra 0), which is NeoX RoPE.
func Load(path string) (*Model, error) {
	r, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()

	h, err := llamaHparams(r)
	if err != nil {
		return nil, err
	}
	m := &Model{Hparams: h}
	reqs := []tensorReq{
		{&m.tokEmbd, "token_embd.weight", false, []int{h.NEmbd, h.NVocab}},
		{&m.outputNorm, "output_norm.weight", false, []int{h.NEmbd}},
		{&m.output, "output.weight", true, []int{h.NEmbd, h.NVocab}},
	}
	m.layers = make([]layer, h.NLayer)
	kv := h.HeadDim * h.NHeadKV
	for i := range m.layers {
		l, p := &m.layers[i], fmt.Sprintf("blk.%d.", i)
		reqs = append(reqs,
			tensorReq{&l.attnNorm, p + "attn_norm.weight", false, []int{h.NEmbd}},
			tensorReq{&l.wq, p + "attn_q.weight", false, []int{h.NEmbd, h.NEmbd}},
			tensorReq{&l.bq, p + "attn_q.bias", h.Arch != "qwen2vl", []int{h.NEmbd}},
			tensorReq{&l.bk, p + "attn_k.bias", h.Arch != "qwen2vl", []int{kv}},
			tensorReq{&l.bv, p + "attn_v.bias", h.Arch != "qwen2vl", []int{kv}},
			tensorReq{&l.wk, p + "attn_k.weight", false, []int{h.NEmbd, kv}},
			tensorReq{&l.wv, p + "attn_v.weight", false, []int{h.NEmbd, kv}},
			tensorReq{&l.wo, p + "attn_output.weight", false, []int{h.NEmbd, h.NEmbd}},
			tensorReq{&l.ffnNorm, p + "ffn_norm.weight", false, []int{h.NEmbd}},
			tensorReq{&l.gate, p + "ffn_gate.weight", false, []int{h.NEmbd, h.NFF}},
			tensorReq{&l.up, p + "ffn_up.weight", false, []int{h.NEmbd, h.NFF}},
			tensorReq{&l.down, p + "ffn_down.weight", false, []int{h.NFF, h.NEmbd}})
		if h.Arch == "maincoder" {
			reqs = append(reqs,
				tensorReq{&l.qNorm, p + "attn_q_norm.weight", false, []int{h.HeadDim}},
				tensorReq{&l.kNorm, p + "attn_k_norm.weight", false, []int{h.HeadDim}})
		}
	}
	if err := loadTensors(r, reqs, "biases or extra tensors"); err != nil {
		return nil, err
	}
	if m.output == nil {
		m.output = m.tokEmbd
	}
	m.invFreq = make([]float64, h.HeadDim/2)
	for i := range m.invFreq {
		m.invFreq[i] = math.Pow(h.RopeFreqBase, -2*float64(i)/float64(h.HeadDim))
	}
	return m, nil
}

// llamaHparams reads and checks the hyperparameters of a llama GGUF file.
func llamaHparams(r *gguf.Reader) (h Hparams, err error) {
	arch, err := gguf.Get[string](r.File, "general.architecture")
	if err != nil {
		return Hparams{}, err
	}
	if arch != "llama" && arch != "maincoder" && arch != "qwen2vl" {
		return Hparams{}, fmt.Errorf("reference: architecture %q is not llama, maincoder or qwen2vl", arch)
	}
	h.Arch = arch
	if arch == "qwen2vl" {
		sec, err := gguf.Get[[]int32](r.File, "qwen2vl.rope.dimension_sections")
		if err != nil {
			return Hparams{}, err
		}
		if len(sec) != 4 {
			return Hparams{}, fmt.Errorf("reference: qwen2vl.rope.dimension_sections has %d values, want 4", len(sec))
		}
		for i, v := range sec {
			if v < 0 {
				return Hparams{}, fmt.Errorf("reference: negative rope section %d", v)
			}
			h.RopeSections[i] = int(v)
		}
		if h.RopeSections == [4]int{} {
			return Hparams{}, errors.New("reference: qwen2vl rope sections are all 0")
		}
	}
	h.Arch = arch
	u32 := func(key string, dst *int) error {
		v, err := gguf.Get[uint32](r.File, key)
		*dst = int(v)
		return err
	}
	for _, kv := range []struct {
		key string
		dst *int
	}{
		{arch + ".embedding_length", &h.NEmbd},
		{arch + ".block_count", &h.NLayer},
		{arch + ".attention.head_count", &h.NHead},
		{arch + ".feed_forward_length", &h.NFF},
	} {
		if err := u32(kv.key, kv.dst); err != nil {
			return Hparams{}, err
		}
	}
	h.NHeadKV = h.NHead
	if _, ok := r.Lookup(arch + ".attention.head_count_kv"); ok {
		if err := u32(arch+".attention.head_count_kv", &h.NHeadKV); err != nil {
			return Hparams{}, err
		}
	}
	eps, err := gguf.Get[float32](r.File, arch+".attention.layer_norm_rms_epsilon")
	if err != nil {
		return Hparams{}, err
	}
	h.RMSEps = float64(eps)
	h.RopeFreqBase = 10000
	if _, ok := r.Lookup(arch + ".rope.freq_base"); ok {
		base, err := gguf.Get[float32](r.File, arch+".rope.freq_base")
		if err != nil {
			return Hparams{}, err
		}
		h.RopeFreqBase = float64(base)
	}
	for _, key := range []string{arch + ".rope.scaling.type", arch + ".rope.scaling.factor", arch + ".attention.key_length", arch + ".attention.value_length"} {
		if _, ok := r.Lookup(key); ok {
			return Hparams{}, fmt.Errorf("reference: %s is not supported", key)
		}
	}
	tokens, err := gguf.Get[[]string](r.File, "tokenizer.ggml.tokens")
	if err != nil {
		return Hparams{}, err
	}
	h.NVocab = len(tokens)
	if h.NEmbd <= 0 || h.NLayer <= 0 || h.NHead <= 0 || h.NHeadKV <= 0 || h.NFF <= 0 || h.NVocab == 0 ||
		h.NEmbd%h.NHead != 0 || h.NHead%h.NHeadKV != 0 || (h.NEmbd/h.NHead)%2 != 0 {
		return Hparams{}, fmt.Errorf("reference: inconsistent hyperparameters %+v", h)
	}
	h.HeadDim = h.NEmbd / h.NHead
	if _, ok := r.Lookup(arch + ".rope.dimension_count"); ok {
		var nRot int
		if err := u32(arch+".rope.dimension_count", &nRot); err != nil {
			return Hparams{}, err
		}
		if nRot != h.HeadDim {
			return Hparams{}, fmt.Errorf("reference: rope dimension %d differs from the head width %d", nRot, h.HeadDim)
		}
	}

	return h, nil
}

// Logits evaluates tokens as one sequence from position 0 and returns the
// logits at every position.
func (m *Model) Logits(tokens []int32) ([][]float64, error) {
	return m.NewSequence().Eval(tokens)
}

// Sequence is one sequence's KV cache: the keys (after RoPE) and values of
// every evaluated position, per layer.
type Sequence struct {
	m    *Model
	k, v [][]float64 // per layer: [pos][n_embd_kv], flattened
	n    int
}

// NewSequence returns an empty sequence.
func (m *Model) NewSequence() *Sequence {
	return &Sequence{m: m, k: make([][]float64, m.NLayer), v: make([][]float64, m.NLayer)}
}

// Len returns the number of evaluated positions.
func (s *Sequence) Len() int { return s.n }

// Clone returns an independent copy of the sequence (llama.cpp's
// llama_memory_seq_cp followed by divergent evaluation).
func (s *Sequence) Clone() *Sequence {
	c := &Sequence{m: s.m, k: make([][]float64, len(s.k)), v: make([][]float64, len(s.v)), n: s.n}
	for i := range s.k {
		c.k[i] = append([]float64(nil), s.k[i]...)
		c.v[i] = append([]float64(nil), s.v[i]...)
	}
	return c
}

// Truncate keeps the first n positions (llama_memory_seq_rm of [n, end)).
func (s *Sequence) Truncate(n int) error {
	if n < 0 || n > s.n {
		return fmt.Errorf("reference: cannot truncate %d positions to %d", s.n, n)
	}
	kv := s.m.HeadDim * s.m.NHeadKV
	for i := range s.k {
		s.k[i] = s.k[i][:n*kv]
		s.v[i] = s.v[i][:n*kv]
	}
	s.n = n
	return nil
}

// ErrToken reports a token id outside the vocabulary.
var ErrToken = errors.New("reference: token out of range")

// Eval appends tokens at the next positions and returns their logits, one
// row of NVocab values per token. On error the sequence is unchanged.
func (s *Sequence) Eval(tokens []int32) ([][]float64, error) {
	for _, t := range tokens {
		if t < 0 || int(t) >= s.m.NVocab {
			return nil, fmt.Errorf("%w: %d not in [0, %d)", ErrToken, t, s.m.NVocab)
		}
	}
	out := make([][]float64, len(tokens))
	for i, t := range tokens {
		out[i] = s.step(t)
	}
	return out, nil
}

// step evaluates one token at position s.n and returns its logits.
func (s *Sequence) step(tok int32) []float64 {
	d := s.m.NEmbd
	return matVec(s.m.output, s.hidden(append([]float64(nil), s.m.tokEmbd[int(tok)*d:(int(tok)+1)*d]...)), s.m.NVocab)
}

// hidden evaluates the input vector x (overwritten) at position s.n and
// returns the last hidden state after the output norm: llama.cpp's t_embd.
func (s *Sequence) hidden(x []float64) []float64 {
	return s.hiddenAt(x, [4]int{s.n, s.n, s.n, 0})
}

// hiddenAt is hidden with the rotary position rp: rp[0] for llama, the
// four M-RoPE planes for qwen2vl. The attention spans the s.n cached
// positions and this one whatever rp is.
func (s *Sequence) hiddenAt(x []float64, rp [4]int) []float64 {
	return s.hiddenBlock([][]float64{x}, [][4]int{rp}, false)[0]
}

// hiddenBlock evaluates the input vectors xs (overwritten) at positions
// s.n, s.n+1, ... with the rotary positions rps and returns their last
// hidden states after the output norm. Input t attends to the cached
// positions and to the block's inputs up to t, or, when bidirectional, to
// all of the block's inputs (llama.cpp's decode with causal attention
// off, the block one micro-batch).
func (s *Sequence) hiddenBlock(xs [][]float64, rps [][4]int, bidirectional bool) [][]float64 {
	m := s.m
	d, hd, kvw := m.NEmbd, m.HeadDim, m.HeadDim*m.NHeadKV
	base, n := s.n, len(xs)
	group := m.NHead / m.NHeadKV
	scale := 1 / math.Sqrt(float64(hd))
	qs := make([][]float64, n)
	for li := range m.layers {
		l := &m.layers[li]
		for t, x := range xs {
			a := rmsNorm(x, l.attnNorm, m.RMSEps)
			q := matVec(l.wq, a, d)
			k := matVec(l.wk, a, kvw)
			v := matVec(l.wv, a, kvw)
			if l.bq != nil {
				addTo(q, l.bq)
				addTo(k, l.bk)
				addTo(v, l.bv)
			}
			if m.RopeSections != ([4]int{}) {
				m.mrope(q, rps[t])
				m.mrope(k, rps[t])
			} else {
				m.rope(q, rps[t][0])
				m.rope(k, rps[t][0])
			}
			if l.qNorm != nil {
				headNorm(q, l.qNorm, m.RMSEps)
				headNorm(k, l.kNorm, m.RMSEps)
			}
			qs[t] = q
			s.k[li] = append(s.k[li], k...)
			s.v[li] = append(s.v[li], v...)
		}
		keys, vals := s.k[li], s.v[li]
		for t, x := range xs {
			last := base + t // the last position input t attends to
			if bidirectional {
				last = base + n - 1
			}
			o := make([]float64, d)
			scores := make([]float64, last+1)
			for h := 0; h < m.NHead; h++ {
				qh := qs[t][h*hd : (h+1)*hd]
				g := h / group
				mx := math.Inf(-1)
				for j := 0; j <= last; j++ {
					kj := keys[j*kvw+g*hd : j*kvw+(g+1)*hd]
					dot := 0.0
					for i := range qh {
						dot += qh[i] * kj[i]
					}
					scores[j] = dot * scale
					mx = max(mx, scores[j])
				}
				sum := 0.0
				for j := range scores {
					scores[j] = math.Exp(scores[j] - mx)
					sum += scores[j]
				}
				oh := o[h*hd : (h+1)*hd]
				for j := 0; j <= last; j++ {
					p := scores[j] / sum
					vj := vals[j*kvw+g*hd : j*kvw+(g+1)*hd]
					for i := range oh {
						oh[i] += p * vj[i]
					}
				}
			}
			attn := matVec(l.wo, o, d)
			for i := range x {
				x[i] += attn[i]
			}

			f := rmsNorm(x, l.ffnNorm, m.RMSEps)
			gate := matVec(l.gate, f, m.NFF)
			up := matVec(l.up, f, m.NFF)
			for i := range gate {
				gate[i] = gate[i] / (1 + math.Exp(-gate[i])) * up[i]
			}
			ffn := matVec(l.down, gate, d)
			for i := range x {
				x[i] += ffn[i]
			}
		}
	}
	s.n += n
	out := make([][]float64, n)
	for t, x := range xs {
		out[t] = rmsNorm(x, m.outputNorm, m.RMSEps)
	}
	return out
}

// rope rotates each head's adjacent pairs (2i, 2i+1) of x by pos*invFreq[i].
func (m *Model) rope(x []float64, pos int) {
	hd := m.HeadDim
	for h := 0; h+hd <= len(x); h += hd {
		for i, f := range m.invFreq {
			theta := float64(pos) * f
			c, s := math.Cos(theta), math.Sin(theta)
			x0, x1 := x[h+2*i], x[h+2*i+1]
			x[h+2*i] = x0*c - x1*s
			x[h+2*i+1] = x0*s + x1*c
		}
	}
}

// headNorm RMS-normalizes each head of x in place, with the head's weights w.
func headNorm(x, w []float64, eps float64) {
	for h := 0; h+len(w) <= len(x); h += len(w) {
		copy(x[h:h+len(w)], rmsNorm(x[h:h+len(w)], w, eps))
	}
}

// mrope rotates each head's pairs (i, i+HeadDim/2) by p*invFreq[i], p
// the plane of rp that i's section picks (ggml's GGML_ROPE_TYPE_MROPE).
func (m *Model) mrope(x []float64, rp [4]int) {
	hd, sec := m.HeadDim, m.RopeSections
	total := sec[0] + sec[1] + sec[2] + sec[3]
	for h := 0; h+hd <= len(x); h += hd {
		for i, f := range m.invFreq {
			p := rp[3]
			switch k := i % total; {
			case k < sec[0]:
				p = rp[0]
			case k < sec[0]+sec[1]:
				p = rp[1]
			case k < sec[0]+sec[1]+sec[2]:
				p = rp[2]
			}
			theta := float64(p) * f
			c, s := math.Cos(theta), math.Sin(theta)
			x0, x1 := x[h+i], x[h+i+hd/2]
			x[h+i] = x0*c - x1*s
			x[h+i+hd/2] = x0*s + x1*c
		}
	}
}

// rmsNorm returns x / sqrt(mean(x^2) + eps) * w.
func rmsNorm(x, w []float64, eps float64) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	sc := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * sc * w[i]
	}
	return out
}

// matVec returns W x for W row-major with rows outputs of len(x) values.
func matVec(w, x []float64, rows int) []float64 {
	n := len(x)
	out := make([]float64, rows)
	for r := range out {
		row := w[r*n : (r+1)*n]
		acc := 0.0
		for i, v := range row {
			acc += v * x[i]
		}
		out[r] = acc
	}
	return out
}
