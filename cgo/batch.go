package cgo

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"
)

// Batch is a struct llama_batch allocated by llama_batch_init.
type Batch struct{ c C.struct_llama_batch }

// BatchInit is llama_batch_init for tokens (not embeddings), with every
// allocation checked: it returns nil when one fails (llama_batch_init would
// write through the NULL it got).
func BatchInit(nTokens, nSeqMax int) *Batch {
	var ok C.bool
	b := C.llamaloop_batch_init(C.int32_t(nTokens), C.int32_t(nSeqMax), &ok)
	if !ok {
		return nil
	}
	return &Batch{b}
}

// Free is llama_batch_free.
func (b *Batch) Free() { C.llama_batch_free(b.c) }

// SetNTokens sets batch.n_tokens.
func (b *Batch) SetNTokens(n int) { b.c.n_tokens = C.int32_t(n) }

// NTokens reads batch.n_tokens.
func (b *Batch) NTokens() int { return int(b.c.n_tokens) }

// Views returns Go slices over the batch's C arrays of the given capacity.
func (b *Batch) Views(capacity int) (tokens, pos, nSeqID []int32, seqIDs []*int32, outputs []int8) {
	tokens = unsafe.Slice((*int32)(unsafe.Pointer(b.c.token)), capacity)
	pos = unsafe.Slice((*int32)(unsafe.Pointer(b.c.pos)), capacity)
	nSeqID = unsafe.Slice((*int32)(unsafe.Pointer(b.c.n_seq_id)), capacity)
	seqIDs = unsafe.Slice((**int32)(unsafe.Pointer(b.c.seq_id)), capacity)
	outputs = unsafe.Slice((*int8)(unsafe.Pointer(b.c.logits)), capacity)
	return
}
