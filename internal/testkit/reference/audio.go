package reference

import (
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// AudioProjector is a clip.cpp audio projector file (mmproj) of projector
// type "qwen2a" (Whisper encoder + Qwen2-Audio projector), evaluated in
// float64 from a log-mel chunk as clip.cpp's clip_graph_whisper_enc
// computes it:
//
//	mel    : NMel rows of nFrames values (mtmd: 3000 frames per chunk)
//	conv   : h = gelu_erf(conv1d(mel, W1, stride 1, pad 1) + b1)
//	         h = gelu_erf(conv1d(h, W2, stride 2, pad 1) + b2)      nFrames/2 positions
//	         both convolutions round their input and kernel to float16, as
//	         ggml's F16 im2col does
//	x      = h + pos_embd[:nFrames/2]
//	block  : x = x + Wo softmax(q·k/sqrt(d_head)) v + bo, q = Wq a + bq, k = Wk a, v = Wv a + bv,
//	         a = LayerNorm(x)*ln1 + ln1_b
//	         x = x + Wdown gelu_erf(Wup (LayerNorm(x)*ln2 + ln2_b) + bup) + bdown
//	pool   : x[t] = (x[2t] + x[2t+1]) / 2
//	post   : x = LayerNorm(x)*post_ln + post_ln_b
//	out    = Wfc x + bfc
//
// gelu_erf(z) = z/2 (1 + erf(z/sqrt(2))). A conv input that float32 puts on
// the other side of a float16 rounding boundary than float64 lands on the
// neighbouring float16 value (one float16 step, about 1e-3 relative, on
// that one input).
type AudioProjector struct {
	NMel, NEmbd, NHead, NFF, NPos, TextEmbd int
	Eps                                     float64

	conv1W, conv1B, conv2W, conv2B, posEmbd []float64
	layers                                  []visionLayer
	postW, postB, fcW, fcB                  []float64
}

// LoadAudioProjector reads a qwen2a mmproj file.
func LoadAudioProjector(path string) (*AudioProjector, error) {
	r, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if pt, err := gguf.Get[string](r.File, "clip.projector_type"); err != nil || pt != "qwen2a" {
		return nil, fmt.Errorf("reference: clip.projector_type %q is not qwen2a (%v)", pt, err)
	}
	m := &AudioProjector{}
	var nLayer int
	for _, kv := range []struct {
		key string
		dst *int
	}{
		{"clip.audio.num_mel_bins", &m.NMel},
		{"clip.audio.embedding_length", &m.NEmbd},
		{"clip.audio.attention.head_count", &m.NHead},
		{"clip.audio.feed_forward_length", &m.NFF},
		{"clip.audio.block_count", &nLayer},
	} {
		v, err := gguf.Get[uint32](r.File, kv.key)
		if err != nil {
			return nil, err
		}
		*kv.dst = int(v)
	}
	if m.NMel <= 0 || m.NHead <= 0 || m.NEmbd <= 0 || m.NEmbd%m.NHead != 0 || nLayer <= 0 || m.NFF <= 0 {
		return nil, fmt.Errorf("reference: inconsistent audio hyperparameters")
	}
	eps, err := gguf.Get[float32](r.File, "clip.audio.attention.layer_norm_epsilon")
	if err != nil {
		return nil, err
	}
	m.Eps = float64(eps)
	pos, ok1 := r.Tensor("a.position_embd.weight")
	fc, ok2 := r.Tensor("mm.a.fc.weight")
	if !ok1 || !ok2 || len(pos.Shape) != 2 || len(fc.Shape) != 2 {
		return nil, fmt.Errorf("reference: missing or malformed a.position_embd.weight or mm.a.fc.weight")
	}
	m.NPos, m.TextEmbd = int(pos.Shape[1]), int(fc.Shape[1])
	e, f := m.NEmbd, m.NFF
	reqs := []tensorReq{
		{&m.conv1W, "a.conv1d.1.weight", false, []int{3, m.NMel, e}},
		{&m.conv1B, "a.conv1d.1.bias", false, []int{1, e}},
		{&m.conv2W, "a.conv1d.2.weight", false, []int{3, e, e}},
		{&m.conv2B, "a.conv1d.2.bias", false, []int{1, e}},
		{&m.posEmbd, "a.position_embd.weight", false, []int{e, m.NPos}},
		{&m.postW, "a.post_ln.weight", false, []int{e}},
		{&m.postB, "a.post_ln.bias", false, []int{e}},
		{&m.fcW, "mm.a.fc.weight", false, []int{e, m.TextEmbd}},
		{&m.fcB, "mm.a.fc.bias", false, []int{m.TextEmbd}},
	}
	m.layers = make([]visionLayer, nLayer)
	for i := range m.layers {
		l, b := &m.layers[i], fmt.Sprintf("a.blk.%d.", i)
		reqs = append(reqs,
			tensorReq{&l.ln1W, b + "ln1.weight", false, []int{e}},
			tensorReq{&l.ln1B, b + "ln1.bias", false, []int{e}},
			tensorReq{&l.wq, b + "attn_q.weight", false, []int{e, e}},
			tensorReq{&l.bq, b + "attn_q.bias", false, []int{e}},
			tensorReq{&l.wk, b + "attn_k.weight", false, []int{e, e}},
			tensorReq{&l.wv, b + "attn_v.weight", false, []int{e, e}},
			tensorReq{&l.bv, b + "attn_v.bias", false, []int{e}},
			tensorReq{&l.wo, b + "attn_out.weight", false, []int{e, e}},
			tensorReq{&l.bo, b + "attn_out.bias", false, []int{e}},
			tensorReq{&l.ln2W, b + "ln2.weight", false, []int{e}},
			tensorReq{&l.ln2B, b + "ln2.bias", false, []int{e}},
			tensorReq{&l.up, b + "ffn_up.weight", false, []int{e, f}},
			tensorReq{&l.upB, b + "ffn_up.bias", false, []int{f}},
			tensorReq{&l.down, b + "ffn_down.weight", false, []int{f, e}},
			tensorReq{&l.downB, b + "ffn_down.bias", false, []int{e}},
		)
	}
	if err := loadTensors(r, reqs, "key biases, gates and stacking projectors"); err != nil {
		return nil, err
	}
	// ggml's convolution multiplies float16 copies of the kernels
	for _, w := range [][]float64{m.conv1W, m.conv2W} {
		for i, v := range w {
			w[i] = roundF16(v)
		}
	}
	return m, nil
}

// NTokens returns the number of embeddings a chunk of nFrames mel frames
// becomes: 750 for mtmd's 3000-frame chunks.
func (m *AudioProjector) NTokens(nFrames int) int { return nFrames / 4 }

// EmbedMel returns the projector's embeddings of one log-mel chunk: mel
// holds NMel rows of nFrames values (row i is mel bin i over time, as
// mtmd's mtmd_audio_mel stores it); nFrames must be a positive multiple of
// 4 with nFrames/2 <= NPos. The result has NTokens(nFrames) rows of
// TextEmbd values.
func (m *AudioProjector) EmbedMel(mel []float32, nFrames int) ([][]float64, error) {
	if nFrames <= 0 || nFrames%4 != 0 || nFrames/2 > m.NPos || len(mel) != m.NMel*nFrames {
		return nil, fmt.Errorf("reference: mel of %d values for %d bins x %d frames (frames: a multiple of 4, at most %d)",
			len(mel), m.NMel, nFrames, 2*m.NPos)
	}
	in := make([][]float64, m.NMel)
	for c := range in {
		in[c] = make([]float64, nFrames)
		for t := range nFrames {
			in[c][t] = float64(mel[c*nFrames+t])
		}
	}
	h := conv1d(in, m.conv1W, m.conv1B, m.NEmbd, 1)
	h = conv1d(h, m.conv2W, m.conv2B, m.NEmbd, 2)
	n, e := len(h[0]), m.NEmbd
	x := make([][]float64, n)
	for t := range n {
		x[t] = make([]float64, e)
		for d := range e {
			x[t][d] = h[d][t] + m.posEmbd[t*e+d]
		}
	}
	for i := range m.layers {
		x = encoderBlock(&m.layers[i], x, m.NHead, m.Eps, nil, geluErf)
	}
	out := make([][]float64, n/2)
	for t := range out {
		p := make([]float64, e)
		for d := range e {
			p[d] = (x[2*t][d] + x[2*t+1][d]) / 2
		}
		layerNorm(p, m.postW, m.postB, m.Eps)
		out[t] = affine(m.fcW, m.fcB, p, m.TextEmbd)
	}
	return out, nil
}

// conv1d is ggml_conv_1d_ph with a kernel of width 3 (padding 1) followed
// by the bias and gelu_erf: in is [channel][time], w is ggml's [3, in, out]
// (flat (o*in + c)*3 + k), the result [out][time/stride]. Inputs are
// rounded to float16 as ggml's im2col does.
func conv1d(in [][]float64, w, b []float64, nOut, stride int) [][]float64 {
	nIn, L := len(in), len(in[0])
	r := make([][]float64, nIn)
	for c := range in {
		r[c] = make([]float64, L)
		for t, v := range in[c] {
			r[c][t] = roundF16(v)
		}
	}
	ol := (L-1)/stride + 1
	out := make([][]float64, nOut)
	for o := range nOut {
		out[o] = make([]float64, ol)
		for t := range ol {
			s := 0.0
			for c := range nIn {
				wk := w[(o*nIn+c)*3 : (o*nIn+c)*3+3]
				for k := range 3 {
					if i := t*stride + k - 1; i >= 0 && i < L {
						s += wk[k] * r[c][i]
					}
				}
			}
			out[o][t] = geluErf(s + b[o])
		}
	}
	return out
}

func geluErf(z float64) float64 { return 0.5 * z * (1 + math.Erf(z/math.Sqrt2)) }

// roundF16 rounds v to float32, then to the nearest float16.
func roundF16(v float64) float64 {
	return float64(gguf.Float16ToFloat32(gguf.Float32ToFloat16(float32(v))))
}
