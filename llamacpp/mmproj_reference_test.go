package llamacpp_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/require"
)

// referenceImage is a deterministic RGB image: a gradient with a bright
// square, so that patches differ.
func referenceImage(w, h int) []byte {
	rgb := make([]byte, 3*w*h)
	for y := range h {
		for x := range w {
			i := 3 * (y*w + x)
			rgb[i], rgb[i+1], rgb[i+2] = byte(7*x+3*y), byte(255-5*y), byte(11*(x^y))
			if x >= w/4 && x < w/2 && y >= h/4 && y < h/2 {
				rgb[i], rgb[i+1], rgb[i+2] = 250, 240, 230
			}
		}
	}
	return rgb
}

// encodeImage loads the projector beside tiny-f32 and encodes one image
// prompt's image chunk.
func encodeImage(t *testing.T, proj string, w, h int, rgb []byte) (emb []float32, width int) {
	t.Helper()
	m := loadModel(t, "tiny-f32")
	p, err := llamacpp.LoadProjector(proj, m, llamacpp.ProjectorParams{Threads: 2})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	img, err := llamacpp.ImageRGB(w, h, rgb)
	require.NoError(t, err)
	pr, err := p.Tokenize("look: "+p.Info().Marker+" done", []llamacpp.Media{img}, llamacpp.TokenizeOptions{})
	require.NoError(t, err)
	t.Cleanup(pr.Close)
	for i, c := range pr.Chunks {
		if c.Kind == llamacpp.ChunkImage {
			emb, err = pr.Encode(i)
			require.NoError(t, err)
			return emb, p.Info().Width
		}
	}
	t.Fatal("no image chunk")
	return nil, 0
}

// relDiff is the largest |got - want| relative to want's largest magnitude.
func relDiff(t *testing.T, got []float32, want [][]float64, width int) float64 {
	t.Helper()
	require.Len(t, got, len(want)*width)
	d, scale := 0.0, 0.0
	for i, row := range want {
		require.Len(t, row, width)
		for j, v := range row {
			g := float64(got[i*width+j])
			require.False(t, math.IsNaN(g), "embedding %d,%d is NaN", i, j)
			d = max(d, math.Abs(g-v))
			scale = max(scale, math.Abs(v))
		}
	}
	return d / scale
}

// clip.cpp's embeddings of the self-made projectors agree with the float64
// references. clip.cpp chooses flash attention itself (the binding does not
// set it), which on the CPU rounds queries, keys and values to float16:
// that, not the reference, sets the tolerance, about twice the largest
// relative difference measured on the CPU (AMD EPYC): gemma3 6.2e-4,
// qwen2vl 9.5e-4.
func TestProjectorEmbeddingsMatchReference(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec testmodel.VisionProjector
		w, h int
		tol  float64
	}{
		{"gemma3", testmodel.TinyGemma3Projector(), 32, 32, 1.5e-3},
		{"qwen2vl", testmodel.TinyQwen2VLProjector(), 32, 16, 2e-3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.name+".mmproj.gguf")
			require.NoError(t, tc.spec.Write(path))
			ref, err := reference.LoadVisionProjector(path)
			require.NoError(t, err)
			rgb := referenceImage(tc.w, tc.h)
			want, err := ref.EmbedImage(rgb, tc.w, tc.h)
			require.NoError(t, err)
			got, width := encodeImage(t, path, tc.w, tc.h, rgb)
			require.Equal(t, ref.TextEmbd, width)
			d := relDiff(t, got, want, width)
			t.Logf("%s: %d embeddings x %d: largest |clip.cpp - reference| / largest |reference| = %.3g",
				tc.name, len(want), width, d)
			require.LessOrEqual(t, d, tc.tol)
		})
	}
}
