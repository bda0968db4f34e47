//go:build !linux

package cli

// AvailableMemory returns 0: available memory is read on Linux only, and
// the commands then leave sizes to llama.cpp's own allocation checks.
func AvailableMemory() uint64 { return 0 }
