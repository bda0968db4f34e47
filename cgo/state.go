package cgo

/*
#include "shim.h"
*/
import "C"

import "unsafe"

// StateSeqGetSize is llama_state_seq_get_size.
func (ctx Context) StateSeqGetSize(seq int32) int {
	return int(C.llama_state_seq_get_size(ctx.c, C.llama_seq_id(seq)))
}

// StateSeqGetData is llama_state_seq_get_data into dst; it returns the bytes
// written (0 on failure).
func (ctx Context) StateSeqGetData(dst []byte, seq int32) int {
	if len(dst) == 0 {
		return 0
	}
	return int(C.llama_state_seq_get_data(ctx.c, (*C.uint8_t)(unsafe.Pointer(&dst[0])), C.size_t(len(dst)), C.llama_seq_id(seq)))
}

// StateSeqSetData is llama_state_seq_set_data from src; it returns the bytes
// read (0 on failure, after which llama.cpp has emptied seq).
func (ctx Context) StateSeqSetData(src []byte, seq int32) int {
	if len(src) == 0 {
		return 0
	}
	return int(C.llama_state_seq_set_data(ctx.c, (*C.uint8_t)(unsafe.Pointer(&src[0])), C.size_t(len(src)), C.llama_seq_id(seq)))
}
