package llamacpp

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/llamaloop/llamaloop/cgo"
)

// MemoryError is an allocation refused before it was tried, because it
// cannot fit in the memory available now (see AvailableMemory). It wraps
// ErrNoMemory. A program that sets the parameter from an option of its own
// can name that option in its message from the fields.
type MemoryError struct {
	// Param is the parameter that sized the allocation, with its value:
	// "ContextSize 16777216", "MicroBatchSize 512 with ContextSize 4096",
	// "NewBatch capacity 1000000 with 4 sequences per token".
	Param string
	// Need is the estimated size in bytes; Available what could be had.
	Need, Available uint64
	// Detail says what the bytes are for: "of KV cache (f16 keys, f16
	// values, 32 layers)".
	Detail string
}

// Error returns "llamacpp: not enough memory: PARAM needs SIZE DETAIL; SIZE available".
func (e *MemoryError) Error() string {
	return fmt.Sprintf("%v: %s needs %s; %s available", ErrNoMemory, e.Param, e.Needs(), FormatBytes(e.Available))
}

// Needs returns the size and what it is for: "25.8 GB of KV cache (...)".
func (e *MemoryError) Needs() string { return strings.TrimSpace(FormatBytes(e.Need) + " " + e.Detail) }

// Unwrap returns ErrNoMemory.
func (e *MemoryError) Unwrap() error { return ErrNoMemory }

// checkMemory refuses an allocation of need bytes that cannot fit in the
// memory available now with a *MemoryError. Where the available memory is
// unknown it allows everything.
func checkMemory(need uint64, param, detail string) error {
	avail, ok := AvailableMemory()
	if !ok || need <= avail {
		return nil
	}
	return &MemoryError{Param: param, Need: need, Available: avail, Detail: detail}
}

// FormatBytes writes n in decimal units with three significant digits.
func FormatBytes(n uint64) string {
	const k = 1000
	switch {
	case n >= k*k*k:
		return fmt.Sprintf("%.3g GB", float64(n)/(k*k*k))
	case n >= k*k:
		return fmt.Sprintf("%.3g MB", float64(n)/(k*k))
	case n >= k:
		return fmt.Sprintf("%.3g kB", float64(n)/k)
	}
	return fmt.Sprintf("%d bytes", n)
}

// nativeMemory accounts the C memory llamaloop's models and contexts hold,
// so that the memory of forgotten objects comes back: their cleanups run
// only after a garbage collection, which the Go heap alone (a few hundred
// bytes per object) would not start for gigabytes of C memory.
var nativeMemory struct {
	live atomic.Int64
	// live at the last collection this accounting forced
	atGC atomic.Int64
}

// minGCGrowth is the least growth of native memory that forces a
// collection: below it a forgotten object costs little, and a program that
// opens and closes small contexts in a loop never pays for a collection.
const minGCGrowth = 256 << 20

// NativeMemory is the number of bytes of C memory held by the models and
// contexts that are open or forgotten but not yet collected, as llamaloop
// estimates them (weights, KV caches, output and compute buffers).
func NativeMemory() int64 { return nativeMemory.live.Load() }

// nativeAlloc records n bytes of new C memory. When native memory has grown
// by as much again as it held at the last forced collection (and by at least
// minGCGrowth), it collects garbage so the cleanups of forgotten models and
// contexts free theirs.
func nativeAlloc(n int64) {
	live := nativeMemory.live.Add(n)
	at := nativeMemory.atGC.Load()
	if live-at > max(at, minGCGrowth) && nativeMemory.atGC.CompareAndSwap(at, live) {
		runtime.GC()
	}
}

// nativeFree records that n bytes of C memory were freed, and hands the C
// heap's free pages back to the system: glibc keeps freed memory for reuse,
// and the mostly large, differently sized buffers of models and contexts
// are rarely reused, so without this a loop of loads grows the process.
func nativeFree(n int64) {
	live := nativeMemory.live.Add(-n)
	for {
		at := nativeMemory.atGC.Load()
		if at <= live || nativeMemory.atGC.CompareAndSwap(at, live) {
			break
		}
	}
	cgo.MallocTrim()
}
