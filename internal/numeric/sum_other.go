//go:build !amd64 || purego

package numeric

// machineLevel and sumLevel: only the Go loop on this architecture.
var machineLevel, sumLevel = levelGo, levelGo

// addLanes is addLanesGo: no vector loop on this architecture.
func addLanes(l *lanes, block []float32, m float64) int { return addLanesGo(l, block, m) }

// termsVec takes no entries: no vector loop on this architecture.
func termsVec(dst []float64, row []float32, m float64) int { return 0 }
