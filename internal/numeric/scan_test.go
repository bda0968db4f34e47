package numeric

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The scans are checked against the plain loops below, which say what each
// one means, on rows of every length up to 70 at every offset into a buffer
// (so that the vector loops meet every alignment and every tail), with NaN,
// infinities, zeros of both signs, subnormals and ties; with AVX2, both with
// and without the vector loops.

func maxIndexLoop(row []float32) (float32, int, bool) {
	m, best, nan := float32(math.Inf(-1)), -1, false
	for i, x := range row {
		switch {
		case x != x:
			nan = true
		case x > m:
			m, best = x, i
		}
	}
	return m, best, nan
}

func firstAtLeastLoop(row []float32, i int, thr float32) int {
	for ; i < len(row); i++ {
		if row[i] >= thr {
			return i
		}
	}
	return len(row)
}

// maskBelowLoop returns MaskBelow's index and the row it leaves, in a copy.
func maskBelowLoop(row []float32, i int, thr float32) (int, []float32) {
	out := slices.Clone(row)
	for ; i < len(out); i++ {
		if !(out[i] < thr) { // at least thr, or NaN (entry or thr)
			return i, out
		}
		out[i] = float32(math.Inf(-1))
	}
	return len(out), out
}

func firstAboveSumLoop(row []float32, i int, add, thr float32) int {
	for ; i < len(row); i++ {
		if s := float32(row[i] + add); s > thr {
			return i
		}
	}
	return len(row)
}

// scanModes runs f with the vector loops and, where they exist, without.
func scanModes(t *testing.T, f func(t *testing.T)) {
	t.Run("vector", f)
	if hasAVX2 {
		hasAVX2 = false
		defer func() { hasAVX2 = true }()
		t.Run("plain", f)
	}
}

// specials are the values a row of scores is made of: ties among a few
// small numbers, both zeros, the infinities, NaNs of two payloads, the
// extremes of float32 (whose sums overflow) and subnormals (whose sums
// round).
var specials = []float32{
	-2, -1, 0, 1, 2, float32(math.Copysign(0, -1)),
	float32(math.Inf(1)), float32(math.Inf(-1)),
	float32(math.NaN()), math.Float32frombits(0xffc00001),
	math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 0x1p-130, -0x1p-127,
	1.5, 0.1, -0.1,
}

// randomScore draws from specials half the time, else a normal number.
func randomScore(r *rand.Rand) float32 {
	if r.IntN(2) == 0 {
		return specials[r.IntN(len(specials))]
	}
	return float32(r.NormFloat64() * 3)
}

// scanRows calls f on rows of every length 0..70 at offsets 0..8 of a
// buffer, several draws each, with thresholds from the row and specials.
func scanRows(t *testing.T, f func(t *testing.T, row []float32, i int, thr, add float32)) {
	r := rand.New(rand.NewPCG(7, 11))
	buf := make([]float32, 80)
	for n := range 71 {
		for off := range 9 {
			for range 6 {
				row := buf[off : off+n : off+n]
				for j := range row {
					row[j] = randomScore(r)
				}
				thr := randomScore(r)
				if n > 0 && r.IntN(2) == 0 {
					thr = row[r.IntN(n)]
				}
				add := randomScore(r)
				i := 0
				if n > 0 {
					i = r.IntN(n + 1)
				}
				f(t, row, i, thr, add)
				f(t, row, 0, thr, add)
			}
		}
	}
}

func TestMaxIndex(t *testing.T) {
	scanModes(t, func(t *testing.T) {
		scanRows(t, func(t *testing.T, row []float32, _ int, _, _ float32) {
			m, i, nan := MaxIndex(row)
			wm, wi, wnan := maxIndexLoop(row)
			require.Equal(t, math.Float32bits(wm), math.Float32bits(m), "%v", row)
			require.Equal(t, wi, i, "%v", row)
			require.Equal(t, wnan, nan, "%v", row)
		})
	})
}

// Long rows span several of the vector pass's blocks of 256: the first of
// tied maxima, in any lane of any block, and the first of two zeros.
func TestMaxIndexLongRows(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 17))
	negZero := float32(math.Copysign(0, -1))
	scanModes(t, func(t *testing.T) {
		for trial := range 2000 {
			n := 1 + r.IntN(1200)
			row := make([]float32, n)
			for j := range row {
				switch r.IntN(4) {
				case 0:
					row[j] = float32(r.IntN(3)) // ties at the maximum
				case 1:
					row[j] = specials[r.IntN(len(specials))]
				default:
					row[j] = float32(r.NormFloat64())
				}
			}
			if trial%3 == 0 { // only zeros of both signs on top
				for j, x := range row {
					if x > 0 {
						row[j] = []float32{0, negZero, -1}[r.IntN(3)]
					}
				}
			}
			m, i, nan := MaxIndex(row[:n])
			wm, wi, wnan := maxIndexLoop(row[:n])
			require.Equal(t, []any{math.Float32bits(wm), wi, wnan}, []any{math.Float32bits(m), i, nan}, "trial %d", trial)
		}
	})
}

func TestFirstAtLeast(t *testing.T) {
	scanModes(t, func(t *testing.T) {
		scanRows(t, func(t *testing.T, row []float32, i int, thr, _ float32) {
			require.Equal(t, firstAtLeastLoop(row, i, thr), FirstAtLeast(row, i, thr), "%v from %d, thr %v", row, i, thr)
		})
	})
}

func TestMaskBelow(t *testing.T) {
	scanModes(t, func(t *testing.T) {
		scanRows(t, func(t *testing.T, row []float32, i int, thr, _ float32) {
			want, wantRow := maskBelowLoop(row, i, thr)
			before := slices.Clone(row)
			got := MaskBelow(row, i, thr)
			require.Equal(t, want, got, "%v from %d, thr %v", before, i, thr)
			require.Equal(t, bits(wantRow), bits(row), "%v from %d, thr %v", before, i, thr)
		})
	})
}

// FirstNotBelow stops where MaskBelow stops and writes nothing.
func TestFirstNotBelow(t *testing.T) {
	scanModes(t, func(t *testing.T) {
		scanRows(t, func(t *testing.T, row []float32, i int, thr, _ float32) {
			want, _ := maskBelowLoop(row, i, thr)
			before := slices.Clone(row)
			require.Equal(t, want, FirstNotBelow(row, i, thr), "%v from %d, thr %v", before, i, thr)
			require.Equal(t, bits(before), bits(row))
		})
	})
}

func TestFirstAboveSum(t *testing.T) {
	scanModes(t, func(t *testing.T) {
		scanRows(t, func(t *testing.T, row []float32, i int, thr, add float32) {
			require.Equal(t, firstAboveSumLoop(row, i, add, thr), FirstAboveSum(row, i, add, thr),
				"%v from %d, add %v, thr %v", row, i, add, thr)
		})
	})
}

// A single hit at each position of a longer row, the rest below the
// threshold, reaches every lane of every group of the vector loops; the
// scores around the row, in the same buffer, must stay as they are.
func TestScanSingleHit(t *testing.T) {
	scanModes(t, func(t *testing.T) {
		const n = 600
		buf := make([]float32, n+3)
		for off := range 3 {
			for hit := range n + 1 {
				for j := range buf {
					buf[j] = -float32(j%5) - 1
				}
				row := buf[off : off+n]
				if hit < n {
					row[hit] = 3
				}
				assert.Equal(t, hit, FirstAtLeast(row, 0, 3))
				assert.Equal(t, hit, FirstAboveSum(row, 0, 0.5, 3))
				assert.Equal(t, hit, FirstNotBelow(row, 0, 2.5))
				m, i, nan := MaxIndex(row)
				if hit < n {
					assert.Equal(t, []any{float32(3), hit, false}, []any{m, i, nan})
				} else { // the first -1
					assert.Equal(t, []any{float32(-1), (5 - off) % 5, false}, []any{m, i, nan})
				}
				outside := slices.Concat(buf[:off], buf[off+n:])
				assert.Equal(t, hit, MaskBelow(row, 0, 2.5))
				for j, x := range row {
					switch {
					case j < hit:
						require.Equal(t, float32(math.Inf(-1)), x, "hit %d, entry %d", hit, j)
					case j == hit:
						require.Equal(t, float32(3), x)
					default:
						require.Equal(t, -float32((j+off)%5)-1, x, "hit %d, entry %d", hit, j)
					}
				}
				assert.Equal(t, outside, slices.Concat(buf[:off], buf[off+n:]))
			}
		}
	})
}

// The sum is float32's: 1 + 2^-24 rounds to 1 (ties to even), which is
// not above 1; 1 + 2^-23 is; max + max overflows to +Inf.
func TestFirstAboveSumRounds(t *testing.T) {
	scanModes(t, func(t *testing.T) {
		row := make([]float32, 40)
		row[33] = 0x1p-24
		row[37] = 0x1p-23
		assert.Equal(t, 37, FirstAboveSum(row, 0, 1, 1))
		big := slices.Repeat([]float32{math.MaxFloat32}, 17)
		assert.Equal(t, 0, FirstAboveSum(big, 0, math.MaxFloat32, math.MaxFloat32))
		assert.Equal(t, 17, FirstAboveSum(big, 0, math.MaxFloat32, float32(math.Inf(1))))
		// -Inf + +Inf is NaN, which matches nothing.
		inf := slices.Repeat([]float32{float32(math.Inf(1))}, 17)
		assert.Equal(t, 17, FirstAboveSum(inf, 0, float32(math.Inf(-1)), -math.MaxFloat32))
	})
}

// By hand: the first of two equal maxima, the sign of the first zero, NaN
// reported but never the maximum, -1 for a row without a number above -Inf.
func TestMaxIndexByHand(t *testing.T) {
	scanModes(t, func(t *testing.T) {
		nan, inf := float32(math.NaN()), float32(math.Inf(1))
		negZero := float32(math.Copysign(0, -1))
		row := make([]float32, 20)
		for j := range row {
			row[j] = -5
		}
		row[3], row[17] = 2, 2
		m, i, hasNaN := MaxIndex(row)
		assert.Equal(t, []any{float32(2), 3, false}, []any{m, i, hasNaN})
		row[3], row[17], row[9], row[12] = -5, -5, negZero, 0
		m, i, _ = MaxIndex(row)
		assert.Equal(t, 9, i)
		assert.True(t, math.Signbit(float64(m)))
		row[1] = nan
		m, i, hasNaN = MaxIndex(row)
		assert.Equal(t, []any{9, true}, []any{i, hasNaN})
		row[19] = inf
		m, i, _ = MaxIndex(row)
		assert.Equal(t, []any{inf, 19}, []any{m, i})
		masked := slices.Repeat([]float32{float32(math.Inf(-1))}, 20)
		masked[4] = nan
		m, i, hasNaN = MaxIndex(masked)
		assert.Equal(t, []any{float32(math.Inf(-1)), -1, true}, []any{m, i, hasNaN})
		m, i, hasNaN = MaxIndex(nil)
		assert.Equal(t, []any{float32(math.Inf(-1)), -1, false}, []any{m, i, hasNaN})
	})
}

func bits(row []float32) []uint32 {
	b := make([]uint32, len(row))
	for i, x := range row {
		b[i] = math.Float32bits(x)
	}
	return b
}

// benchRow is a row of a large vocabulary's logits, none above 30.
func benchRow() []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	row := make([]float32, 128256)
	for i := range row {
		row[i] = float32(r.NormFloat64() * 3)
	}
	return row
}

func BenchmarkMaxIndex(b *testing.B) {
	row := benchRow()
	b.SetBytes(int64(4 * len(row)))
	for b.Loop() {
		MaxIndex(row)
	}
}

// The scans below find nothing: each reads the whole row.

func BenchmarkFirstAtLeast(b *testing.B) {
	row := benchRow()
	b.SetBytes(int64(4 * len(row)))
	for b.Loop() {
		FirstAtLeast(row, 0, 30)
	}
}

func BenchmarkMaskBelow(b *testing.B) {
	row := benchRow()
	b.SetBytes(int64(4 * len(row)))
	for b.Loop() {
		MaskBelow(row, 0, 30)
	}
}

func BenchmarkFirstAboveSum(b *testing.B) {
	row := benchRow()
	b.SetBytes(int64(4 * len(row)))
	for b.Loop() {
		FirstAboveSum(row, 0, -3.5, 30)
	}
}
