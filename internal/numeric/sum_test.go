package numeric

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The loop of AddTerms keeps only terms that Term does not clamp, so that the two compute the same
// value for every entry.
func TestFloorSteps(t *testing.T) {
	d := -float64(floorSteps) * math.Ln2 / ExpTableSize
	assert.Greater(t, d-0.5*math.Ln2/ExpTableSize, float64(ExpFloor))
	assert.Less(t, -float64(floorSteps+2)*math.Ln2/ExpTableSize, float64(ExpFloor))
}

// randomRow is a row of n logits of the given scale around offset, a share of them masked, its
// largest entry at a random place.
func randomRow(r *rand.Rand, n int, scale, offset, masked float64) []float32 {
	row := make([]float32, n)
	for i := range row {
		row[i] = float32(offset + scale*r.NormFloat64())
		if r.Float64() < masked {
			row[i] = float32(math.Inf(-1))
		}
	}
	row[r.IntN(n)] = float32(offset + 10*scale) // at least one unmasked, and the largest
	return row
}

// ExpSum against a float64 brute force with math.Exp, on rows of every range, masked or not, up to
// 262144 entries: within 1e-12 relative. ExpSumAt over the unmasked entries gives the same bits,
// and so does ExpSum by the terms one by one.
func TestExpSumAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := range 60 {
		n := []int{1, 2, 3, 17, 1000, 32000, 128256, 262144}[iter%8]
		scale := []float64{1e-6, 1, 2, 10, 40, 300, 1e4}[r.IntN(7)]
		offset := []float64{0, -50, 1e3, -1e4}[r.IntN(4)]
		masked := []float64{0, 0, 0.5, 0.99}[r.IntN(4)]
		row := randomRow(r, n, scale, offset, masked)
		m := math.Inf(-1)
		for _, x := range row {
			m = max(m, float64(x))
		}
		var want float64
		var idx []int32
		for i, x := range row {
			want += math.Exp(float64(x) - m)
			if !math.IsInf(float64(x), -1) {
				idx = append(idx, int32(i))
			}
		}
		got := ExpSum(row, m)
		require.InEpsilon(t, want, got, 1e-12, "iter %d n=%d scale %v", iter, n, scale)
		require.Equal(t, got, ExpSumAt(row, idx, m), "iter %d", iter)
		var byTerm float64
		for _, x := range row {
			byTerm += Term(float64(x) - m)
		}
		require.Equal(t, got, byTerm, "iter %d", iter)
		assert.InDelta(t, m+math.Log(want), LogSumExp(row), 1e-12*max(1, math.Abs(m)))
	}
}

func TestLogSumExp(t *testing.T) {
	ninf, inf, nan := float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN())
	// ln(e^0 + e^ln3) = ln 4.
	assert.InDelta(t, math.Log(4), LogSumExp([]float32{0, float32(math.Log(3)), ninf}), 1e-7)
	assert.InDelta(t, 1000+math.Log(2), LogSumExp([]float32{1000, 1000}), 1e-12)
	assert.Equal(t, math.Inf(-1), LogSumExp(nil))
	assert.Equal(t, math.Inf(-1), LogSumExp([]float32{ninf, ninf}))
	assert.Equal(t, math.Inf(1), LogSumExp([]float32{1, inf, 2}))
	assert.True(t, math.IsNaN(LogSumExp([]float32{1, nan})))
	assert.True(t, math.IsNaN(LogSumExp([]float32{inf, nan})))
}

// The sum adds nothing per call to the heap.
func TestExpSumDoesNotAllocate(t *testing.T) {
	row := randomRow(rand.New(rand.NewPCG(1, 1)), 4096, 3, 0, 0.1)
	assert.Zero(t, testing.AllocsPerRun(10, func() { _ = LogSumExp(row) }))
}
