package mirostat

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// expNonPositive against math.Exp: within a few ulps (1e-15 relative).
func TestExpNonPositiveAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 1_000_000 {
		x := -r.Float64() * 40
		if i%4 == 0 {
			x = -r.Float64() * 745
		}
		want := math.Exp(x)
		got := expNonPositive(x)
		if want == 0 {
			assert.Zero(t, got)
			continue
		}
		if rel := math.Abs(got-want) / want; rel > 1e-15 {
			t.Fatalf("exp(%v) = %v, want %v (rel %g)", x, got, want, rel)
		}
	}
	assert.Equal(t, 1.0, expNonPositive(0))
	assert.Equal(t, 1.0, expNonPositive(math.Copysign(0, -1)))
	assert.Zero(t, expNonPositive(math.Inf(-1)))
	assert.True(t, math.IsNaN(expNonPositive(math.NaN())))
	assert.True(t, math.IsNaN(expFast(math.NaN())))
}

// ln is right where math.Log on amd64 is not (golang/go#56600).
func TestLnSubnormal(t *testing.T) {
	assert.InDelta(t, -744.4400719213812, ln(5e-324), 1e-12)
	assert.InDelta(t, math.Log(2.61773395118493)-310*math.Ln10, ln(2.61773395118493e-310), 1e-12)
	assert.Equal(t, math.Log(0.3), ln(0.3))
}
