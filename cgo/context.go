package cgo

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"
)

// ContextParams are the fields of llama_context_params that llamaloop sets;
// the others keep llama_context_default_params' values.
type ContextParams struct {
	NCtx, NBatch, NUbatch, NSeqMax uint32
	NThreads, NThreadsBatch        int32
	FlashAttn                      int32 // -1 auto, 0 off, 1 on
	TypeK, TypeV                   int32 // ggml_type; -1 keeps the default
	KVUnified                      bool
	OffloadKQV                     bool
	NoPerf                         bool
	// Embeddings makes the context extract embeddings (pooled as
	// PoolingType says: -1 the model's, else llama_pooling_type).
	Embeddings  bool
	PoolingType int32
}

// DefaultContextParams reads llama_context_default_params.
func DefaultContextParams() ContextParams {
	p := C.llama_context_default_params()
	return ContextParams{NCtx: uint32(p.n_ctx), NBatch: uint32(p.n_batch), NUbatch: uint32(p.n_ubatch),
		NSeqMax: uint32(p.n_seq_max), NThreads: int32(p.n_threads), NThreadsBatch: int32(p.n_threads_batch),
		FlashAttn: int32(p.flash_attn_type), TypeK: int32(p.type_k), TypeV: int32(p.type_v),
		KVUnified: bool(p.kv_unified), OffloadKQV: bool(p.offload_kqv), NoPerf: bool(p.no_perf),
		Embeddings: bool(p.embeddings), PoolingType: int32(p.pooling_type)}
}

// Context is a struct llama_context pointer.
type Context struct{ c *C.struct_llama_context }

// Nil reports whether ctx is NULL.
func (ctx Context) Nil() bool { return ctx.c == nil }

// InitFromModel is llama_init_from_model, with backend frees on its failure
// path deferred like Free's.
func InitFromModel(m Model, cp ContextParams) Context {
	p := C.llama_context_default_params()
	p.n_ctx = C.uint32_t(cp.NCtx)
	p.n_batch = C.uint32_t(cp.NBatch)
	p.n_ubatch = C.uint32_t(cp.NUbatch)
	p.n_seq_max = C.uint32_t(cp.NSeqMax)
	p.n_threads = C.int32_t(cp.NThreads)
	p.n_threads_batch = C.int32_t(cp.NThreadsBatch)
	p.flash_attn_type = C.enum_llama_flash_attn_type(cp.FlashAttn)
	if cp.TypeK >= 0 {
		p.type_k = C.enum_ggml_type(cp.TypeK)
	}
	if cp.TypeV >= 0 {
		p.type_v = C.enum_ggml_type(cp.TypeV)
	}
	p.kv_unified = C.bool(cp.KVUnified)
	p.offload_kqv = C.bool(cp.OffloadKQV)
	p.no_perf = C.bool(cp.NoPerf)
	p.embeddings = C.bool(cp.Embeddings)
	p.pooling_type = C.enum_llama_pooling_type(cp.PoolingType)
	return Context{C.llamaloop_init_from_model(m.c, p)}
}

// Free is llama_free, with the context's backends freed after its scheduler
// (see llamaloop_free in shim.h).
func (ctx Context) Free() { C.llamaloop_free(ctx.c) }

// DeferredBackendFrees is how many backend frees the last Free or
// InitFromModel on this OS thread deferred until llama.cpp returned: one per
// backend of the context when the link-time wrap of ggml_backend_free works.
// Call it with the goroutine locked to its thread.
func DeferredBackendFrees() int { return int(C.llamaloop_deferred_backend_frees()) }

// NCtx is llama_n_ctx.
func (ctx Context) NCtx() int { return int(C.llama_n_ctx(ctx.c)) }

// NCtxSeq is llama_n_ctx_seq.
func (ctx Context) NCtxSeq() int { return int(C.llama_n_ctx_seq(ctx.c)) }

// NBatch is llama_n_batch.
func (ctx Context) NBatch() int { return int(C.llama_n_batch(ctx.c)) }

// NUbatch is llama_n_ubatch.
func (ctx Context) NUbatch() int { return int(C.llama_n_ubatch(ctx.c)) }

// NSeqMax is llama_n_seq_max.
func (ctx Context) NSeqMax() int { return int(C.llama_n_seq_max(ctx.c)) }

// SetNThreads is llama_set_n_threads.
func (ctx Context) SetNThreads(n, nBatch int) {
	C.llama_set_n_threads(ctx.c, C.int32_t(n), C.int32_t(nBatch))
}

// NThreads is llama_n_threads.
func (ctx Context) NThreads() int { return int(C.llama_n_threads(ctx.c)) }

// NThreadsBatch is llama_n_threads_batch.
func (ctx Context) NThreadsBatch() int { return int(C.llama_n_threads_batch(ctx.c)) }

// AttachThreadpool is llama_attach_threadpool: single-token decodes run on
// tp, multi-token batches on batch (tp when batch is the zero Threadpool).
func (ctx Context) AttachThreadpool(tp, batch Threadpool) {
	C.llama_attach_threadpool(ctx.c, tp.c, batch.c)
}

// SetAbortFlag installs an abort callback that returns true while *flag is
// non-zero; flag must point to C memory that outlives the context (nil
// removes the callback).
func (ctx Context) SetAbortFlag(flag *int32) {
	C.llamaloop_set_abort_flag(ctx.c, (*C.int32_t)(unsafe.Pointer(flag)))
}

// Decode is llama_decode.
func (ctx Context) Decode(b *Batch) int32 { return int32(C.llama_decode(ctx.c, b.c)) }

// SetCausalAttn is llama_set_causal_attn: whether the next decodes mask
// the attention to later positions.
func (ctx Context) SetCausalAttn(causal bool) { C.llama_set_causal_attn(ctx.c, C.bool(causal)) }

// LogitsIth is llama_get_logits_ith: a pointer into the context's buffer, or nil.
func (ctx Context) LogitsIth(i int) *float32 {
	return (*float32)(unsafe.Pointer(C.llama_get_logits_ith(ctx.c, C.int32_t(i))))
}

// Synchronize is llama_synchronize.
func (ctx Context) Synchronize() { C.llama_synchronize(ctx.c) }

// PerfData is struct llama_perf_context_data.
type PerfData struct {
	StartMs, LoadMs, PromptEvalMs, EvalMs float64
	NPromptEval, NEval, NReused           int32
}

// Perf is llama_perf_context.
func (ctx Context) Perf() PerfData {
	d := C.llama_perf_context(ctx.c)
	return PerfData{float64(d.t_start_ms), float64(d.t_load_ms), float64(d.t_p_eval_ms), float64(d.t_eval_ms),
		int32(d.n_p_eval), int32(d.n_eval), int32(d.n_reused)}
}

// PerfReset is llama_perf_context_reset.
func (ctx Context) PerfReset() { C.llama_perf_context_reset(ctx.c) }
