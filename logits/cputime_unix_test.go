//go:build unix

package logits

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time this process has used. Benchmarks report it per operation
// ("cpu-ns/op") next to the wall time, which a loaded machine inflates.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
