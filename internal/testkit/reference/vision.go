package reference

import (
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// VisionProjector is a clip.cpp projector file (mmproj) of projector type
// "gemma3" over a SigLIP-style vision tower (F32 or F16 weights, a SiLU
// feed-forward: clip.use_silu must be set), evaluated in float64
// as clip.cpp's clip_graph_siglip computes it:
//
//	image  : exactly ImageSize×ImageSize RGB bytes (clip.cpp copies such an
//	         image unresized); x[c][y][x] = (byte/255 - mean[c]) / std[c]
//	patch  : e[p] = Wpatch · x[:, py*P.., px*P..] + patch_bias + pos_embd[p]
//	         p = py*(ImageSize/P) + px
//	block  : a  = LayerNorm(x)*ln1 + ln1_b
//	         x  = x + Wo softmax(q·k/sqrt(d_head)) v + bo   per head, all patches, no mask
//	         x  = x + Wdown silu(Wup (LayerNorm(x)*ln2 + ln2_b) + bup) + bdown
//	post   : x  = LayerNorm(x)*post_ln + post_ln_b
//	gemma3 : t[oy*n+ox] = mean of x over the MergeFactor×MergeFactor patches of (ox, oy)
//	         out = Wproj · (RMSNorm(t) * soft_emb_norm)
//
// LayerNorm(x) = (x - mean(x)) / sqrt(var(x) + eps); the RMS norm uses the
// same eps (clip.cpp passes the tower's).
type VisionProjector struct {
	ImageSize, PatchSize, NEmbd, NHead, NFF, MergeFactor, TextEmbd int
	Eps                                                            float64
	Mean, Std                                                      [3]float64

	patchW, patchB, posEmbd []float64
	layers                  []visionLayer
	postW, postB            []float64
	softNorm, proj          []float64 // proj: [e][text] as stored
}

type visionLayer struct {
	ln1W, ln1B, wq, bq, wk, bk, wv, bv, wo, bo []float64
	ln2W, ln2B, up, upB, down, downB           []float64
}

// LoadVisionProjector reads a gemma3 mmproj file.
func LoadVisionProjector(path string) (*VisionProjector, error) {
	r, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if pt, err := gguf.Get[string](r.File, "clip.projector_type"); err != nil || pt != "gemma3" {
		return nil, fmt.Errorf("reference: clip.projector_type %q is not gemma3 (%v)", pt, err)
	}
	if silu, err := gguf.Get[bool](r.File, "clip.use_silu"); err != nil || !silu {
		return nil, fmt.Errorf("reference: only clip.use_silu feed-forwards are supported (%v)", err)
	}
	m := &VisionProjector{MergeFactor: 4}
	var nLayer int
	for _, kv := range []struct {
		key string
		dst *int
	}{
		{"clip.vision.image_size", &m.ImageSize},
		{"clip.vision.patch_size", &m.PatchSize},
		{"clip.vision.embedding_length", &m.NEmbd},
		{"clip.vision.attention.head_count", &m.NHead},
		{"clip.vision.feed_forward_length", &m.NFF},
		{"clip.vision.block_count", &nLayer},
		{"clip.vision.projector.scale_factor", &m.MergeFactor},
	} {
		if _, ok := r.Lookup(kv.key); !ok && kv.dst == &m.MergeFactor {
			continue
		}
		v, err := gguf.Get[uint32](r.File, kv.key)
		if err != nil {
			return nil, err
		}
		*kv.dst = int(v)
	}
	if m.ImageSize <= 0 || m.PatchSize <= 0 || m.ImageSize%m.PatchSize != 0 || m.NHead <= 0 || m.NEmbd%m.NHead != 0 ||
		m.MergeFactor <= 0 || (m.ImageSize/m.PatchSize)%m.MergeFactor != 0 || nLayer <= 0 || m.NFF <= 0 {
		return nil, fmt.Errorf("reference: inconsistent vision hyperparameters")
	}
	eps, err := gguf.Get[float32](r.File, "clip.vision.attention.layer_norm_epsilon")
	if err != nil {
		return nil, err
	}
	m.Eps = float64(eps)
	for i, key := range []string{"clip.vision.image_mean", "clip.vision.image_std"} {
		v, err := gguf.Get[[]float32](r.File, key)
		if err != nil {
			return nil, err
		}
		if len(v) != 3 {
			return nil, fmt.Errorf("reference: %s has %d values, want 3", key, len(v))
		}
		for c := range 3 {
			if i == 0 {
				m.Mean[c] = float64(v[c])
			} else {
				m.Std[c] = float64(v[c])
			}
		}
	}
	proj, ok := r.Tensor("mm.input_projection.weight")
	if !ok || len(proj.Shape) != 2 {
		return nil, fmt.Errorf("reference: missing or malformed mm.input_projection.weight")
	}
	m.TextEmbd = int(proj.Shape[0])
	e, f, p, n := m.NEmbd, m.NFF, m.PatchSize, (m.ImageSize/m.PatchSize)*(m.ImageSize/m.PatchSize)
	reqs := []tensorReq{
		{&m.patchW, "v.patch_embd.weight", false, []int{p, p, 3, e}},
		{&m.patchB, "v.patch_embd.bias", false, []int{e}},
		{&m.posEmbd, "v.position_embd.weight", false, []int{e, n}},
		{&m.postW, "v.post_ln.weight", false, []int{e}},
		{&m.postB, "v.post_ln.bias", false, []int{e}},
		{&m.softNorm, "mm.soft_emb_norm.weight", false, []int{e}},
		{&m.proj, "mm.input_projection.weight", false, []int{m.TextEmbd, e}},
	}
	m.layers = make([]visionLayer, nLayer)
	for i := range m.layers {
		l, b := &m.layers[i], fmt.Sprintf("v.blk.%d.", i)
		reqs = append(reqs,
			tensorReq{&l.ln1W, b + "ln1.weight", false, []int{e}},
			tensorReq{&l.ln1B, b + "ln1.bias", false, []int{e}},
			tensorReq{&l.wq, b + "attn_q.weight", false, []int{e, e}},
			tensorReq{&l.bq, b + "attn_q.bias", false, []int{e}},
			tensorReq{&l.wk, b + "attn_k.weight", false, []int{e, e}},
			tensorReq{&l.bk, b + "attn_k.bias", false, []int{e}},
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
	if err := loadTensors(r, reqs, "pre-norms, gates, class embeddings and fused QKV"); err != nil {
		return nil, err
	}
	return m, nil
}

// NTokens returns the number of embeddings one image becomes.
func (m *VisionProjector) NTokens() int {
	n := m.ImageSize / m.PatchSize / m.MergeFactor
	return n * n
}

// Pixels turns interleaved RGB bytes of an ImageSize×ImageSize image into
// clip.cpp's normalised planar input [channel][y][x]. Other sizes are
// refused: clip.cpp would resize them bilinearly first, which the reference
// does not reproduce.
func (m *VisionProjector) Pixels(rgb []byte, width, height int) ([]float64, error) {
	if width != m.ImageSize || height != m.ImageSize || len(rgb) != 3*width*height {
		return nil, fmt.Errorf("reference: image %dx%d with %d bytes; the reference takes %dx%d RGB only",
			width, height, len(rgb), m.ImageSize, m.ImageSize)
	}
	n := width * height
	out := make([]float64, 3*n)
	for i := range n {
		for c := range 3 {
			// clip.cpp computes in float32: byte/255.0f - mean, then / std.
			v := (float32(rgb[3*i+c])/255 - float32(m.Mean[c])) / float32(m.Std[c])
			out[c*n+i] = float64(v)
		}
	}
	return out, nil
}

// EmbedImage returns the projector's embeddings of an ImageSize×ImageSize
// RGB image (interleaved bytes, rows top to bottom): NTokens rows of
// TextEmbd values, in the order clip.cpp emits them (row-major over the
// pooled grid).
func (m *VisionProjector) EmbedImage(rgb []byte, width, height int) ([][]float64, error) {
	px, err := m.Pixels(rgb, width, height)
	if err != nil {
		return nil, err
	}
	x := m.patchEmbeddings(px)
	for i := range m.layers {
		x = m.block(&m.layers[i], x)
	}
	for _, row := range x {
		layerNorm(row, m.postW, m.postB, m.Eps)
	}
	return m.gemma3(x), nil
}

func (m *VisionProjector) patchEmbeddings(px []float64) [][]float64 {
	P, side, e := m.PatchSize, m.ImageSize/m.PatchSize, m.NEmbd
	out := make([][]float64, side*side)
	for py := range side {
		for pxi := range side {
			p := py*side + pxi
			row := make([]float64, e)
			for o := range e {
				s := 0.0
				for c := range 3 {
					for ky := range P {
						for kx := range P {
							w := m.patchW[((o*3+c)*P+ky)*P+kx]
							s += w * px[(c*m.ImageSize+py*P+ky)*m.ImageSize+pxi*P+kx]
						}
					}
				}
				row[o] = s + m.patchB[o] + m.posEmbd[p*e+o]
			}
			out[p] = row
		}
	}
	return out
}

func (m *VisionProjector) block(l *visionLayer, x [][]float64) [][]float64 {
	e, nh := m.NEmbd, m.NHead
	dh := e / nh
	n := len(x)
	q, k, v := make([][]float64, n), make([][]float64, n), make([][]float64, n)
	for i, row := range x {
		a := append([]float64(nil), row...)
		layerNorm(a, l.ln1W, l.ln1B, m.Eps)
		q[i], k[i], v[i] = affine(l.wq, l.bq, a, e), affine(l.wk, l.bk, a, e), affine(l.wv, l.bv, a, e)
	}
	scale := 1 / math.Sqrt(float64(dh))
	out := make([][]float64, n)
	scores := make([]float64, n)
	for i := range n {
		o := make([]float64, e)
		for h := range nh {
			hs := h * dh
			mx := math.Inf(-1)
			for j := range n {
				s := 0.0
				for d := range dh {
					s += q[i][hs+d] * k[j][hs+d]
				}
				scores[j] = s * scale
				mx = max(mx, scores[j])
			}
			sum := 0.0
			for j := range n {
				scores[j] = math.Exp(scores[j] - mx)
				sum += scores[j]
			}
			for j := range n {
				w := scores[j] / sum
				for d := range dh {
					o[hs+d] += w * v[j][hs+d]
				}
			}
		}
		att := affine(l.wo, l.bo, o, e)
		r := make([]float64, e)
		for d := range e {
			r[d] = x[i][d] + att[d]
		}
		f := append([]float64(nil), r...)
		layerNorm(f, l.ln2W, l.ln2B, m.Eps)
		u := affine(l.up, l.upB, f, m.NFF)
		for j, z := range u {
			u[j] = z / (1 + math.Exp(-z))
		}
		dn := affine(l.down, l.downB, u, e)
		for d := range e {
			r[d] += dn[d]
		}
		out[i] = r
	}
	return out
}

// gemma3 pools MergeFactor×MergeFactor patches, RMS-normalises and
// projects to the text width.
func (m *VisionProjector) gemma3(x [][]float64) [][]float64 {
	side, k, e := m.ImageSize/m.PatchSize, m.MergeFactor, m.NEmbd
	n := side / k
	out := make([][]float64, n*n)
	for oy := range n {
		for ox := range n {
			t := make([]float64, e)
			for dy := range k {
				for dx := range k {
					row := x[(oy*k+dy)*side+ox*k+dx]
					for d := range e {
						t[d] += row[d]
					}
				}
			}
			ss := 0.0
			for d := range e {
				t[d] /= float64(k * k)
				ss += t[d] * t[d]
			}
			inv := 1 / math.Sqrt(ss/float64(e)+m.Eps)
			for d := range e {
				t[d] *= inv * m.softNorm[d]
			}
			o := make([]float64, m.TextEmbd)
			for d := range e {
				for j := range m.TextEmbd {
					o[j] += m.proj[d*m.TextEmbd+j] * t[d]
				}
			}
			out[oy*n+ox] = o
		}
	}
	return out
}

// affine returns W x + b for W stored row-major [out][in] (ggml's [in, out]).
func affine(w, b, x []float64, out int) []float64 {
	in := len(x)
	y := make([]float64, out)
	for o := range out {
		s := 0.0
		row := w[o*in : (o+1)*in]
		for i, v := range x {
			s += row[i] * v
		}
		if b != nil {
			s += b[o]
		}
		y[o] = s
	}
	return y
}

// layerNorm normalises x in place to zero mean and unit variance, then
// scales by w and shifts by b.
func layerNorm(x, w, b []float64, eps float64) {
	mean := 0.0
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	variance := 0.0
	for _, v := range x {
		variance += (v - mean) * (v - mean)
	}
	variance /= float64(len(x))
	inv := 1 / math.Sqrt(variance+eps)
	for i, v := range x {
		x[i] = (v-mean)*inv*w[i] + b[i]
	}
}
