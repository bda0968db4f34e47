//go:build !amd64 || purego

package numeric

// scanVector reports whether the scans compare with vector instructions
// here: never, so the AVX2 functions below are never called.
var scanVector = false

// maxBlock is the length of maxAVX2's blocks.
const maxBlock = 256

// scanLen is how many of n scores the vector loops take: none here.
func scanLen(int) int { return 0 }

func maxAVX2(*float32, int) (float32, int, bool)            { panic("numeric: no vector scan") }
func firstAtLeastAVX2(*float32, int, float32) int           { panic("numeric: no vector scan") }
func maskBelowAVX2(*float32, int, float32) int              { panic("numeric: no vector scan") }
func firstAboveSumAVX2(*float32, int, float32, float32) int { panic("numeric: no vector scan") }
