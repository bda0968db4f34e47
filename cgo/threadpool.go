package cgo

/*
#include "shim.h"
*/
import "C"

// Threadpool is a struct ggml_threadpool pointer: a set of ggml CPU worker
// threads that live until Free, instead of the threads ggml otherwise
// starts and joins for every graph it computes.
type Threadpool struct{ c *C.struct_ggml_threadpool }

// Nil reports whether tp is NULL.
func (tp Threadpool) Nil() bool { return tp.c == nil }

// ThreadpoolNew is ggml_threadpool_new with ggml_threadpool_params_default's
// parameters for nThreads threads (no CPU mask, normal priority, poll 50:
// the workers spin briefly between graphs before they sleep). It starts
// nThreads-1 threads: the thread that computes a graph is the pool's first.
func ThreadpoolNew(nThreads int) Threadpool {
	p := C.ggml_threadpool_params_default(C.int(nThreads))
	return Threadpool{C.ggml_threadpool_new(&p)}
}

// Free is ggml_threadpool_free: it stops and joins the workers.
func (tp Threadpool) Free() { C.ggml_threadpool_free(tp.c) }
