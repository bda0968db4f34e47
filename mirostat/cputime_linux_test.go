package mirostat

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// threadCPU returns the CPU time this OS thread has used. On a shared
// machine wall-clock ns/op counts the time other processes hold the core;
// cpu-ns/op does not.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuLoop runs f b.N times on one locked thread and reports cpu-ns/op.
func cpuLoop(b *testing.B, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	for b.Loop() {
		f()
	}
	if b.N > 0 {
		b.ReportMetric(float64(threadCPU()-start)/float64(b.N), "cpu-ns/op")
	}
}
