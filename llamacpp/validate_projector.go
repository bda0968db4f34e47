package llamacpp

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
)

// clipKeyTypes are the GGUF types clip.cpp reads its keys as: gguf_get_val_*
// asserts the type (an abort, not an error), so a key of another type is
// refused here. Keys with %s take "vision" and "audio".
var clipKeyTypes = map[string]string{
	"clip.projector_type":                  "string",
	"clip.vision.projector_type":           "string",
	"clip.audio.projector_type":            "string",
	"clip.has_vision_encoder":              "bool",
	"clip.has_audio_encoder":               "bool",
	"clip.use_gelu":                        "bool",
	"clip.use_silu":                        "bool",
	"clip.%s.embedding_length":             "u32",
	"clip.%s.feed_forward_length":          "u32",
	"clip.%s.block_count":                  "u32",
	"clip.%s.projection_dim":               "u32",
	"clip.%s.attention.head_count":         "u32",
	"clip.%s.attention.layer_norm_epsilon": "f32",
	"clip.vision.image_size":               "u32",
	"clip.vision.preproc_image_size":       "u32",
	"clip.vision.patch_size":               "u32",
	"clip.vision.image_crop_resolution":    "u32",
	"clip.vision.projector.scale_factor":   "u32",
	"clip.vision.spatial_merge_size":       "u32",
	"clip.vision.n_wa_pattern":             "u32",
	"clip.vision.window_size":              "u32",
	"clip.minicpmv_version":                "i32",
	"clip.minicpmv_query_num":              "u32",
	"clip.audio.num_mel_bins":              "u32",
	"clip.audio.projector.stack_factor":    "u32",
	"clip.vision.image_mean":               "[]f32",
	"clip.vision.image_std":                "[]f32",
	"clip.vision.image_grid_pinpoints":     "[]i32",
	"clip.vision.feature_layer":            "[]i32",
}

// Bounds on a projector's hyperparameters, far above any released model's.
const (
	maxClipLayers    = 256
	maxClipEmbd      = 1 << 16
	maxClipImageSize = 1 << 14
	maxClipMelBins   = 1024
)

// validateProjector checks the projector GGUF at path before clip.cpp
// reads it: a readable GGUF (the header parse of LoadModel: magic, version,
// counts, key and tensor records within the file, tensor data inside it),
// architecture "clip", no tensor with a zero dimension or a non-weight
// type, every key clip.cpp reads of the type it reads it as, a vision or an
// audio encoder, and for each encoder its embedding width, heads (dividing
// the width), feed-forward width, block count, epsilon (positive, finite)
// and, for vision, image and patch size (the patch dividing the image), for
// audio the mel bins, within the bounds above.
func validateProjector(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProjector, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProjector, err)
	}
	file, err := readHeader(f, st, path)
	if err != nil {
		return projectorError(err)
	}
	v := validator{f: file, ts: file.Tensors, size: st.Size()}
	v.tensors()
	v.clip()
	if v.err != "" {
		return fmt.Errorf("%w %s: %s", ErrProjector, path, v.err)
	}
	return nil
}

// projectorError restates a model-file error (ErrLoad, naming the path)
// as a projector one.
func projectorError(err error) error {
	return fmt.Errorf("%w %s", ErrProjector, strings.TrimPrefix(err.Error(), ErrLoad.Error()+" "))
}

func gtype(x any) string {
	switch x.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	case uint32:
		return "u32"
	case int32:
		return "i32"
	case float32:
		return "f32"
	case []float32:
		return "[]f32"
	case []int32:
		return "[]i32"
	}
	return describe(x)
}

// clip checks the keys clip.cpp reads (see validateProjector).
func (v *validator) clip() {
	if arch, _ := v.f.Lookup("general.architecture"); arch != "clip" {
		v.failf("general.architecture is %v, want \"clip\" (a projector file)", arch)
		return
	}
	for key, want := range clipKeyTypes {
		for _, m := range []string{"vision", "audio"} {
			k := key
			if strings.Contains(key, "%s") {
				k = fmt.Sprintf(key, m)
			}
			if x, ok := v.f.Lookup(k); ok && gtype(x) != want {
				v.failf("%s: is %s, want %s", k, describe(x), want)
				return
			}
		}
	}
	vision, _ := v.f.Lookup("clip.has_vision_encoder")
	audio, _ := v.f.Lookup("clip.has_audio_encoder")
	if vision != true && audio != true {
		v.failf("neither clip.has_vision_encoder nor clip.has_audio_encoder is true")
		return
	}
	for _, m := range []string{"vision", "audio"} {
		if (m == "vision" && vision != true) || (m == "audio" && audio != true) {
			continue
		}
		embd := v.clipUint(m, "embedding_length", 1, maxClipEmbd)
		heads := v.clipUint(m, "attention.head_count", 1, maxClipEmbd)
		if v.err != "" {
			return
		}
		if embd%heads != 0 {
			v.failf("clip.%s.embedding_length %d is not a multiple of clip.%s.attention.head_count %d", m, embd, m, heads)
			return
		}
		eps, ok := v.float("clip." + m + ".attention.layer_norm_epsilon")
		if !ok || !(eps > 0) || math.IsInf(eps, 0) {
			v.failf("clip.%s.attention.layer_norm_epsilon: is %v, want a positive f32", m, v.raw("clip."+m+".attention.layer_norm_epsilon"))
			return
		}
		ptype := v.projectorType(m)
		check, ok := projectorTypes[ptype]
		if !ok {
			v.failf("%s projector type %q is not one llamaloop validates (%s): clip.cpp dereferences the tensors each type needs without checking them", m, ptype, validatedTypes())
			return
		}
		d := clipDims{embd: embd, heads: heads, ff: v.clipUint(m, "feed_forward_length", 1, 1<<20), layers: v.clipUint(m, "block_count", 1, maxClipLayers)}
		d.proj, _ = v.uint("clip." + m + ".projection_dim")
		if m == "vision" {
			size := v.clipUint(m, "image_size", 1, maxClipImageSize)
			d.patch = v.clipUint(m, "patch_size", 1, maxClipImageSize)
			if v.err == "" && size%d.patch != 0 {
				v.failf("clip.vision.image_size %d is not a multiple of clip.vision.patch_size %d", size, d.patch)
			}
			d.side = size / d.patch
			for _, k := range []string{"clip.vision.image_mean", "clip.vision.image_std"} {
				if x, ok := v.f.Lookup(k); !ok || len(x.([]float32)) != 3 {
					v.failf("%s: missing or not 3 values (clip.cpp asserts it is there and reads three)", k)
				}
			}
		} else {
			v.clipUint(m, "num_mel_bins", 1, maxClipMelBins)
		}
		if v.err != "" {
			return
		}
		v.towerTensors(m, d)
		check(v, d)
	}
}

// clipDims are an encoder's hyperparameters, checked.
type clipDims struct {
	embd, heads, ff, layers, proj uint64
	patch, side                   uint64 // vision: patch size, patches per side
}

// projectorTypes are the projector types whose tensors the validation
// checks, each with its projector's check; clip.cpp takes others, but
// llamaloop refuses them until they are checked (and tested on a model).
var projectorTypes = map[string]func(v *validator, d clipDims){
	"gemma3": func(v *validator, d clipDims) {
		v.merge("clip.vision.projector.scale_factor", d)
		v.shape("v.position_embd.weight", true, d.embd, d.side*d.side)
		v.shape("mm.soft_emb_norm.weight", true, d.embd)
		v.shape("mm.input_projection.weight", true, d.proj, d.embd)
	},
	"qwen2vl_merger": func(v *validator, d clipDims) {
		m := v.merge("clip.vision.spatial_merge_size", d)
		in := d.embd * m * m
		if _, ok := v.tensor("v.position_embd.weight"); ok {
			v.failf("tensor v.position_embd.weight: qwen2vl_merger uses rotary positions, not these")
		}
		v.shape("v.patch_embd.weight.1", false, d.patch, d.patch, 3, d.embd)
		w, ok := v.tensor("mm.0.weight")
		if !ok || len(w.Shape) != 2 || w.Shape[0] != in || w.Shape[1] == 0 || w.Shape[1] > 1<<20 {
			v.failf("tensor mm.0.weight: shape %v, want [%d hidden]", w.Shape, in)
			return
		}
		// qwen2vl.cpp adds each block's Q, K and V biases unchecked.
		v.blockTensors("v.", d, []string{"attn_q.bias", "attn_k.bias", "attn_v.bias"}, nil)
		hidden := w.Shape[1]
		v.shape("mm.0.bias", false, hidden)
		v.shape("mm.2.weight", true, hidden, d.proj)
		v.shape("mm.2.bias", false, d.proj)
	},
	"qwen2a": func(v *validator, d clipDims) {
		// whisper-enc.cpp asserts these of block 0 (GGML_ASSERT aborts);
		// every block is held to them, as the graph reads every block alike.
		v.blockTensors("a.", d, []string{"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "attn_q.bias", "attn_v.bias"}, []string{"attn_k.bias"})
		mel, _ := v.uint("clip.audio.num_mel_bins")
		v.shape("a.conv1d.1.weight", true, 3, mel, d.embd)
		v.shape("a.conv1d.1.bias", false, 1, d.embd)
		v.shape("a.conv1d.2.weight", true, 3, d.embd, d.embd)
		v.shape("a.conv1d.2.bias", false, 1, d.embd)
		v.shape("a.position_embd.weight", true, d.embd, 1500)
		v.shape("mm.a.fc.weight", true, d.embd, d.proj)
		v.shape("mm.a.fc.bias", false, d.proj)
	},
}

// blockTensors checks that every block of the tower (prefix p) has the
// tensors required and lacks those refused; their shapes are towerTensors'.
func (v *validator) blockTensors(p string, d clipDims, required, refused []string) {
	for l := range d.layers {
		b := fmt.Sprintf("%sblk.%d.", p, l)
		for _, n := range required {
			if _, ok := v.tensor(b + n); !ok {
				v.failf("tensor %s: missing (clip.cpp uses it)", b+n)
			}
		}
		for _, n := range refused {
			if _, ok := v.tensor(b + n); ok {
				v.failf("tensor %s: clip.cpp's graph for this projector refuses it", b+n)
			}
		}
	}
}

// merge reads a vision merge factor, which must divide the patches per side.
func (v *validator) merge(key string, d clipDims) uint64 {
	m, ok := v.uint(key)
	if !ok || m == 0 || m > d.side || d.side%m != 0 {
		v.failf("%s: is %v, want a divisor of the %d patches per side", key, v.raw(key), d.side)
		return 1
	}
	return m
}

func validatedTypes() string {
	var names []string
	for n := range projectorTypes {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// projectorType is the projector type clip.cpp reads for modality m.
func (v *validator) projectorType(m string) string {
	if t, ok := v.f.Lookup("clip.projector_type"); ok {
		return t.(string)
	}
	t, _ := v.f.Lookup("clip." + m + ".projector_type")
	s, _ := t.(string)
	return s
}

// towerTensors checks the transformer's tensors: the weights clip.cpp
// uses unchecked must be there, and every one present must have the shape
// the hyperparameters give.
func (v *validator) towerTensors(m string, d clipDims) {
	p := m[:1] + "." // "v." or "a."
	if m == "vision" {
		v.shape(p+"patch_embd.weight", true, d.patch, d.patch, 3, d.embd)
		v.shape(p+"patch_embd.bias", false, d.embd)
	}
	for _, n := range []string{"pre_ln.weight", "pre_ln.bias", "post_ln.weight", "post_ln.bias"} {
		v.shape(p+n, false, d.embd)
	}
	for l := range d.layers {
		b := fmt.Sprintf("%sblk.%d.", p, l)
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			v.shape(b+n+".weight", true, d.embd, d.embd)
			v.shape(b+n+".bias", false, d.embd)
		}
		for _, n := range []string{"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "ffn_down.bias"} {
			v.shape(b+n, false, d.embd)
		}
		v.shape(b+"ffn_up.weight", true, d.embd, d.ff)
		v.shape(b+"ffn_up.bias", false, d.ff)
		v.shape(b+"ffn_down.weight", true, d.ff, d.embd)
		if _, ok := v.tensor(b + "ffn_gate.weight"); ok {
			v.failf("tensor %s: gated feed-forward not validated by llamaloop", b+"ffn_gate.weight")
		}
	}
}

// shape checks that tensor name has the shape want (ggml's order); a
// missing tensor fails when required.
func (v *validator) shape(name string, required bool, want ...uint64) {
	t, ok := v.tensor(name)
	if !ok {
		if required {
			v.failf("tensor %s: missing (clip.cpp uses it)", name)
		}
		return
	}
	if !slices.Equal(t.Shape, want) {
		v.failf("tensor %s: shape %v, want %v", name, t.Shape, want)
	}
}

// clipUint reads clip.<modality>.<name>, which must lie in [lo, hi].
func (v *validator) clipUint(modality, name string, lo, hi uint64) uint64 {
	key := "clip." + modality + "." + name
	x, ok := v.uint(key)
	if !ok {
		v.failf("%s: missing (clip.cpp requires it)", key)
		return 1
	}
	if x < lo || x > hi {
		v.failf("%s: %d outside [%d, %d]", key, x, lo, hi)
		return 1
	}
	return x
}
