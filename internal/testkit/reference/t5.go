package reference

import (
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// T5 is an encoder-decoder model of llama.cpp's LLM_ARCH_T5 (F32 or F16
// weights, ReLU feed-forward), evaluated in float64 as llama.cpp's
// llm_build_t5_enc and llm_build_t5_dec graphs compute it:
//
//	encoder, over the whole input at once (no causal mask):
//	  x    = token_embd[token]
//	  for each block:
//	    a  = RMSNorm(x) * attn_norm
//	    x  = x + Wo softmax(q_i·k_j + bias[bucket(j-i, bidirectional)][h]) v   per head, no 1/sqrt(d)
//	    x  = x + Wdown relu(Wup (RMSNorm(x) * ffn_norm))
//	  e    = RMSNorm(x) * enc.output_norm
//	decoder, one token at a time:
//	  for each block:
//	    x  = x + self-attention over positions j <= i with bias[bucket(j-i, causal)][h]
//	    x  = x + cross-attention (Wq_cross RMSNorm(x)*cross_attn_norm against Wk_cross e, Wv_cross e), no bias
//	    x  = x + Wdown relu(Wup (RMSNorm(x) * ffn_norm))
//	  logits = output · (RMSNorm(x) * dec.output_norm)
//
// Blocks without attn_rel_b use block 0's. The lm head is not scaled:
// llama.cpp's t5 graph multiplies by output.weight (token_embd.weight when
// absent) as it is, unlike transformers' tied T5, which scales by
// d_model^-0.5 first.
type T5 struct {
	NVocab, NEmbd, NHead, HeadDim, NFF, NBuckets int
	RMSEps                                       float64
	// DecoderStart is decoder_start_token_id, -1 when the file has none.
	DecoderStart int32

	tokEmbd, output        []float64
	encNorm, decNorm       []float64
	enc                    []t5Block
	dec                    []t5Block
	encRelBias, decRelBias []float64 // [bucket][head] of block 0
}

type t5Block struct {
	attnNorm, wq, wk, wv, wo  []float64
	crossNorm, cq, ck, cv, co []float64 // decoder only
	ffnNorm, up, down         []float64
}

// LoadT5 reads a t5 model with F32 or F16 tensors, ReLU feed-forward
// blocks and no grouped-query attention.
func LoadT5(path string) (*T5, error) {
	r, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	arch, err := gguf.Get[string](r.File, "general.architecture")
	if err != nil {
		return nil, err
	}
	if arch != "t5" {
		return nil, fmt.Errorf("reference: architecture %q is not t5", arch)
	}
	u32 := func(key string, def int) (int, error) {
		if _, ok := r.Lookup(key); !ok && def >= 0 {
			return def, nil
		}
		v, err := gguf.Get[uint32](r.File, key)
		return int(v), err
	}
	m := &T5{DecoderStart: -1}
	var nEnc, nDec int
	for _, kv := range []struct {
		key string
		dst *int
		def int
	}{
		{"t5.embedding_length", &m.NEmbd, -1},
		{"t5.block_count", &nEnc, -1},
		{"t5.attention.head_count", &m.NHead, -1},
		{"t5.feed_forward_length", &m.NFF, -1},
		{"t5.attention.relative_buckets_count", &m.NBuckets, -1},
	} {
		if *kv.dst, err = u32(kv.key, kv.def); err != nil {
			return nil, err
		}
	}
	if nDec, err = u32("t5.decoder_block_count", nEnc); err != nil {
		return nil, err
	}
	if kv, err := u32("t5.attention.head_count_kv", m.NHead); err != nil || kv != m.NHead {
		return nil, fmt.Errorf("reference: t5.attention.head_count_kv must equal the head count (%v)", err)
	}
	if m.NEmbd <= 0 || m.NHead <= 0 || m.NEmbd%m.NHead != 0 || nEnc <= 0 || nDec <= 0 || m.NFF <= 0 || m.NBuckets < 4 {
		return nil, fmt.Errorf("reference: inconsistent t5 hyperparameters")
	}
	m.HeadDim = m.NEmbd / m.NHead
	for _, key := range []string{"t5.attention.key_length", "t5.attention.value_length"} {
		if w, err := u32(key, m.HeadDim); err != nil || w != m.HeadDim {
			return nil, fmt.Errorf("reference: %s must be n_embd/n_head (%v)", key, err)
		}
	}
	eps, err := gguf.Get[float32](r.File, "t5.attention.layer_norm_rms_epsilon")
	if err != nil {
		return nil, err
	}
	m.RMSEps = float64(eps)
	if _, ok := r.Lookup("t5.decoder_start_token_id"); ok {
		v, err := gguf.Get[uint32](r.File, "t5.decoder_start_token_id")
		if err != nil {
			return nil, err
		}
		m.DecoderStart = int32(v)
	}
	tokens, err := gguf.Get[[]string](r.File, "tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	m.NVocab = len(tokens)

	d, f := m.NEmbd, m.NFF
	type req = tensorReq
	list := []req{
		{&m.tokEmbd, "token_embd.weight", false, []int{d, m.NVocab}},
		{&m.encNorm, "enc.output_norm.weight", false, []int{d}},
		{&m.decNorm, "dec.output_norm.weight", false, []int{d}},
		{&m.output, "output.weight", true, []int{d, m.NVocab}},
		{&m.encRelBias, "enc.blk.0.attn_rel_b.weight", false, []int{m.NHead, m.NBuckets}},
		{&m.decRelBias, "dec.blk.0.attn_rel_b.weight", false, []int{m.NHead, m.NBuckets}},
	}
	m.enc, m.dec = make([]t5Block, nEnc), make([]t5Block, nDec)
	for i := range m.enc {
		b, p := &m.enc[i], fmt.Sprintf("enc.blk.%d.", i)
		list = append(list, req{&b.attnNorm, p + "attn_norm.weight", false, []int{d}},
			req{&b.wq, p + "attn_q.weight", false, []int{d, d}}, req{&b.wk, p + "attn_k.weight", false, []int{d, d}},
			req{&b.wv, p + "attn_v.weight", false, []int{d, d}}, req{&b.wo, p + "attn_o.weight", false, []int{d, d}},
			req{&b.ffnNorm, p + "ffn_norm.weight", false, []int{d}},
			req{&b.up, p + "ffn_up.weight", false, []int{d, f}}, req{&b.down, p + "ffn_down.weight", false, []int{f, d}})
	}
	for i := range m.dec {
		b, p := &m.dec[i], fmt.Sprintf("dec.blk.%d.", i)
		list = append(list, req{&b.attnNorm, p + "attn_norm.weight", false, []int{d}},
			req{&b.wq, p + "attn_q.weight", false, []int{d, d}}, req{&b.wk, p + "attn_k.weight", false, []int{d, d}},
			req{&b.wv, p + "attn_v.weight", false, []int{d, d}}, req{&b.wo, p + "attn_o.weight", false, []int{d, d}},
			req{&b.crossNorm, p + "cross_attn_norm.weight", false, []int{d}},
			req{&b.cq, p + "cross_attn_q.weight", false, []int{d, d}}, req{&b.ck, p + "cross_attn_k.weight", false, []int{d, d}},
			req{&b.cv, p + "cross_attn_v.weight", false, []int{d, d}}, req{&b.co, p + "cross_attn_o.weight", false, []int{d, d}},
			req{&b.ffnNorm, p + "ffn_norm.weight", false, []int{d}},
			req{&b.up, p + "ffn_up.weight", false, []int{d, f}}, req{&b.down, p + "ffn_down.weight", false, []int{f, d}})
	}
	if err := loadTensors(r, list, "per-block relative biases, gated feed-forward or biases"); err != nil {
		return nil, err
	}
	if m.output == nil {
		m.output = m.tokEmbd
	}
	return m, nil
}

// RelativePositionBucket is llama.cpp's llama_relative_position_bucket
// (transformers' T5Attention._relative_position_bucket with max_distance
// 128) for key position x and query position y, with its float32 steps.
func RelativePositionBucket(x, y, nBuckets int, bidirectional bool) int {
	const maxDistance = 128
	if bidirectional {
		nBuckets >>= 1
	}
	maxExact := nBuckets >> 1
	rel, bucket := x-y, 0
	if bidirectional {
		if rel > 0 {
			bucket += nBuckets
		}
		rel = max(rel, -rel)
	} else {
		rel = -min(rel, 0)
	}
	if rel < maxExact {
		return bucket + rel
	}
	// floorf(max_exact + logf(rel/max_exact) * (n_buckets - max_exact) / log(max_distance/max_exact))
	lf := float32(math.Log(float64(float32(float64(rel) / float64(maxExact)))))
	prod := lf * float32(nBuckets-maxExact)
	large := int(math.Floor(float64(float32(float64(maxExact) + float64(prod)/math.Log(float64(maxDistance)/float64(maxExact))))))
	return bucket + min(large, nBuckets-1)
}

// Encode runs the encoder over tokens and returns its output: one row of
// NEmbd values per token, after enc.output_norm.
func (m *T5) Encode(tokens []int32) ([][]float64, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("reference: empty encoder input")
	}
	if err := m.checkTokens(tokens); err != nil {
		return nil, err
	}
	n, d := len(tokens), m.NEmbd
	xs := make([][]float64, n)
	for i, t := range tokens {
		xs[i] = append([]float64(nil), m.tokEmbd[int(t)*d:(int(t)+1)*d]...)
	}
	for li := range m.enc {
		b := &m.enc[li]
		qs, ks, vs := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for i, x := range xs {
			a := rmsNorm(x, b.attnNorm, m.RMSEps)
			qs[i], ks[i], vs[i] = matVec(b.wq, a, d), matVec(b.wk, a, d), matVec(b.wv, a, d)
		}
		for i := range xs {
			o := m.attend(qs[i], ks, vs, func(j, h int) float64 {
				return m.encRelBias[RelativePositionBucket(j, i, m.NBuckets, true)*m.NHead+h]
			})
			addTo(xs[i], matVec(b.wo, o, d))
		}
		for _, x := range xs {
			addTo(x, m.ffn(b, x))
		}
	}
	for i, x := range xs {
		xs[i] = rmsNorm(x, m.encNorm, m.RMSEps)
	}
	return xs, nil
}

// attend returns softmax(q·k_j + bias(j, h)) · v_j per head over every j.
func (m *T5) attend(q []float64, keys, vals [][]float64, bias func(j, h int) float64) []float64 {
	hd := m.HeadDim
	o := make([]float64, m.NEmbd)
	scores := make([]float64, len(keys))
	for h := range m.NHead {
		qh := q[h*hd : (h+1)*hd]
		mx := math.Inf(-1)
		for j, k := range keys {
			dot := 0.0
			for i, v := range qh {
				dot += v * k[h*hd+i]
			}
			if bias != nil {
				dot += bias(j, h)
			}
			scores[j] = dot
			mx = max(mx, dot)
		}
		sum := 0.0
		for j := range scores {
			scores[j] = math.Exp(scores[j] - mx)
			sum += scores[j]
		}
		oh := o[h*hd : (h+1)*hd]
		for j, v := range vals {
			p := scores[j] / sum
			for i := range oh {
				oh[i] += p * v[h*hd+i]
			}
		}
	}
	return o
}

func (m *T5) ffn(b *t5Block, x []float64) []float64 {
	up := matVec(b.up, rmsNorm(x, b.ffnNorm, m.RMSEps), m.NFF)
	for i, v := range up {
		up[i] = max(v, 0)
	}
	return matVec(b.down, up, m.NEmbd)
}

func (m *T5) checkTokens(tokens []int32) error {
	for _, t := range tokens {
		if t < 0 || int(t) >= m.NVocab {
			return fmt.Errorf("%w: %d not in [0, %d)", ErrToken, t, m.NVocab)
		}
	}
	return nil
}

func addTo(x, y []float64) {
	for i := range x {
		x[i] += y[i]
	}
}

// T5Sequence is one decoder sequence: the cross-attention keys and values
// of its encoder output, which never change, and its self-attention cache.
type T5Sequence struct {
	m      *T5
	ck, cv [][][]float64 // per decoder block, per encoder position
	k, v   [][][]float64 // per decoder block, per decoded position
}

// NewDecoder returns an empty decoder sequence attending to encoder output
// enc (from Encode).
func (m *T5) NewDecoder(enc [][]float64) *T5Sequence {
	s := &T5Sequence{m: m, ck: make([][][]float64, len(m.dec)), cv: make([][][]float64, len(m.dec)),
		k: make([][][]float64, len(m.dec)), v: make([][][]float64, len(m.dec))}
	for li := range m.dec {
		b := &m.dec[li]
		for _, e := range enc {
			s.ck[li] = append(s.ck[li], matVec(b.ck, e, m.NEmbd))
			s.cv[li] = append(s.cv[li], matVec(b.cv, e, m.NEmbd))
		}
	}
	return s
}

// Len returns the number of decoded positions.
func (s *T5Sequence) Len() int { return len(s.k[0]) }

// Clone returns an independent copy sharing the (immutable) encoder side.
func (s *T5Sequence) Clone() *T5Sequence {
	c := &T5Sequence{m: s.m, ck: s.ck, cv: s.cv, k: make([][][]float64, len(s.k)), v: make([][][]float64, len(s.v))}
	for i := range s.k {
		c.k[i] = append([][]float64(nil), s.k[i]...)
		c.v[i] = append([][]float64(nil), s.v[i]...)
	}
	return c
}

// Truncate keeps the first n decoded positions.
func (s *T5Sequence) Truncate(n int) error {
	if n < 0 || n > s.Len() {
		return fmt.Errorf("reference: cannot truncate %d positions to %d", s.Len(), n)
	}
	for i := range s.k {
		s.k[i], s.v[i] = s.k[i][:n], s.v[i][:n]
	}
	return nil
}

// Eval appends tokens to the decoder sequence and returns their logits. On
// error the sequence is unchanged.
func (s *T5Sequence) Eval(tokens []int32) ([][]float64, error) {
	if err := s.m.checkTokens(tokens); err != nil {
		return nil, err
	}
	out := make([][]float64, len(tokens))
	for i, t := range tokens {
		out[i] = s.step(t)
	}
	return out, nil
}

func (s *T5Sequence) step(tok int32) []float64 {
	m := s.m
	d := m.NEmbd
	pos := s.Len()
	x := append([]float64(nil), m.tokEmbd[int(tok)*d:(int(tok)+1)*d]...)
	for li := range m.dec {
		b := &m.dec[li]
		a := rmsNorm(x, b.attnNorm, m.RMSEps)
		q := matVec(b.wq, a, d)
		s.k[li] = append(s.k[li], matVec(b.wk, a, d))
		s.v[li] = append(s.v[li], matVec(b.wv, a, d))
		o := m.attend(q, s.k[li], s.v[li], func(j, h int) float64 {
			return m.decRelBias[RelativePositionBucket(j, pos, m.NBuckets, false)*m.NHead+h]
		})
		addTo(x, matVec(b.wo, o, d))

		c := rmsNorm(x, b.crossNorm, m.RMSEps)
		addTo(x, matVec(b.co, m.attend(matVec(b.cq, c, d), s.ck[li], s.cv[li], nil), d))

		addTo(x, m.ffn(b, x))
	}
	return matVec(m.output, rmsNorm(x, m.decNorm, m.RMSEps), m.NVocab)
}
