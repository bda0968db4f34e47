package numeric

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// By hand: (0.5, 0.25, 0.125, 0.125) has running sums 0.5, 0.75, 0.875, 1.
func TestInverseCDFByHand(t *testing.T) {
	p := []float64{0.5, 0.25, 0.125, 0.125}
	for _, tc := range []struct {
		u    float64
		want int
	}{{0, 0}, {0.49, 0}, {0.5, 1}, {0.74, 1}, {0.75, 2}, {0.9, 3}, {math.Nextafter(1, 0), 3}} {
		assert.Equal(t, tc.want, InverseCDF(p, tc.u), "u=%v", tc.u)
	}
	// Unnormalized weights draw the same; zero entries are never drawn.
	assert.Equal(t, 2, InverseCDF([]float64{4, 0, 2, 2}, 0.6))
	assert.Equal(t, 2, InverseCDF([]float64{0, 0, 3, 0}, 0.999))
	assert.Equal(t, 0, InverseCDF([]float64{0, 0}, 0.5))
	assert.Equal(t, 2, LastWithMass([]float64{1, 0, 2, 0}))
}

// Against counting: on a fine grid of u, each index is drawn in proportion to its weight.
func TestInverseCDFDistribution(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	w := make([]float64, 7)
	var total float64
	for i := range w {
		w[i] = r.Float64()
		total += w[i]
	}
	const n = 100000
	counts := make([]int, len(w))
	for i := range n {
		counts[InverseCDF(w, (float64(i)+0.5)/n)]++
	}
	for i := range w {
		assert.InDelta(t, w[i]/total*n, counts[i], 2, "index %d", i)
	}
}

// Log is right where math.Log on amd64 is not (golang/go#56600).
func TestLogSubnormal(t *testing.T) {
	assert.InDelta(t, -744.4400719213812, Log(5e-324), 1e-12)
	assert.InDelta(t, math.Log(2.61773395118493)-310*math.Ln10, Log(2.61773395118493e-310), 1e-12)
	assert.Equal(t, math.Log(0.3), Log(0.3))
}
