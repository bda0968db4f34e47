//go:build !linux

package mirostat

import "testing"

// cpuLoop runs f b.N times; cpu-ns/op is reported on Linux only.
func cpuLoop(b *testing.B, f func()) {
	for b.Loop() {
		f()
	}
}
