package cgo

/*
#include "shim.h"
*/
import "C"

import "unsafe"

// NEmbdInp is llama_model_n_embd_inp: the width of an input embedding
// (llama_batch.embd rows).
func (m Model) NEmbdInp() int { return int(C.llama_model_n_embd_inp(m.c)) }

// PoolingType is llama_pooling_type: the context's pooling, resolved from
// the model's when the context parameters left it unspecified.
func (ctx Context) PoolingType() int { return int(C.llama_pooling_type(ctx.c)) }

// EmbeddingsIth is llama_get_embeddings_ith: the embedding row of batch
// index i of the last decode, or nil.
func (ctx Context) EmbeddingsIth(i int) *float32 {
	return (*float32)(unsafe.Pointer(C.llama_get_embeddings_ith(ctx.c, C.int32_t(i))))
}

// EmbeddingsSeq is llama_get_embeddings_seq: the pooled embedding of
// sequence seq of the last decode, or nil.
func (ctx Context) EmbeddingsSeq(seq int32) *float32 {
	return (*float32)(unsafe.Pointer(C.llama_get_embeddings_seq(ctx.c, C.llama_seq_id(seq))))
}

// DecodeEmbd is llama_decode of b with its token array replaced by embd:
// n_tokens rows of the model's input width, in C memory the caller owns
// (llama.cpp decodes a batch of tokens or of embeddings, never both).
func (ctx Context) DecodeEmbd(b *Batch, embd *float32) int32 {
	c := b.c
	c.token = nil
	c.embd = (*C.float)(unsafe.Pointer(embd))
	return int32(C.llama_decode(ctx.c, c))
}

// DecodeEmbdPos is DecodeEmbd with the position array replaced by pos: for
// a model with multi-position RoPE, four planes of n_tokens positions each
// (llama.cpp reads n_tokens × n_pos_per_embd of them for embeddings).
func (ctx Context) DecodeEmbdPos(b *Batch, embd *float32, pos *int32) int32 {
	c := b.c
	c.token = nil
	c.embd = (*C.float)(unsafe.Pointer(embd))
	c.pos = (*C.llama_pos)(unsafe.Pointer(pos))
	return int32(C.llama_decode(ctx.c, c))
}
