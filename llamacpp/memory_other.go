//go:build !linux

package llamacpp

// AvailableMemory returns the bytes this process can still allocate, and
// whether that is known: outside Linux it is not, and no allocation is
// refused in advance.
func AvailableMemory() (uint64, bool) { return 0, false }
