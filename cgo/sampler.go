package cgo

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"
)

// Sampler is a struct llama_sampler pointer.
type Sampler struct{ c *C.struct_llama_sampler }

// SamplerChain builds llama.cpp's chain: penalties (when lastN > 0), top-k,
// top-p, temperature and dist(seed), the settings of a typical chat model,
// for a vocabulary of nVocab tokens.
func SamplerChain(nVocab, lastN int, repeat float32, topK int, topP, temp float32, seed uint32) Sampler {
	p := C.llama_sampler_chain_default_params()
	ch := C.llama_sampler_chain_init(p)
	if lastN > 0 {
		C.llama_sampler_chain_add(ch, C.llamaloop_sampler_init_penalties(C.int32_t(nVocab), C.int32_t(lastN), C.float(repeat), 0, 0))
	}
	C.llama_sampler_chain_add(ch, C.llama_sampler_init_top_k(C.int32_t(topK)))
	C.llama_sampler_chain_add(ch, C.llama_sampler_init_top_p(C.float(topP), 1))
	C.llama_sampler_chain_add(ch, C.llama_sampler_init_temp(C.float(temp)))
	C.llama_sampler_chain_add(ch, C.llama_sampler_init_dist(C.uint32_t(seed)))
	return Sampler{ch}
}

// SamplerGreedy is llama_sampler_init_greedy.
func SamplerGreedy() Sampler { return Sampler{C.llama_sampler_init_greedy()} }

// SamplerMirostat is llama_sampler_init_mirostat (v1, m candidates).
func SamplerMirostat(nVocab int, seed uint32, tau, eta float32, m int) Sampler {
	return Sampler{C.llama_sampler_init_mirostat(C.int32_t(nVocab), C.uint32_t(seed), C.float(tau), C.float(eta), C.int32_t(m))}
}

// SamplerMirostatV2 is llama_sampler_init_mirostat_v2.
func SamplerMirostatV2(seed uint32, tau, eta float32) Sampler {
	return Sampler{C.llama_sampler_init_mirostat_v2(C.uint32_t(seed), C.float(tau), C.float(eta))}
}

// Accept is llama_sampler_accept.
func (s Sampler) Accept(t int32) { C.llama_sampler_accept(s.c, C.llama_token(t)) }

// Free is llama_sampler_free.
func (s Sampler) Free() { C.llama_sampler_free(s.c) }

// TokenData is the size of one llama_token_data, for scratch buffers.
const TokenData = int(C.sizeof_llama_token_data)

// SampleRow runs the sampler over a logits row with scratch memory of
// len(logits)*TokenData bytes allocated by the caller in C memory (CMalloc).
func (s Sampler) SampleRow(logits []float32, scratch unsafe.Pointer) int32 {
	return int32(C.llamaloop_sampler_sample_row(s.c, (*C.float)(unsafe.Pointer(&logits[0])), C.int32_t(len(logits)),
		(*C.llama_token_data)(scratch)))
}

// SamplerGrammar is llama_sampler_init_grammar: llama.cpp's GBNF grammar
// sampler over vocab, starting at rule root. It returns a nil Sampler (see
// Nil) when llama.cpp refuses the grammar.
func SamplerGrammar(vocab Vocab, grammar, root string) Sampler {
	cg, cr := C.CString(grammar), C.CString(root)
	defer C.free(unsafe.Pointer(cg))
	defer C.free(unsafe.Pointer(cr))
	return Sampler{C.llama_sampler_init_grammar(vocab.c, cg, cr)}
}

// Nil reports whether the sampler pointer is NULL.
func (s Sampler) Nil() bool { return s.c == nil }

// Reset is llama_sampler_reset.
func (s Sampler) Reset() { C.llama_sampler_reset(s.c) }
