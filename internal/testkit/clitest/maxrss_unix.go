//go:build unix

package clitest

import (
	"os"
	"syscall"
)

// maxRSS is the peak resident memory of the ended process ps in KiB.
func maxRSS(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return int64(ru.Maxrss) // KiB on Linux
	}
	return 0
}
