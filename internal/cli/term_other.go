//go:build !linux && !darwin

package cli

// IsTerminal reports false: terminal detection is implemented for Linux and
// macOS only, and the commands then behave as when their output is piped.
func IsTerminal(fd uintptr) bool { return false }
