package cgo

/*
#include "shim.h"
*/
import "C"

// HasDecoder is llama_model_has_decoder.
func (m Model) HasDecoder() bool { return bool(C.llama_model_has_decoder(m.c)) }

// DecoderStartToken is llama_model_decoder_start_token: the model's
// decoder_start_token_id, or -1 when the file sets none.
func (m Model) DecoderStartToken() int32 { return int32(C.llama_model_decoder_start_token(m.c)) }

// Encode is llama_encode: it evaluates the batch with the model's encoder
// and keeps the output for the cross-attention of later llama_decode calls.
func (ctx Context) Encode(b *Batch) int32 { return int32(C.llama_encode(ctx.c, b.c)) }
