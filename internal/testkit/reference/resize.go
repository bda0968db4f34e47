package reference

import "math"

// clip.cpp's image preparation (img_tool in clip.cpp), reproduced in
// float32 as it computes: the sizes it picks per projector type and its
// bilinear resampling to whole bytes. clip.cpp's compiler may fuse the
// interpolation's multiply and add (FMA), which can move a byte by one
// where a value lands next to a whole number; a step of 1/255 in one
// pixel value before normalisation.

// prepare returns the RGB image clip.cpp encodes for a width×height input:
// gemma3 resizes it into ImageSize×ImageSize keeping its aspect ratio,
// centred on black; qwen2vl resizes it to the nearest sides that are
// multiples of 2*PatchSize, scaled into 8 to 4096 tokens.
func (m *VisionProjector) prepare(rgb []byte, width, height int) ([]byte, int, int) {
	if m.Type == "qwen2vl_merger" {
		w, h := smartResize(width, height, 2*m.PatchSize, 8*4*m.PatchSize*m.PatchSize, 4096*4*m.PatchSize*m.PatchSize)
		if w == width && h == height {
			return rgb, w, h
		}
		return resizeBilinear(rgb, width, height, w, h), w, h
	}
	t := m.ImageSize
	if width == t && height == t {
		return rgb, t, t
	}
	scale := min(float32(t)/float32(width), float32(t)/float32(height))
	nw := min(int(math.Ceil(float64(float32(float32(width)*scale)))), t)
	nh := min(int(math.Ceil(float64(float32(float32(height)*scale)))), t)
	small := resizeBilinear(rgb, width, height, nw, nh)
	out := make([]byte, 3*t*t)
	ox, oy := (t-nw)/2, (t-nh)/2
	for y := range nh {
		copy(out[3*((y+oy)*t+ox):], small[3*y*nw:3*(y+1)*nw])
	}
	return out, t, t
}

// smartResize is clip.cpp's calc_size_preserved_ratio with pixel bounds
// (transformers' smart_resize).
func smartResize(width, height, align, minPixels, maxPixels int) (int, int) {
	f := float32(align)
	round := func(x float32) int { return int(math.Round(float64(x/f))) * align }
	ceil := func(x float32) int { return int(math.Ceil(float64(x/f))) * align }
	floor := func(x float32) int { return int(math.Floor(float64(x/f))) * align }
	h, w := max(align, round(float32(height))), max(align, round(float32(width)))
	switch {
	case h*w > maxPixels:
		beta := float32(math.Sqrt(float64(float32(height*width) / float32(maxPixels))))
		h, w = max(align, floor(float32(height)/beta)), max(align, floor(float32(width)/beta))
	case h*w < minPixels:
		beta := float32(math.Sqrt(float64(float32(minPixels) / float32(height*width))))
		h, w = ceil(float32(height)*beta), ceil(float32(width)*beta)
	}
	return w, h
}

// resizeBilinear is clip.cpp's resize_bilinear: float32 interpolation
// truncated to bytes.
func resizeBilinear(src []byte, sw, sh, tw, th int) []byte {
	dst := make([]byte, 3*tw*th)
	xr, yr := float32(sw-1)/float32(tw), float32(sh-1)/float32(th)
	lerp := func(s, e, t float32) float32 { return s + float32((e-s)*t) }
	at := func(x, y, c int) float32 {
		// clip.cpp reads one past a 1-pixel-wide row; the reference stays inside
		x, y = min(x, sw-1), min(y, sh-1)
		return float32(src[3*(y*sw+x)+c])
	}
	for y := range th {
		for x := range tw {
			px, py := xr*float32(x), yr*float32(y)
			xf, yf := int(px), int(py)
			xl, yl := px-float32(xf), py-float32(yf)
			for c := range 3 {
				top := lerp(at(xf, yf, c), at(xf+1, yf, c), xl)
				bottom := lerp(at(xf, yf+1, c), at(xf+1, yf+1, c), xl)
				dst[3*(y*tw+x)+c] = byte(lerp(top, bottom, yl))
			}
		}
	}
	return dst
}
