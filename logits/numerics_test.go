package logits

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	inf  = float32(math.Inf(1))
	ninf = float32(math.Inf(-1))
	nan  = float32(math.NaN())
)

func TestArgmax(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scores []float32
		want   int
	}{
		{"single", []float32{3}, 0},
		{"lowest index among ties", []float32{1, 5, 2, 5}, 1},
		{"first NaN wins, as torch.argmax", []float32{1, 9, nan, 3, nan}, 2},
		{"NaN first", []float32{nan, 9}, 0},
		{"all -inf gives 0", []float32{ninf, ninf, ninf}, 0},
		{"+inf", []float32{1, inf, 2, inf}, 1},
		{"negative", []float32{-3, -1, -2}, 1},
		{"empty", nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Argmax(tc.scores))
		})
	}
}

func TestLogSoftmax(t *testing.T) {
	// log(1/4), log(3/4) from scores 0 and ln 3; -inf stays -inf.
	src := []float32{0, float32(math.Log(3)), ninf}
	dst := make([]float32, 3)
	LogSoftmax(dst, src)
	assert.InDelta(t, math.Log(0.25), dst[0], 1e-6)
	assert.InDelta(t, math.Log(0.75), dst[1], 1e-6)
	assert.Equal(t, ninf, dst[2])
	// In place, and shift invariant: adding 1000 changes nothing.
	src2 := []float32{1000, 1000 + float32(math.Log(3)), ninf}
	LogSoftmax(src2, src2)
	assert.InDelta(t, dst[0], src2[0], 1e-4)

	for _, bad := range [][]float32{{1, nan}, {1, inf}, {ninf, ninf}} {
		out := make([]float32, len(bad))
		LogSoftmax(out, bad)
		for _, x := range out {
			assert.True(t, x != x, "torch gives NaN for %v", bad)
		}
	}
}

func TestSoftmax(t *testing.T) {
	src := []float32{0, float32(math.Log(3)), ninf}
	dst := make([]float32, 3)
	Softmax(dst, src)
	assert.InDelta(t, 0.25, dst[0], 1e-7)
	assert.InDelta(t, 0.75, dst[1], 1e-7)
	assert.Equal(t, float32(0), dst[2])
}

func TestSampleIndex(t *testing.T) {
	// Probabilities 0.25, 0, 0.75 (index 1 is -inf): u below 0.25 draws 0, above draws 2.
	scores := []float32{0, ninf, float32(math.Log(3))}
	for _, tc := range []struct {
		u    float64
		want int
	}{{0, 0}, {0.2499, 0}, {0.2501, 2}, {0.9999999, 2}} {
		got, ok := SampleIndex(scores, tc.u)
		require.True(t, ok)
		assert.Equal(t, tc.want, got, "u=%v", tc.u)
	}
	_, ok := SampleIndex([]float32{ninf, ninf}, 0.5)
	assert.False(t, ok, "all -inf")
	_, ok = SampleIndex([]float32{nan, ninf}, 0.5)
	assert.False(t, ok, "NaN is never drawn")
	// NaN entries take no share: 1 and 3 split the draw as e^1 : e^3.
	got, ok := SampleIndex([]float32{1, nan, 3}, 0.1)
	assert.True(t, ok)
	assert.Equal(t, 0, got)
	got, _ = SampleIndex([]float32{1, nan, 3}, 0.2)
	assert.Equal(t, 2, got)
	got, ok = SampleIndex([]float32{nan, 2, nan}, 0.7)
	assert.True(t, ok)
	assert.Equal(t, 1, got)
	// +inf entries share the draw.
	got, _ = SampleIndex([]float32{1, inf, 3, inf}, 0.2)
	assert.Equal(t, 1, got)
	got, _ = SampleIndex([]float32{1, inf, 3, inf}, 0.7)
	assert.Equal(t, 3, got)
	_, ok = SampleIndex(nil, 0.5)
	assert.False(t, ok)
}

func TestSampleIndexDistribution(t *testing.T) {
	// Uniform u on a fine grid reproduces softmax: 1:2:4 weights.
	scores := []float32{0, float32(math.Log(2)), float32(math.Log(4))}
	counts := make([]int, 3)
	const n = 70000
	for i := range n {
		idx, ok := SampleIndex(scores, (float64(i)+0.5)/n)
		require.True(t, ok)
		counts[idx]++
	}
	assert.InDelta(t, n/7, counts[0], 2)
	assert.InDelta(t, 2*n/7, counts[1], 2)
	assert.InDelta(t, 4*n/7, counts[2], 2)
}

func nextAfter(x, y float32) float32 { return math.Nextafter32(x, y) }

// requireSameFloats requires equal slices, NaN matching NaN.
func requireSameFloats(t testing.TB, want, got []float32, msgAndArgs ...any) {
	t.Helper()
	require.Len(t, got, len(want), msgAndArgs...)
	for i := range want {
		if want[i] != got[i] && !(want[i] != want[i] && got[i] != got[i]) {
			require.Equal(t, want, got, msgAndArgs...)
		}
	}
}

func TestWiden(t *testing.T) {
	for _, x := range []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1e-45, -1e-40, 1.17549435e-38, math.MaxFloat32,
		-math.MaxFloat32, 0.1, -3.3, 1e30, inf, ninf} {
		assert.Equal(t, math.Float64bits(float64(x)), math.Float64bits(widen(x)), "%g", x)
	}
	assert.True(t, math.IsNaN(widen(nan)))
	for b := uint32(0); b < 1<<32-1<<20; b += 1<<20 + 7 {
		x := math.Float32frombits(b)
		if x == x {
			require.Equal(t, math.Float64bits(float64(x)), math.Float64bits(widen(x)), "bits %x", b)
		}
	}
}
