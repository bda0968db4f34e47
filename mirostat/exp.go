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
