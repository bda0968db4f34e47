//go:build !linux

package cli

// MemoryLimit returns 0: the memory limit is read on Linux only, and the
// commands then leave sizes to llama.cpp's own allocation checks.
func MemoryLimit() uint64 { return 0 }
