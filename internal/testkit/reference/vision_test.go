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
func testImage(n int) []byte {
	rgb := make([]byte, 3*n*n)
	for y := range n {
		for x := range n {
			i := 3 * (y*n + x)
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
	assert.Equal(t, spec.NTokens(), m.NTokens())
	assert.Equal(t, 16, m.NTokens())
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

	_, err = m.EmbedImage(img[:3*16*16], 16, 16)
	assert.ErrorContains(t, err, "32x32")
}

func TestVisionPixelsPlanar(t *testing.T) {
	m := &VisionProjector{ImageSize: 2, Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.25, 0.5}}
	px, err := m.Pixels([]byte{255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255}, 2, 2)
	require.NoError(t, err)
	// planar [c][y][x]: red plane, green plane, blue plane
	assert.Equal(t, []float64{1, -1, -1, 1, -2, 2, -2, 2, -1, -1, 1, 1}, px)
}
