package mirostat

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The normalizer against a float64 brute force with math.Exp, on rows of
// every range, masked or not, up to 262144 tokens: lnZ within 1e-12
// relative in Z. The pass that fills a draw's histogram must give the same
// statistics to the last bit, and masses that add up to the same Z within
// the rounding of a sum in token order.
func TestNormalizerAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var h histogram
	for iter := range 60 {
		n := []int{1, 2, 3, 17, 1000, 32000, 128256, 262144}[iter%8]
		scale := []float64{1e-6, 1, 2, 10, 40, 300, 1e4}[r.IntN(7)]
		offset := []float64{0, -50, 1e3, -1e4}[r.IntN(4)]
		masked := []float64{0, 0, 0.5, 0.99}[r.IntN(4)]
		row := make([]float32, n)
		for i := range row {
			row[i] = float32(offset + scale*r.NormFloat64())
			if r.Float64() < masked {
				row[i] = float32(math.Inf(-1))
			}
		}
		row[r.IntN(n)] = float32(offset) // at least one unmasked
		m := math.Inf(-1)
		for _, x := range row {
			m = max(m, float64(x))
		}
		// Neumaier's compensated sum: an index-order sum is itself off by
		// 1e-11 at n = 128256.
		var want, c float64
		for _, x := range row {
			e := math.Exp(float64(x) - m)
			t := want + e
			if math.Abs(want) >= e {
				c += (want - t) + e
			} else {
				c += (e - t) + want
			}
			want = t
		}
		want += c
		st, err := logitStats(row, nil)
		require.NoError(t, err)
		assert.Equal(t, m, st.shift)
		if rel := math.Abs(math.Exp(st.lnZ-math.Log(want)) - 1); rel > 1e-12 {
			t.Fatalf("iter %d n=%d scale %v masked %v: Z off by %g relative", iter, n, scale, masked, rel)
		}
		sh, err := logitTerms(row, nil, &h)
		require.NoError(t, err)
		require.Equal(t, st, sh, "iter %d", iter)
		var mass float64
		count := 0
		for b := range bands {
			mass += h.stats[b].mass
			count += int(h.stats[b].count)
		}
		// The bands' masses are sums in token order: within n·2^-53 more
		// (the γ_n that drawSlack allows).
		assert.InEpsilon(t, want, mass, 1e-12+float64(n)*0x1p-53)
		unmasked := 0
		for _, x := range row {
			if !math.IsInf(float64(x), -1) {
				unmasked++
			}
		}
		assert.Equal(t, unmasked, count)
	}
}
