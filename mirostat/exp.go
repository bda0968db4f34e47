package mirostat

import "math"

// The exponential is the cost of a softmax over a large vocabulary, so the
// normalizer uses its own: x = (1024n + j)·ln2/1024 + r with |r| <= ln2/2048,
// and e^x = 2^n · 2^(j/1024) · e^r, with e^r from its degree-3 Taylor
// polynomial (truncation below r^4/4! < 6e-16) and 2^(j/1024) from an 8 KiB
// table; ln2/1024 is split in two so that the reduction is exact. The
// result is within a few ulps of math.Exp.
const (
	expTableBits = 10
	expTableSize = 1 << expTableBits
	expInvStep   = expTableSize / math.Ln2
	expStepHi    = 6.93147180369123816490e-01 / expTableSize // 32 significant bits: z*expStepHi is exact
	expStepLo    = 1.90821492927058770002e-10 / expTableSize
	expShifter   = 0x1.8p52 // adding it rounds to an integer held in the low mantissa bits
	// expFloor is the smallest argument of expFast. The normalizer clamps
	// to it: a term below e^-700 cannot change a sum that includes e^0.
	expFloor = -700
)

// expTable[j] holds the bits of 2^(j/1024).
var expTable = func() (t [expTableSize]uint64) {
	for j := range t {
		t[j] = math.Float64bits(math.Exp2(float64(j) / expTableSize))
	}
	return t
}()

// expFast returns e^x for x in [expFloor, 0]; NaN propagates. It is small
// enough to inline.
func expFast(x float64) float64 {
	z := x*expInvStep + expShifter
	n := int64(math.Float64bits(z) - math.Float64bits(expShifter))
	z -= expShifter
	r := x - z*expStepHi - z*expStepLo
	scale := math.Float64frombits(expTable[n&(expTableSize-1)] + uint64(n>>expTableBits)<<52)
	return scale * (1 + r*(1+r*(1.0/2+r*(1.0/6))))
}

// expNonPositive returns e^x for any x <= 0.
func expNonPositive(x float64) float64 {
	if x < expFloor {
		return math.Exp(x)
	}
	return expFast(x)
}

// The normalizer's terms need less than expFast's accuracy: its sum, and
// the histogram built from its terms, allow 1e-12 relative (see
// histogram). expTermBits spends fewer instructions: x·1024/ln2 = k + f
// with k an integer and |f| <= 1/2 (the rounding of the product costs at
// most 2^-33 in f at x = expFloor, 8e-14 relative, and 5e-15 above -45), and
// e^x = 2^(k/1024) · e^(f·ln2/1024), the second factor from its degree-3
// Taylor polynomial in f. The bits of k + 0x1.8p52 are those of 0x1.8p52,
// whose low 22 bits are zero, plus k, so that expTermTable[k mod 1024] +
// those bits << 42 are the bits of 2^(k/1024): the shift moves k's high part
// into the exponent (and 0x1.8p52's out) and the table entry cancels the
// low part it drags along.
const (
	expTermC1 = math.Ln2 / expTableSize
	expTermC2 = expTermC1 * expTermC1 / 2
	expTermC3 = expTermC1 * expTermC1 * expTermC1 / 6
)

// expTermTable[j] holds the bits of 2^(j/1024) less j<<42.
var expTermTable = func() (t [expTableSize]uint64) {
	for j := range t {
		t[j] = expTable[j] - uint64(j)<<42
	}
	return t
}()

// expTermBits returns e^x within 1e-13 relative for x in [expFloor, 0],
// and k + 0x1.8p52's bits, from which bandOf finds x's band; NaN
// propagates. It is small enough to inline. The conversions keep a compiler
// that fuses multiply-adds from fusing them differently in different
// callers: the normalizer and the histogram must add the same terms.
func expTermBits(x float64) (float64, uint64) {
	u := float64(x * expInvStep)
	k := u + expShifter
	b := math.Float64bits(k)
	f := u - (k - expShifter)
	scale := math.Float64frombits(expTermTable[b&(expTableSize-1)] + b<<42)
	return scale * (1 + float64(f*(expTermC1+float64(f*(expTermC2+float64(f*expTermC3)))))), b
}

// expTermVars holds expTermBits' constants for loops that write it out:
// read from a variable, they stay in registers, where the compiler would
// load each constant from memory for every token.
var expTermVars = [...]float64{expInvStep, expShifter, 1, expTermC1, expTermC2, expTermC3}
