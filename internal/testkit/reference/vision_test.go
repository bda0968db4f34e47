package reference

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testImage is a deterministic RGB image of side n: a gradient with a
// bright square, so that patches differ.
func testImage(n int) []byte { return testImageWH(n, n) }

func testImageWH(w, n int) []byte {
	rgb := make([]byte, 3*w*n)
	for y := range n {
		for x := range w {
			i := 3 * (y*w + x)
			rgb[i], rgb[i+1], rgb[i+2] = byte(8*x), byte(8*y), byte(4*(x+y))
			if x >= n/4 && x < n/2 && y >= n/4 && y < n/2 {
				rgb[i], rgb[i+1], rgb[i+2] = 250, 240, 230
			}
		}
	}
	return rgb
}

func TestTinyGemma3Projector(t *testing.T) {
	spec := testmodel.TinyGemma3Projector()
	path := filepath.Join(t.TempDir(), "p.mmproj.gguf")
	require.NoError(t, spec.Write(path))
	m, err := LoadVisionProjector(path)
	require.NoError(t, err)
	assert.Equal(t, spec.NTokens(), m.NTokens(32, 32))
	assert.Equal(t, 16, m.NTokens(32, 32))
	assert.Equal(t, 16, m.NTokens(50, 37), "any size is resized to 32x32")
	assert.Equal(t, 256, m.TextEmbd)

	img := testImage(spec.ImageSize)
	emb, err := m.EmbedImage(img, spec.ImageSize, spec.ImageSize)
	require.NoError(t, err)
	require.Len(t, emb, 16)
	for _, row := range emb {
		require.Len(t, row, 256)
		ss := 0.0
		for _, v := range row {
			require.False(t, math.IsNaN(v) || math.IsInf(v, 0))
			ss += v * v
		}
		// RMS-normalised rows (norm weights 0.8..1.2) through a
		// 1/sqrt(64)-scaled projection: each output has a standard
		// deviation near 1.
		rms := math.Sqrt(ss / 256)
		assert.InDelta(t, 1, rms, 0.5)
	}
	assert.NotEqual(t, emb[0], emb[5], "different image regions give different embeddings")

	again, err := m.EmbedImage(img, spec.ImageSize, spec.ImageSize)
	require.NoError(t, err)
	assert.Equal(t, emb, again)

	_, err = m.EmbedImage(img[:3*16*16], 16, 17)
	assert.ErrorContains(t, err, "16x17")
}

func TestVisionPixelsPlanar(t *testing.T) {
	m := &VisionProjector{ImageSize: 2, Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.25, 0.5}}
	px, w, h, err := m.Pixels([]byte{255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255}, 2, 2)
	require.NoError(t, err)
	assert.Equal(t, [2]int{2, 2}, [2]int{w, h})
	// planar [c][y][x]: red plane, green plane, blue plane
	assert.Equal(t, []float64{1, -1, -1, 1, -2, 2, -2, 2, -1, -1, 1, 1}, px)
}

func TestTinyQwen2VLProjector(t *testing.T) {
	spec := testmodel.TinyQwen2VLProjector()
	path := filepath.Join(t.TempDir(), "q.mmproj.gguf")
	require.NoError(t, spec.Write(path))
	m, err := LoadVisionProjector(path)
	require.NoError(t, err)
	assert.Equal(t, "qwen2vl_merger", m.Type)
	assert.Equal(t, 256, m.TextEmbd)
	// 32x16 pixels: 8x4 patches, 4x2 merged tokens
	assert.Equal(t, 8, m.NTokens(32, 16))
	assert.Equal(t, 9, m.NTokens(16, 16), "4 tokens are below clip.cpp's minimum of 8: scaled up to 24x24")
	assert.Equal(t, 10, m.NTokens(36, 16), "36 rounds to 40")

	img := testImageWH(32, 16)
	emb, err := m.EmbedImage(img, 32, 16)
	require.NoError(t, err)
	require.Len(t, emb, 8)
	for _, row := range emb {
		require.Len(t, row, 256)
		for _, v := range row {
			require.False(t, math.IsNaN(v) || math.IsInf(v, 0))
		}
	}
	again, err := m.EmbedImage(img, 32, 16)
	require.NoError(t, err)
	assert.Equal(t, emb, again)

	// Rotary positions are relative and the values are the same
	// everywhere: a uniform image gives the same embedding for every token.
	flat := make([]byte, 3*32*16)
	for i := range flat {
		flat[i] = 128
	}
	e2, err := m.EmbedImage(flat, 32, 16)
	require.NoError(t, err)
	for _, row := range e2[1:] {
		assert.InDeltaSlice(t, e2[0], row, 1e-12)
	}
	assert.NotEqual(t, emb[0], emb[7])
}

// TestVisionRopeRelative checks the defining property of the rotation:
// the dot product of a rotated query and key depends only on their offset.
func TestVisionRopeRelative(t *testing.T) {
	a := []float64{0.3, -1, 0.5, 2, 0.1, 0.7, -0.4, 1.1, 0.9, -0.2, 0.6, -1.3, 0.8, 0.05, -0.6, 0.4}
	b := []float64{1, 0.2, -0.3, 0.4, -0.9, 0.3, 0.2, -0.1, 0.5, 0.6, -0.7, 0.8, 0.1, -0.2, 0.3, 0.9}
	dot := func(r1, c1, r2, c2 int) float64 {
		x, y := append([]float64(nil), a...), append([]float64(nil), b...)
		rotate(x, r1, c1)
		rotate(y, r2, c2)
		s := 0.0
		for i := range x {
			s += x[i] * y[i]
		}
		return s
	}
	assert.InDelta(t, dot(1, 2, 3, 5), dot(4, 7, 6, 10), 1e-12)
	assert.InDelta(t, dot(0, 0, 0, 0), dot(9, 3, 9, 3), 1e-12)
	assert.NotEqual(t, dot(0, 0, 1, 0), dot(0, 0, 0, 1), "rows and columns rotate different pairs")
}

func TestGGMLGELU(t *testing.T) {
	// tanh-approximated GELU, rounded through float16 (3 significant digits)
	assert.InDelta(t, 0.8412, ggmlGELU(1), 1e-3)
	assert.InDelta(t, -0.1588, ggmlGELU(-1), 1e-3)
	assert.Equal(t, 0.0, ggmlGELU(-11))
	assert.Equal(t, float64(float32(12.3)), ggmlGELU(12.3))
	// the table is indexed by the float16 input: neighbours within half a
	// float16 step share a value
	assert.Equal(t, ggmlGELU(0.5), ggmlGELU(0.5001))
}

func TestResizeLikeClip(t *testing.T) {
	// a 2x1 black-white image stretched to 4x1: x_ratio = 1/4, values
	// 255*(0, 1/4, 2/4, 3/4) truncated
	got := resizeBilinear([]byte{0, 0, 0, 255, 255, 255}, 2, 1, 4, 1)
	assert.Equal(t, []byte{0, 0, 0, 63, 63, 63, 127, 127, 127, 191, 191, 191}, got)
	// gemma3: 64x32 into 32x32 keeps the aspect ratio: 32x16 centred, rows
	// 0-7 and 24-31 black
	m := &VisionProjector{ImageSize: 32}
	img := make([]byte, 3*64*32)
	for i := range img {
		img[i] = 200
	}
	out, w, h := m.prepare(img, 64, 32)
	require.Equal(t, [2]int{32, 32}, [2]int{w, h})
	assert.Equal(t, byte(0), out[3*(7*32+5)])
	assert.Equal(t, byte(200), out[3*(8*32+5)])
	assert.Equal(t, byte(200), out[3*(23*32+31)])
	assert.Equal(t, byte(0), out[3*(24*32+5)])
	// smart resize: 50x37 rounds to 48x40 (multiples of 8)
	sw, sh := smartResize(50, 37, 8, 512, 262144)
	assert.Equal(t, [2]int{48, 40}, [2]int{sw, sh})
}
