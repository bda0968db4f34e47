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
	// so that the sum's low bits hold that integer (mirostat's bands take theirs this way too).
	ExpShifter = 0x1.8p52
	// ExpFloor is the smallest argument of the table's fast path and of [Term]'s formula. Below
	// it [Exp] defers to math.Exp (the subnormal results) and [Term] clamps.
	ExpFloor = -700

	expInvStep = ExpTableSize / math.Ln2
	expStepHi  = 6.93147180369123816490e-01 / ExpTableSize // 32 significant bits: z*expStepHi is exact
	expStepLo  = 1.90821492927058770002e-10 / ExpTableSize
)

// expTable[j] holds the bits of 2^(j/1024).
var expTable = func() (t [ExpTableSize]uint64) {
	for j := range t {
		t[j] = math.Float64bits(math.Exp2(float64(j) / ExpTableSize))
	}
	return t
}()

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

// The normalizer's term: e^d = 2^k · e^r with k = round(d/ln2) and r = d - k·ln2, |r| <= ln2/2,
// e^r by a polynomial of degree 10, its even and odd halves in Horner's form in r², every step a
// fused multiply-add (math.FMA, rounded once, as VFMADD is) but r² itself, and 2^k added to the
// exponent bits (the halves are two short chains instead of one long one: 6% faster). There is
// no table: a vector loop computes a term with a score of instructions and no gather, and the
// same operations in the same order give the same bits in Go, with AVX2 and with AVX-512.
const (
	termInvLn2 = 1 / math.Ln2
	termLn2Hi  = 0x1.62e42fefa39efp-1 // ln2 rounded to float64
	termLn2Lo  = 0x1.abc9e3b39803fp-56
)

// termPoly holds the polynomial's coefficients c10 ... c1 (c0 is 1): the relative minimax
// approximation of e^r on [-ln2/2, ln2/2] with p(0) = 1 (Remez exchange in 60 digits, then rounded
// to float64). Its truncation error is 3.0e-16; with the rounding of the steps a term is within
// 1e-15 of e^d (6.6e-16 measured against math.Exp by TestTermAccuracy), where the table term it
// replaced was within 1e-13.
var termPoly = [...]float64{
	0x1.2a475a39abcc1p-22, 0x1.730bd56d1f843p-19, 0x1.a017fb60512c8p-16, 0x1.a01967c4f344cp-13,
	0x1.6c16c20da9497p-10, 0x1.11111133719c1p-7, 0x1.555555552f91ap-5, 0x1.5555555548c99p-3,
	0x1.000000000004bp-1, 0x1.0000000000029p+0,
}

// termVars holds termInvLn2, ExpShifter, -termLn2Hi, -termLn2Lo, 1 and the coefficients c10 ...
// c1 for loops that write [Term] out: read from a variable, they stay in registers.
var termVars = [...]float64{termInvLn2, ExpShifter, -termLn2Hi, -termLn2Lo, 1,
	termPoly[0], termPoly[1], termPoly[2], termPoly[3], termPoly[4],
	termPoly[5], termPoly[6], termPoly[7], termPoly[8], termPoly[9]}

// expTerm is Term's formula for d >= ExpFloor. For d in [ExpFloor, 0] 2^k·p is a normal number
// (k >= -1010), so adding k to the exponent bits is exact.
func expTerm(d float64) float64 {
	z := math.FMA(d, termInvLn2, ExpShifter) // k + ExpShifter: k in its low bits
	kf := z - ExpShifter
	r := math.FMA(kf, -termLn2Hi, d)
	r = math.FMA(kf, -termLn2Lo, r)
	r2 := float64(r * r)
	c := &termPoly
	even := math.FMA(math.FMA(math.FMA(math.FMA(math.FMA(c[0], r2, c[2]), r2, c[4]), r2, c[6]), r2, c[8]), r2, 1)
	odd := math.FMA(math.FMA(math.FMA(math.FMA(c[1], r2, c[3]), r2, c[5]), r2, c[7]), r2, c[9])
	p := math.FMA(odd, r, even)
	return math.Float64frombits(math.Float64bits(p) + math.Float64bits(z)<<52)
}

// clampedTerm is Term's value below ExpFloor.
var clampedTerm = expTerm(ExpFloor)

// Term is the normalizer's term e^d for d <= 0, within 1e-15 relative of math.Exp for d in
// [ExpFloor, 0] (see termPoly); 0 for d = -Inf and e^ExpFloor for any other d below ExpFloor: a
// term below e^-700 cannot change a sum that includes e^0. NaN propagates. Term(0) is 1.
func Term(d float64) float64 {
	if !(d >= ExpFloor) { // below the floor, -Inf, or NaN
		switch {
		case d != d:
			return d
		case math.IsInf(d, -1):
			return 0
		}
		return clampedTerm
	}
	return expTerm(d)
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
