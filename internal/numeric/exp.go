package numeric

import "math"

// The table exponential: x·1024/ln2 = k + f with k an integer, e^x = 2^(k/1024) · e^(f·ln2/1024),
// the first factor from a table of 2^(j/1024) with k's high part added to its exponent bits, the
// second from a short polynomial. ln2/1024 is split in two (fdlibm's ln2_hi and ln2_lo) where the
// reduction must be exact.
const (
	// ExpTableBits is log2 of the table's size.
	ExpTableBits = 10
	// ExpTableSize is the number of entries of the table: 2^(j/1024) for j < 1024.
	ExpTableSize = 1 << ExpTableBits
	// ExpShifter rounds to an integer when added: 1.5·2^52, whose low 22 mantissa bits are zero,
	// so that the sum's low bits hold that integer.
	ExpShifter = 0x1.8p52
	// ExpFloor is the smallest argument of the table's fast path. Below it [Exp] defers to
	// math.Exp (the subnormal results) and [Term] clamps: a term below e^-700 cannot change a sum
	// that includes e^0.
	ExpFloor = -700

	expInvStep = ExpTableSize / math.Ln2
	expStepHi  = 6.93147180369123816490e-01 / ExpTableSize // 32 significant bits: z*expStepHi is exact
	expStepLo  = 1.90821492927058770002e-10 / ExpTableSize
	expTermC1  = math.Ln2 / ExpTableSize
	expTermC2  = expTermC1 * expTermC1 / 2
	expTermC3  = expTermC1 * expTermC1 * expTermC1 / 6
)

// expTable[j] holds the bits of 2^(j/1024).
var expTable = func() (t [ExpTableSize]uint64) {
	for j := range t {
		t[j] = math.Float64bits(math.Exp2(float64(j) / ExpTableSize))
	}
	return t
}()

// ExpTermTable[j] holds the bits of 2^(j/1024) less j<<42: added to the bits of k + ExpShifter
// shifted left by 42, it gives the bits of 2^(k/1024) (the shift moves k's high part into the
// exponent, and ExpShifter's out; the entry cancels the low part it drags along). Only loops that
// write [ExpTerm] out by hand read it.
var ExpTermTable = func() (t [ExpTableSize]uint64) {
	for j := range t {
		t[j] = expTable[j] - uint64(j)<<42
	}
	return t
}()

// ExpTermVars holds ExpTerm's constants for loops that write it out by hand: 1024/ln2,
// ExpShifter, 1 and the polynomial's three coefficients. Read from a variable they stay in
// registers, where the compiler would load each constant from memory for every token.
var ExpTermVars = [...]float64{expInvStep, ExpShifter, 1, expTermC1, expTermC2, expTermC3}

// Exp returns e^x within a few ulps of math.Exp (1e-15 relative), several times faster for x in
// [ExpFloor, 0], the range of a softmax's terms; elsewhere it is math.Exp. NaN propagates. It is
// small enough to inline.
func Exp(x float64) float64 {
	if !(x >= ExpFloor && x <= 0) {
		return math.Exp(x)
	}
	// x = z·ln2/1024 + r, |r| <= ln2/2048; e^r by its degree-3 Taylor polynomial (truncation
	// below r^4/4! < 6e-16).
	z := x*expInvStep + ExpShifter
	n := int64(math.Float64bits(z) - math.Float64bits(ExpShifter))
	z -= ExpShifter
	r := x - z*expStepHi - z*expStepLo
	scale := math.Float64frombits(expTable[n&(ExpTableSize-1)] + uint64(n>>ExpTableBits)<<52)
	return scale * (1 + r*(1+r*(1.0/2+r*(1.0/6))))
}

// ExpTerm returns e^x within 1e-13 relative for x in [ExpFloor, 0] (1e-14 above -45), and the
// bits of k + ExpShifter, k the rounding of x·1024/ln2, from which mirostat finds x's logit band.
// NaN propagates. The rounding of the product costs at most 2^-33 in f at x = ExpFloor, and the
// polynomial in f is of degree 3. The conversions keep a compiler that fuses multiply-adds from
// fusing them differently in different callers: a normalizer and a histogram built from the same
// terms must add the same values.
func ExpTerm(x float64) (float64, uint64) {
	u := float64(x * expInvStep)
	k := u + ExpShifter
	b := math.Float64bits(k)
	f := u - (k - ExpShifter)
	scale := math.Float64frombits(ExpTermTable[b&(ExpTableSize-1)] + b<<42)
	return scale * (1 + float64(f*(expTermC1+float64(f*(expTermC2+float64(f*expTermC3)))))), b
}

// Term is the normalizer's term e^d for d <= 0: [ExpTerm]'s value, 0 for d = -Inf, and e^ExpFloor
// for any other d below ExpFloor. NaN propagates.
func Term(d float64) float64 {
	if d < ExpFloor {
		if math.IsInf(d, -1) {
			return 0
		}
		d = ExpFloor
	}
	e, _ := ExpTerm(d)
	return e
}

// Log is math.Log for x > 0, subnormal x included: on amd64 math.Log returns about -709 for every
// subnormal (golang/go#56600), and weights and probabilities can be subnormal.
func Log(x float64) float64 {
	if x < 0x1p-1022 {
		frac, exp := math.Frexp(x)
		return math.Log(frac) + float64(exp)*math.Ln2
	}
	return math.Log(x)
}
