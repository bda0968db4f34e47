package reference

import (
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// VisionProjector is a clip.cpp projector file (mmproj) of projector type
// "gemma3" or "qwen2vl_merger" (F32 or F16 weights, a SiLU tower
// feed-forward: clip.use_silu must be set), evaluated in float64 as
// clip.cpp's clip_graph_siglip and clip_graph_qwen2vl compute it:
//
//	image  : resized as clip.cpp does (gemma3: into ImageSize×ImageSize
//	         keeping the aspect ratio, centred on black; qwen2vl: to sides
//	         that are multiples of 2*PatchSize making 8 to 4096 merged
//	         tokens; bilinear, to whole bytes; see resize.go), then
//	         x[c][y][x] = (byte/255 - mean[c]) / std[c]
//	patch  : gemma3:  e[p] = Wpatch · x[:, py*P.., px*P..] + patch_bias + pos_embd[p],
//	                  p = py*(width/P) + px
//	         qwen2vl: e[t] = (Wpatch + Wpatch.1) · x[...], no bias, tokens in 2×2
//	                  blocks: t = 4*(by*(width/2P) + bx) + 2*dy + dx
//	block  : a  = LayerNorm(x)*ln1 + ln1_b
//	         q, k, v = Wq a + bq, ...; qwen2vl rotates q and k per head (below)
//	         x  = x + Wo softmax(q·k/sqrt(d_head)) v + bo   per head, all patches, no mask
//	         x  = x + Wdown silu(Wup (LayerNorm(x)*ln2 + ln2_b) + bup) + bdown
//	post   : x  = LayerNorm(x)*post_ln + post_ln_b
//	gemma3 : t[oy*n+ox] = mean of x over the MergeFactor×MergeFactor patches of (ox, oy)
//	         out = Wproj · (RMSNorm(t) * soft_emb_norm)
//	qwen2vl: out = W2 gelu(W0 concat(x[4t..4t+3]) + b0) + b2
//
// LayerNorm(x) = (x - mean(x)) / sqrt(var(x) + eps); gemma3's RMS norm uses
// the same eps (clip.cpp passes the tower's). Qwen2-VL's rotation (ggml's
// GGML_ROPE_TYPE_VISION with sections d/4 each): pair i < d/4 of a head of
// width d is (i, i+d/2) rotated by row*10000^(-4i/d), pair d/4 <= i < d/2 is
// (i, i+d/2) rotated by column*10000^(-4(i-d/4)/d). The merger's GELU is
// ggml's CPU GELU, which rounds its input to float16 and reads the float16
// result of the tanh approximation from a table; the reference does the
// same (so a float32 input near a float16 rounding boundary may land on the
// neighbouring entry: about 1e-3 relative on that one value).
type VisionProjector struct {
	// Type is clip.projector_type.
	Type                                                           string
	ImageSize, PatchSize, NEmbd, NHead, NFF, MergeFactor, TextEmbd int
	Eps                                                            float64
	Mean, Std                                                      [3]float64

	patchW, patchW1, patchB, posEmbd []float64
	mm0W, mm0B, mm2W, mm2B           []float64
	layers                           []visionLayer
	postW, postB                     []float64
	softNorm, proj                   []float64 // proj: [e][text] as stored
}

type visionLayer struct {
	ln1W, ln1B, wq, bq, wk, bk, wv, bv, wo, bo []float64
	ln2W, ln2B, up, upB, down, downB           []float64
}

// LoadVisionProjector reads a gemma3 or qwen2vl_merger mmproj file.
func LoadVisionProjector(path string) (*VisionProjector, error) {
	r, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	pt, err := gguf.Get[string](r.File, "clip.projector_type")
	if err != nil || (pt != "gemma3" && pt != "qwen2vl_merger") {
		return nil, fmt.Errorf("reference: clip.projector_type %q is not gemma3 or qwen2vl_merger (%v)", pt, err)
	}
	qwen := pt == "qwen2vl_merger"
	mergeKey := "clip.vision.projector.scale_factor"
	if qwen {
		mergeKey = "clip.vision.spatial_merge_size"
	}
	if silu, err := gguf.Get[bool](r.File, "clip.use_silu"); err != nil || !silu {
		return nil, fmt.Errorf("reference: only clip.use_silu feed-forwards are supported (%v)", err)
	}
	m := &VisionProjector{Type: pt, MergeFactor: 4}
	if qwen {
		m.MergeFactor = 2
	}
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
		{mergeKey, &m.MergeFactor},
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
		m.MergeFactor <= 0 || (m.ImageSize/m.PatchSize)%m.MergeFactor != 0 || nLayer <= 0 || m.NFF <= 0 ||
		(qwen && (m.MergeFactor != 2 || (m.NEmbd/m.NHead)%4 != 0)) {
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
	outName, outDim := "mm.input_projection.weight", 0
	if qwen {
		outName, outDim = "mm.2.weight", 1
	}
	proj, ok := r.Tensor(outName)
	if !ok || len(proj.Shape) != 2 {
		return nil, fmt.Errorf("reference: missing or malformed %s", outName)
	}
	m.TextEmbd = int(proj.Shape[outDim])
	e, f, p, n := m.NEmbd, m.NFF, m.PatchSize, (m.ImageSize/m.PatchSize)*(m.ImageSize/m.PatchSize)
	reqs := []tensorReq{
		{&m.patchW, "v.patch_embd.weight", false, []int{p, p, 3, e}},
		{&m.postW, "v.post_ln.weight", false, []int{e}},
		{&m.postB, "v.post_ln.bias", false, []int{e}},
	}
	if qwen {
		mff := int(proj.Shape[0])
		reqs = append(reqs,
			tensorReq{&m.patchW1, "v.patch_embd.weight.1", false, []int{p, p, 3, e}},
			tensorReq{&m.mm0W, "mm.0.weight", false, []int{4 * e, mff}},
			tensorReq{&m.mm0B, "mm.0.bias", false, []int{mff}},
			tensorReq{&m.mm2W, "mm.2.weight", false, []int{mff, m.TextEmbd}},
			tensorReq{&m.mm2B, "mm.2.bias", false, []int{m.TextEmbd}},
		)
	} else {
		reqs = append(reqs,
			tensorReq{&m.patchB, "v.patch_embd.bias", false, []int{e}},
			tensorReq{&m.posEmbd, "v.position_embd.weight", false, []int{e, n}},
			tensorReq{&m.softNorm, "mm.soft_emb_norm.weight", false, []int{e}},
			tensorReq{&m.proj, "mm.input_projection.weight", false, []int{m.TextEmbd, e}},
		)
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

// NTokens returns the number of embeddings a width×height image becomes
// (0 for an empty size).
func (m *VisionProjector) NTokens(width, height int) int {
	if width <= 0 || height <= 0 {
		return 0
	}
	if m.Type == "qwen2vl_merger" {
		w, h := smartResize(width, height, 2*m.PatchSize, 8*4*m.PatchSize*m.PatchSize, 4096*4*m.PatchSize*m.PatchSize)
		return w * h / (4 * m.PatchSize * m.PatchSize)
	}
	n := m.ImageSize / m.PatchSize / m.MergeFactor
	return n * n
}

// Pixels turns interleaved RGB bytes of a width×height image into the
// normalised planar input [channel][y][x] clip.cpp encodes, after
// resizing it as clip.cpp does (prepare), and returns its size.
func (m *VisionProjector) Pixels(rgb []byte, width, height int) (px []float64, w, h int, err error) {
	if width <= 0 || height <= 0 || width > 1<<14 || height > 1<<14 || len(rgb) != 3*width*height {
		return nil, 0, 0, fmt.Errorf("reference: %d bytes for a %dx%d RGB image (sides 1 to 16384)", len(rgb), width, height)
	}
	rgb, w, h = m.prepare(rgb, width, height)
	n := w * h
	out := make([]float64, 3*n)
	for i := range n {
		for c := range 3 {
			// clip.cpp computes in float32: byte/255.0f - mean, then / std.
			v := (float32(rgb[3*i+c])/255 - float32(m.Mean[c])) / float32(m.Std[c])
			out[c*n+i] = float64(v)
		}
	}
	return out, w, h, nil
}

// EmbedImage returns the projector's embeddings of an RGB image
// (interleaved bytes, rows top to bottom): NTokens(width, height) rows of
// TextEmbd values, in the order clip.cpp emits them.
func (m *VisionProjector) EmbedImage(rgb []byte, width, height int) ([][]float64, error) {
	px, w, h, err := m.Pixels(rgb, width, height)
	if err != nil {
		return nil, err
	}
	x, pos := m.patchEmbeddings(px, w, h)
	for i := range m.layers {
		x = encoderBlock(&m.layers[i], x, m.NHead, m.Eps, pos, silu)
	}
	for _, row := range x {
		layerNorm(row, m.postW, m.postB, m.Eps)
	}
	if m.Type == "qwen2vl_merger" {
		return m.merger(x), nil
	}
	return m.gemma3(x), nil
}

// patchEmbeddings returns the patches' embeddings in clip.cpp's token
// order and, for Qwen2-VL, each token's (row, column) in patches.
func (m *VisionProjector) patchEmbeddings(px []float64, width, height int) ([][]float64, [][2]int) {
	P, e := m.PatchSize, m.NEmbd
	pw, ph := width/P, height/P
	conv := func(w []float64, o, py, pxi int) float64 {
		s := 0.0
		for c := range 3 {
			for ky := range P {
				for kx := range P {
					s += w[((o*3+c)*P+ky)*P+kx] * px[(c*height+py*P+ky)*width+pxi*P+kx]
				}
			}
		}
		return s
	}
	out := make([][]float64, pw*ph)
	if m.Type == "qwen2vl_merger" {
		pos := make([][2]int, pw*ph)
		t := 0
		for by := 0; by < ph; by += 2 {
			for bx := 0; bx < pw; bx += 2 {
				for dy := range 2 {
					for dx := range 2 {
						row := make([]float64, e)
						for o := range e {
							row[o] = conv(m.patchW, o, by+dy, bx+dx) + conv(m.patchW1, o, by+dy, bx+dx)
						}
						out[t], pos[t] = row, [2]int{by + dy, bx + dx}
						t++
					}
				}
			}
		}
		return out, pos
	}
	for py := range ph {
		for pxi := range pw {
			p := py*pw + pxi
			row := make([]float64, e)
			for o := range e {
				row[o] = conv(m.patchW, o, py, pxi) + m.patchB[o] + m.posEmbd[p*e+o]
			}
			out[p] = row
		}
	}
	return out, nil
}

// rotate applies Qwen2-VL's vision M-RoPE to one head's vector v (width d)
// at patch (row, col).
func rotate(v []float64, row, col int) {
	d := len(v)
	q := d / 4
	for i := range d / 2 {
		p, k := row, i
		if i >= q {
			p, k = col, i-q
		}
		theta := float64(p) * math.Pow(10000, -4*float64(k)/float64(d))
		c, s := math.Cos(theta), math.Sin(theta)
		x0, x1 := v[i], v[i+d/2]
		v[i], v[i+d/2] = x0*c-x1*s, x0*s+x1*c
	}
}

// merger is Qwen2-VL's: each 2×2 block of patches, concatenated, through
// mm.0, GELU (ggml's f16 table) and mm.2.
func (m *VisionProjector) merger(x [][]float64) [][]float64 {
	e := m.NEmbd
	out := make([][]float64, len(x)/4)
	in := make([]float64, 4*e)
	for t := range out {
		for j := range 4 {
			copy(in[j*e:], x[4*t+j])
		}
		h := affine(m.mm0W, m.mm0B, in, len(m.mm0B))
		for i, z := range h {
			h[i] = ggmlGELU(z)
		}
		out[t] = affine(m.mm2W, m.mm2B, h, m.TextEmbd)
	}
	return out
}

// ggmlGELU is ggml's CPU GELU on a float32 input: 0 below -10, the input
// above 10, otherwise the float16 table entry of the input rounded to
// float16, which holds the tanh approximation rounded to float16.
func ggmlGELU(x float64) float64 {
	f := float32(x)
	switch {
	case f <= -10:
		return 0
	case f >= 10:
		return float64(f)
	}
	h := roundF16(float64(f))
	g := 0.5 * h * (1 + math.Tanh(math.Sqrt(2/math.Pi)*h*(1+0.044715*h*h)))
	return roundF16(g)
}

// encoderBlock is clip.cpp's build_vit block: pre-norm attention over all
// positions, then a pre-norm feed-forward with activation act; pos, when
// not nil, gives Qwen2-VL's rotary positions.
func encoderBlock(l *visionLayer, x [][]float64, nh int, eps float64, pos [][2]int, act func(float64) float64) [][]float64 {
	e := len(x[0])
	dh := e / nh
	n := len(x)
	q, k, v := make([][]float64, n), make([][]float64, n), make([][]float64, n)
	for i, row := range x {
		a := append([]float64(nil), row...)
		layerNorm(a, l.ln1W, l.ln1B, eps)
		q[i], k[i], v[i] = affine(l.wq, l.bq, a, e), affine(l.wk, l.bk, a, e), affine(l.wv, l.bv, a, e)
		if pos != nil {
			for h := range nh {
				rotate(q[i][h*dh:(h+1)*dh], pos[i][0], pos[i][1])
				rotate(k[i][h*dh:(h+1)*dh], pos[i][0], pos[i][1])
			}
		}
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
		layerNorm(f, l.ln2W, l.ln2B, eps)
		u := affine(l.up, l.upB, f, len(l.upB))
		for j, z := range u {
			u[j] = act(z)
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

func silu(z float64) float64 { return z / (1 + math.Exp(-z)) }

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
