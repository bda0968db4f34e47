//go:build !amd64 || purego

package numeric

// shiftVector takes no entries: no vector loop on this architecture.
func shiftVector(dst, src []float32, m, c float32) int { return 0 }
