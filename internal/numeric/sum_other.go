//go:build !amd64 || purego

package numeric

// addLanes is addLanesGo: no vector loop on this architecture.
func addLanes(l *lanes, block []float32, m float64) int { return addLanesGo(l, block, m) }
