package numeric

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Exp against math.Exp: within a few ulps (1e-15 relative) on the fast path, math.Exp itself
// elsewhere.
func TestExpAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 1_000_000 {
		x := -r.Float64() * 40
		if i%4 == 0 {
			x = -r.Float64() * 745
		}
		want := math.Exp(x)
		got := Exp(x)
		if want == 0 {
			assert.Zero(t, got)
			continue
		}
		if rel := math.Abs(got-want) / want; rel > 1e-15 {
			t.Fatalf("Exp(%v) = %v, want %v (rel %g)", x, got, want, rel)
		}
	}
	assert.Equal(t, 1.0, Exp(0))
	assert.Equal(t, 1.0, Exp(math.Copysign(0, -1)))
	assert.Zero(t, Exp(math.Inf(-1)))
	assert.Zero(t, Exp(-800))
	assert.Equal(t, math.Exp(-744), Exp(-744), "subnormal results come from math.Exp")
	assert.Equal(t, math.Exp(1.5), Exp(1.5))
	assert.True(t, math.IsInf(Exp(800), 1))
	assert.True(t, math.IsNaN(Exp(math.NaN())))
}

// ExpTerm against math.Exp: within 1e-13 relative over [ExpFloor, 0], 1e-14 where the terms that
// matter lie.
func TestExpTermAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 1_000_000 {
		x := -r.Float64() * 45
		tol := 1e-14
		if i%4 == 0 {
			x, tol = -r.Float64()*-ExpFloor, 1e-13
		}
		want := math.Exp(x)
		got, _ := ExpTerm(x)
		if rel := math.Abs(got-want) / want; rel > tol {
			t.Fatalf("ExpTerm(%v) = %v, want %v (rel %g)", x, got, want, rel)
		}
	}
	assert.Equal(t, 1.0, Term(0))
	assert.Equal(t, 1.0, Term(math.Copysign(0, -1)))
	assert.InEpsilon(t, math.Exp(ExpFloor), Term(ExpFloor), 1e-13)
	assert.Equal(t, Term(ExpFloor), Term(-1e6), "clamped below the floor")
	assert.Zero(t, Term(math.Inf(-1)))
	assert.True(t, math.IsNaN(Term(math.NaN())))
}

// ExpTerm's bits hold k = round(x·1024/ln2) above ExpShifter's: the band arithmetic of mirostat
// relies on it.
func TestExpTermBits(t *testing.T) {
	for _, x := range []float64{0, -1e-9, -math.Ln2 / 1024, -1, -88.7, -699.9} {
		_, b := ExpTerm(x)
		want := int64(math.RoundToEven(x * ExpTableSize / math.Ln2))
		assert.Equal(t, want, int64(b-math.Float64bits(ExpShifter)), "x=%v", x)
	}
}
