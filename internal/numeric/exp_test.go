package numeric

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// Term against math.Exp over [ExpFloor, 0]: within 1e-15 relative, 3 ulps (6.3e-16 measured,
// logged; math.Exp is itself within an ulp), densest where the reduction's intervals meet
// (d = (k + 1/2)·ln2) and at the extremes.
func TestTermAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	worst, at := 0.0, 0.0
	check := func(d float64) {
		want := math.Exp(d)
		got := Term(d)
		if rel := math.Abs(got-want) / want; rel > worst {
			worst, at = rel, d
		}
	}
	for i := range 4_000_000 {
		switch i % 4 {
		case 0:
			check(-r.Float64() * -ExpFloor)
		case 1:
			check(-r.Float64() * 45)
		case 2: // where r is near ±ln2/2
			k := float64(r.IntN(1010))
			check(-(k+0.5)*math.Ln2 + (r.Float64()-0.5)*1e-6)
		default:
			check(-r.Float64() * 1e-3)
		}
	}
	for _, d := range []float64{ExpFloor, -1e-300, -math.Ln2 / 2, -math.Ln2, -1} {
		check(d)
	}
	t.Logf("largest relative error %.3g at %v", worst, at)
	assert.Less(t, worst, 1e-15)
	assert.Equal(t, 1.0, Term(0))
	assert.Equal(t, 1.0, Term(math.Copysign(0, -1)))
	assert.Equal(t, 0.5, Term(-math.Ln2), "k = -1, r rounds to 0")
	assert.Equal(t, Term(ExpFloor), Term(-1e6), "clamped below the floor")
	assert.Equal(t, Term(ExpFloor), Term(math.Nextafter(ExpFloor, math.Inf(-1))))
	assert.Zero(t, Term(math.Inf(-1)))
	assert.True(t, math.IsNaN(Term(math.NaN())))
}

// expTerm step by step in big.Float's exact arithmetic, each fused multiply-add rounded once:
// the Go formula is what the documentation says, so that a vector loop copying it copies the
// definition.
func TestTermIsItsDefinition(t *testing.T) {
	fma := func(a, b, c float64) float64 {
		x := new(big.Float).SetPrec(2000).SetFloat64(a)
		x.Mul(x, new(big.Float).SetPrec(2000).SetFloat64(b))
		x.Add(x, new(big.Float).SetPrec(2000).SetFloat64(c))
		f, _ := x.Float64()
		return f
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		d := -r.Float64() * -ExpFloor
		z := fma(d, 1/math.Ln2, ExpShifter)
		kf := z - ExpShifter
		rr := fma(kf, -termLn2Lo, fma(kf, -termLn2Hi, d))
		r2 := rr * rr
		even, odd := termPoly[0], termPoly[1]
		for i := 2; i < len(termPoly); i += 2 {
			even, odd = fma(even, r2, termPoly[i]), fma(odd, r2, termPoly[i+1])
		}
		p := fma(odd, rr, fma(even, r2, 1))
		k := int(kf)
		want := math.Ldexp(p, k)
		require.Equal(t, want, Term(d), "d=%v", d)
	}
}
