package cgo

/*
#include "shim.h"
*/
import "C"

// Threadpool is a struct ggml_threadpool pointer: a set of ggml CPU worker
// threads that live until Free, instead of the threads ggml otherwise
// starts and joins for every graph it computes.
type Threadpool struct {
	c    *C.struct_ggml_threadpool
	free C.llamaloop_threadpool_free_fn
}

// Nil reports whether tp is NULL.
func (tp Threadpool) Nil() bool { return tp.c == nil }

// ThreadpoolNew is ggml_threadpool_new with ggml_threadpool_params_default's
// parameters for nThreads threads (no CPU mask, normal priority, poll 50:
// the workers spin between graphs, for up to 1024*128*poll pauses, before
// they sleep), poll replaced by the given level when it is 0 to 100. It
// starts nThreads-1 threads: the thread that computes a graph is the pool's
// first.
//
// The pool comes from the CPU backend llama.cpp computes with (the first CPU
// device, through its registry's ggml_threadpool_new): a CPU variant loaded
// from a library (libggml-cpu-icelake.so) ranks before the built-in backend,
// and its workers must run its own kernels, not the built-in ones.
func ThreadpoolNew(nThreads, poll int) Threadpool {
	p := C.ggml_threadpool_params_default(C.int(nThreads))
	if poll >= 0 && poll <= 100 {
		p.poll = C.uint32_t(poll)
	}
	var free C.llamaloop_threadpool_free_fn
	c := C.llamaloop_threadpool_new(&p, &free)
	return Threadpool{c, free}
}

// Free is ggml_threadpool_free of the backend that made the pool: it stops
// and joins the workers.
func (tp Threadpool) Free() { C.llamaloop_threadpool_free(tp.free, tp.c) }
