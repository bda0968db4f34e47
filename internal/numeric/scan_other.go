//go:build !amd64 || purego

package numeric

// hasAVX2 reports whether the vector loops run here: never, so the AVX2
// functions below are never called. (A variable, as on amd64, so that the
// tests can switch the vector loops off on either.)
var hasAVX2 = false

// scanLen is how many of n scores the vector loops take: none here.
func scanLen(int) int { return 0 }

func maxAVX2(*float32, int) (float32, int, bool)            { panic("numeric: no vector scan") }
func firstAtLeastAVX2(*float32, int, float32) int           { panic("numeric: no vector scan") }
func maskBelowAVX2(*float32, int, float32) int              { panic("numeric: no vector scan") }
func firstNotBelowAVX2(*float32, int, float32) int          { panic("numeric: no vector scan") }
func firstAboveSumAVX2(*float32, int, float32, float32) int { panic("numeric: no vector scan") }
func shiftAVX2(*float32, *float32, int, float32, float32)   { panic("numeric: no vector scan") }
