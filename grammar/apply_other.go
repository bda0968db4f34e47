//go:build !amd64 || purego

package grammar

// vectorMask reports whether maskVector blends with vector instructions here.
const vectorMask = false

// maskVector has no vector form here: applyAllowed does every word.
func maskVector([]float32, []uint64) int { return 0 }
