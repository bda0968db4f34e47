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

func TestLogMel(t *testing.T) {
	// one second of a 1 kHz tone, padded to 31 s: 3098 frames, one full
	// chunk of 3000
	pcm := make([]float32, 16000)
	for i := range pcm {
		pcm[i] = float32(0.5 * math.Sin(2*math.Pi*1000*float64(i)/16000))
	}
	chunks, err := LogMel(pcm, 80)
	require.NoError(t, err)
	require.Len(t, chunks, 1)
	require.Len(t, chunks[0], 80*3000)
	// the clamp puts silence 8 decades below the loudest value: (max-8+4)/4
	// = max/4 - 1; the loudest band holds 1 kHz during the first second
	frame := 50
	loudest, band := float32(-100), -1
	for m := range 80 {
		if v := chunks[0][m*3000+frame]; v > loudest {
			loudest, band = v, m
		}
	}
	silence := chunks[0][3000-1]
	assert.InDelta(t, float64(loudest)-2, float64(silence), 1e-6, "silence is clamped 8 decades (2 after /4) below the peak")
	// Slaney mel of 1 kHz is 15; the 80 bands split 0..8 kHz (mel 45.2)
	// evenly, so 1 kHz sits in band 15/45.2*81 - 1 = 25.9
	assert.InDelta(t, 26, band, 1)
	filters := melFilters(80, 201)
	for m := range 80 {
		s := 0.0
		for k := range 201 {
			s += filters[m*201+k]
		}
		assert.Greater(t, s, 0.0, "band %d has no FFT bin", m)
	}
}
