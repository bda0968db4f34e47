package cgo

/*
#include "shim.h"
*/
import "C"

// MemoryClear is llama_memory_clear.
func (ctx Context) MemoryClear(data bool) {
	C.llama_memory_clear(C.llama_get_memory(ctx.c), C.bool(data))
}

// SeqRm is llama_memory_seq_rm.
func (ctx Context) SeqRm(seq, p0, p1 int32) bool {
	return bool(C.llama_memory_seq_rm(C.llama_get_memory(ctx.c), C.llama_seq_id(seq), C.llama_pos(p0), C.llama_pos(p1)))
}

// SeqCp is llama_memory_seq_cp.
func (ctx Context) SeqCp(src, dst, p0, p1 int32) {
	C.llama_memory_seq_cp(C.llama_get_memory(ctx.c), C.llama_seq_id(src), C.llama_seq_id(dst), C.llama_pos(p0), C.llama_pos(p1))
}

// SeqKeep is llama_memory_seq_keep.
func (ctx Context) SeqKeep(seq int32) {
	C.llama_memory_seq_keep(C.llama_get_memory(ctx.c), C.llama_seq_id(seq))
}

// SeqAdd is llama_memory_seq_add.
func (ctx Context) SeqAdd(seq, p0, p1, delta int32) {
	C.llama_memory_seq_add(C.llama_get_memory(ctx.c), C.llama_seq_id(seq), C.llama_pos(p0), C.llama_pos(p1), C.llama_pos(delta))
}

// SeqDiv is llama_memory_seq_div.
func (ctx Context) SeqDiv(seq, p0, p1, d int32) {
	C.llama_memory_seq_div(C.llama_get_memory(ctx.c), C.llama_seq_id(seq), C.llama_pos(p0), C.llama_pos(p1), C.int(d))
}

// SeqPosMin is llama_memory_seq_pos_min.
func (ctx Context) SeqPosMin(seq int32) int32 {
	return int32(C.llama_memory_seq_pos_min(C.llama_get_memory(ctx.c), C.llama_seq_id(seq)))
}

// SeqPosMax is llama_memory_seq_pos_max.
func (ctx Context) SeqPosMax(seq int32) int32 {
	return int32(C.llama_memory_seq_pos_max(C.llama_get_memory(ctx.c), C.llama_seq_id(seq)))
}

// CanShift is llama_memory_can_shift.
func (ctx Context) CanShift() bool { return bool(C.llama_memory_can_shift(C.llama_get_memory(ctx.c))) }
