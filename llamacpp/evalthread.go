package llamacpp

import (
	"runtime"
	"strings"
	"sync"

	"github.com/llamaloop/llamaloop/cgo"
)

// evalThread is the one OS thread that runs a context's evaluations when
// ggml's CPU backend was built with OpenMP (llama.cpp's CMake default; the
// pinned module's cgo build is not). OpenMP keeps a team of worker threads
// for each thread that starts a parallel region, and Go runs successive
// cgo calls of one goroutine on whichever OS thread is free: each new
// calling thread started a team of its own, whose workers kept spinning
// beside the team of the next call. llamaloop built on llama.cpp master
// generated at 0.57-0.59 of llama-bench's tg32 that way, and at 0.98-1.03
// with every decode on one thread (bench-small-q4_K_M, 2 threads, AMD
// EPYC; docs/measurements.md).
type evalThread struct {
	calls chan evalCall
	rcs   chan int32
}

// evalCall is one llama_decode (or llama_encode) of a batch.
type evalCall struct {
	b      *Batch
	encode bool
}

// run evaluates the call on the current thread and returns llama.cpp's
// result code.
func (e evalCall) run(c cgo.Context) int32 {
	switch {
	case e.encode:
		return c.Encode(e.b.c)
	case e.b.embd.used && e.b.embd.mrope:
		return c.DecodeEmbdPos(e.b.c, (*float32)(e.b.embd.c), (*int32)(e.b.embd.cpos))
	case e.b.embd.used:
		return c.DecodeEmbd(e.b.c, (*float32)(e.b.embd.c))
	default:
		return c.Decode(e.b.c)
	}
}

// startEvalThread starts the thread evaluating on c. It holds no
// reference to the Context, so a forgotten Context is still collected
// (its cleanup stops the thread).
func startEvalThread(c cgo.Context) *evalThread {
	t := &evalThread{calls: make(chan evalCall), rcs: make(chan int32)}
	go func() {
		// Never unlocked: the thread ends with the goroutine, and OpenMP's
		// team with it.
		runtime.LockOSThread()
		for call := range t.calls {
			t.rcs <- call.run(c)
		}
	}()
	return t
}

// eval runs call on the thread, or on the caller's when t is nil.
func (t *evalThread) eval(c cgo.Context, call evalCall) int32 {
	if t == nil {
		return call.run(c)
	}
	t.calls <- call
	return <-t.rcs
}

// stop ends the thread; nothing may be evaluated on it afterwards.
func (t *evalThread) stop() {
	if t != nil {
		close(t.calls)
	}
}

// forceEvalThread makes every new context evaluate on a thread of its own
// even without OpenMP (tests of the pinned engine use it).
var forceEvalThread bool

// cpuUsesOpenMP reports whether llama.cpp's CPU backend runs its graphs
// with OpenMP (its system information lists "OPENMP = 1").
var cpuUsesOpenMP = sync.OnceValue(func() bool {
	return strings.Contains(cgo.SystemInfo(), "OPENMP = 1")
})
