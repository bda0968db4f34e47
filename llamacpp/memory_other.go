//go:build !linux

package llamacpp

// availableMemory is unknown outside Linux: no allocation is refused in
// advance there.
func availableMemory() (uint64, bool) { return 0, false }
