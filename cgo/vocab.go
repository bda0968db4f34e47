package cgo

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"
)

// Vocab is a const struct llama_vocab pointer.
type Vocab struct{ c *C.struct_llama_vocab }

// NTokens is llama_vocab_n_tokens.
func (v Vocab) NTokens() int { return int(C.llama_vocab_n_tokens(v.c)) }

// Type is llama_vocab_type.
func (v Vocab) Type() int { return int(C.llama_vocab_type(v.c)) }

// BOS is llama_vocab_bos.
func (v Vocab) BOS() int32 { return int32(C.llama_vocab_bos(v.c)) }

// EOS is llama_vocab_eos.
func (v Vocab) EOS() int32 { return int32(C.llama_vocab_eos(v.c)) }

// EOT is llama_vocab_eot.
func (v Vocab) EOT() int32 { return int32(C.llama_vocab_eot(v.c)) }

// PAD is llama_vocab_pad.
func (v Vocab) PAD() int32 { return int32(C.llama_vocab_pad(v.c)) }

// NL is llama_vocab_nl.
func (v Vocab) NL() int32 { return int32(C.llama_vocab_nl(v.c)) }

// AddBOS is llama_vocab_get_add_bos.
func (v Vocab) AddBOS() bool { return bool(C.llama_vocab_get_add_bos(v.c)) }

// AddEOS is llama_vocab_get_add_eos.
func (v Vocab) AddEOS() bool { return bool(C.llama_vocab_get_add_eos(v.c)) }

// IsEOG is llama_vocab_is_eog.
func (v Vocab) IsEOG(t int32) bool { return bool(C.llama_vocab_is_eog(v.c, C.llama_token(t))) }

// IsControl is llama_vocab_is_control.
func (v Vocab) IsControl(t int32) bool { return bool(C.llama_vocab_is_control(v.c, C.llama_token(t))) }

// Attr is llama_vocab_get_attr.
func (v Vocab) Attr(t int32) int { return int(C.llama_vocab_get_attr(v.c, C.llama_token(t))) }

// Text is llama_vocab_get_text.
func (v Vocab) Text(t int32) string { return C.GoString(C.llama_vocab_get_text(v.c, C.llama_token(t))) }

// Score is llama_vocab_get_score.
func (v Vocab) Score(t int32) float32 { return float32(C.llama_vocab_get_score(v.c, C.llama_token(t))) }

// Tokenize is llama_tokenize into out; it returns the count or -(needed).
func (v Vocab) Tokenize(text string, out []int32, addSpecial, parseSpecial bool) int32 {
	var tp *C.char
	if len(text) > 0 {
		tp = (*C.char)(unsafe.Pointer(unsafe.StringData(text)))
	}
	var op *C.llama_token
	if len(out) > 0 {
		op = (*C.llama_token)(unsafe.Pointer(&out[0]))
	}
	return int32(C.llama_tokenize(v.c, tp, C.int32_t(len(text)), op, C.int32_t(len(out)), C.bool(addSpecial), C.bool(parseSpecial)))
}

// TokenToPiece is llama_token_to_piece into buf; it returns the length or -(needed).
func (v Vocab) TokenToPiece(t int32, buf []byte, lstrip int, special bool) int32 {
	var bp *C.char
	if len(buf) > 0 {
		bp = (*C.char)(unsafe.Pointer(&buf[0]))
	}
	return int32(C.llama_token_to_piece(v.c, C.llama_token(t), bp, C.int32_t(len(buf)), C.int32_t(lstrip), C.bool(special)))
}

// Detokenize is llama_detokenize into buf; it returns the length or -(needed).
func (v Vocab) Detokenize(tokens []int32, buf []byte, removeSpecial, unparseSpecial bool) int32 {
	var tp *C.llama_token
	if len(tokens) > 0 {
		tp = (*C.llama_token)(unsafe.Pointer(&tokens[0]))
	}
	var bp *C.char
	if len(buf) > 0 {
		bp = (*C.char)(unsafe.Pointer(&buf[0]))
	}
	return int32(C.llama_detokenize(v.c, tp, C.int32_t(len(tokens)), bp, C.int32_t(len(buf)), C.bool(removeSpecial), C.bool(unparseSpecial)))
}

// ChatApplyTemplate is llama_chat_apply_template; tmpl "" means chatml. It
// returns the full length or -1 for an unknown template.
func ChatApplyTemplate(tmpl string, roles, contents []string, addAssistant bool, buf []byte) int32 {
	n := len(roles)
	mem := C.calloc(C.size_t(max(n, 1)), C.sizeof_struct_llama_chat_message)
	defer C.free(mem)
	msgs := unsafe.Slice((*C.struct_llama_chat_message)(mem), max(n, 1))
	for i := 0; i < n; i++ {
		msgs[i].role = C.CString(roles[i])
		msgs[i].content = C.CString(contents[i])
	}
	defer func() {
		for i := 0; i < n; i++ {
			C.free(unsafe.Pointer(msgs[i].role))
			C.free(unsafe.Pointer(msgs[i].content))
		}
	}()
	var ct *C.char
	if tmpl != "" {
		ct = C.CString(tmpl)
		defer C.free(unsafe.Pointer(ct))
	}
	var bp *C.char
	if len(buf) > 0 {
		bp = (*C.char)(unsafe.Pointer(&buf[0]))
	}
	return int32(C.llama_chat_apply_template(ct, &msgs[0], C.size_t(n), C.bool(addAssistant), bp, C.int32_t(len(buf))))
}
