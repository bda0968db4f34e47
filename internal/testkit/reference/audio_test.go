package reference

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testMel is a deterministic log-mel chunk in Whisper's range (about -1
// to 1.5).
func testMel(nMel, nFrames int) []float32 {
	mel := make([]float32, nMel*nFrames)
	for c := range nMel {
		for t := range nFrames {
			mel[c*nFrames+t] = float32(0.25 + math.Sin(float64(c)*0.37+float64(t)*0.05)*math.Cos(float64(t)*0.011))
		}
	}
	return mel
}

func TestTinyQwen2AudioProjector(t *testing.T) {
	spec := testmodel.TinyQwen2AudioProjector()
	path := filepath.Join(t.TempDir(), "a.mmproj.gguf")
	require.NoError(t, spec.Write(path))
	m, err := LoadAudioProjector(path)
	require.NoError(t, err)
	assert.Equal(t, 80, m.NMel)
	assert.Equal(t, 256, m.TextEmbd)
	assert.Equal(t, 750, m.NTokens(3000))

	mel := testMel(80, 400)
	emb, err := m.EmbedMel(mel, 400)
	require.NoError(t, err)
	require.Len(t, emb, 100)
	for _, row := range emb {
		require.Len(t, row, 256)
		for _, v := range row {
			require.False(t, math.IsNaN(v) || math.IsInf(v, 0))
		}
	}
	assert.NotEqual(t, emb[0], emb[50])
	again, err := m.EmbedMel(mel, 400)
	require.NoError(t, err)
	assert.Equal(t, emb, again)

	_, err = m.EmbedMel(mel[:80*398], 398)
	assert.ErrorContains(t, err, "multiple of 4")
	_, err = m.EmbedMel(testMel(80, 3004), 3004)
	assert.ErrorContains(t, err, "at most 3000")
}

func TestConv1dPaddingAndStride(t *testing.T) {
	// one channel in, one out, kernel (1, 2, 3), zero bias; gelu_erf of
	// the sums, worked by hand:
	//   stride 1 over (1, 0, -1, 2): t0: 2*1+3*0 = 2, t1: 1+0-3 = -2,
	//   t2: 0+2*(-1)+3*2 = 4, t3: -1+2*2 = 3
	//   stride 2: t0 = 2, t1 (centre 2) = 4
	in := [][]float64{{1, 0, -1, 2}}
	w := []float64{1, 2, 3}
	got := conv1d(in, w, []float64{0}, 1, 1)
	want := []float64{geluErf(2), geluErf(-2), geluErf(4), geluErf(3)}
	assert.InDeltaSlice(t, want, got[0], 1e-15)
	got = conv1d(in, w, []float64{0}, 1, 2)
	assert.InDeltaSlice(t, []float64{geluErf(2), geluErf(4)}, got[0], 1e-15)
	assert.InDelta(t, 0.841344746, geluErf(1), 1e-9)
}
