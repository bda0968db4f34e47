package cgo

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"
)

// ModelParams are the fields of llama_model_params that llamaloop sets; the
// others keep llama_model_default_params' values.
type ModelParams struct {
	NGPULayers   int32
	UseMmap      bool
	UseMlock     bool
	VocabOnly    bool
	CheckTensors bool
}

// Model is a struct llama_model pointer.
type Model struct{ c *C.struct_llama_model }

// Nil reports whether m is NULL.
func (m Model) Nil() bool { return m.c == nil }

// DefaultModelParams reads llama_model_default_params.
func DefaultModelParams() ModelParams {
	p := C.llama_model_default_params()
	var mmap, mlock C.bool
	C.llamaloop_model_params_get_load(&p, &mmap, &mlock)
	return ModelParams{NGPULayers: int32(p.n_gpu_layers), UseMmap: bool(mmap), UseMlock: bool(mlock),
		VocabOnly: bool(p.vocab_only), CheckTensors: bool(p.check_tensors)}
}

// ModelLoadFromFile is llama_model_load_from_file; a non-zero progress
// handle routes progress to the handler set by SetProgressHandler, and a
// non-zero capture handle the warnings and errors logged during the load to
// the handler set by SetCaptureHandler.
func ModelLoadFromFile(path string, mp ModelParams, progress, capture uintptr) Model {
	p := C.llama_model_default_params()
	p.n_gpu_layers = C.int32_t(mp.NGPULayers)
	C.llamaloop_model_params_set_load(&p, C.bool(mp.UseMmap), C.bool(mp.UseMlock))
	p.vocab_only = C.bool(mp.VocabOnly)
	p.check_tensors = C.bool(mp.CheckTensors)
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	return Model{C.llamaloop_model_load(cs, p, C.uintptr_t(progress), C.uintptr_t(capture))}
}

// Free is llama_model_free.
func (m Model) Free() { C.llama_model_free(m.c) }

// Vocab is llama_model_get_vocab.
func (m Model) Vocab() Vocab { return Vocab{C.llama_model_get_vocab(m.c)} }

// NCtxTrain is llama_model_n_ctx_train.
func (m Model) NCtxTrain() int { return int(C.llama_model_n_ctx_train(m.c)) }

// NEmbd is llama_model_n_embd.
func (m Model) NEmbd() int { return int(C.llama_model_n_embd(m.c)) }

// NLayer is llama_model_n_layer.
func (m Model) NLayer() int { return int(C.llama_model_n_layer(m.c)) }

// NHead is llama_model_n_head.
func (m Model) NHead() int { return int(C.llama_model_n_head(m.c)) }

// NHeadKV is llama_model_n_head_kv.
func (m Model) NHeadKV() int { return int(C.llama_model_n_head_kv(m.c)) }

// NParams is llama_model_n_params.
func (m Model) NParams() uint64 { return uint64(C.llama_model_n_params(m.c)) }

// Size is llama_model_size.
func (m Model) Size() uint64 { return uint64(C.llama_model_size(m.c)) }

// HasEncoder is llama_model_has_encoder.
func (m Model) HasEncoder() bool { return bool(C.llama_model_has_encoder(m.c)) }

// RopeType is llama_model_rope_type.
func (m Model) RopeType() int { return int(C.llama_model_rope_type(m.c)) }

// IsDiffusion is llama_model_is_diffusion.
func (m Model) IsDiffusion() bool { return bool(C.llama_model_is_diffusion(m.c)) }

// IsRecurrent is llama_model_is_recurrent.
func (m Model) IsRecurrent() bool { return bool(C.llama_model_is_recurrent(m.c)) }

// IsHybrid is llama_model_is_hybrid.
func (m Model) IsHybrid() bool { return bool(C.llama_model_is_hybrid(m.c)) }

// sized calls a snprintf-style C function, growing the buffer until the
// result fits. It returns ok=false when the function returns a negative length.
func sized(call func(buf *C.char, size C.size_t) C.int32_t) (string, bool) {
	buf := make([]byte, 256)
	for {
		n := call((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
		if n < 0 {
			return "", false
		}
		if int(n) < len(buf) {
			return string(buf[:n]), true
		}
		buf = make([]byte, int(n)+1)
	}
}

// Desc is llama_model_desc.
func (m Model) Desc() string {
	s, _ := sized(func(b *C.char, n C.size_t) C.int32_t { return C.llama_model_desc(m.c, b, n) })
	return s
}

// MetaCount is llama_model_meta_count.
func (m Model) MetaCount() int { return int(C.llama_model_meta_count(m.c)) }

// MetaKeyByIndex is llama_model_meta_key_by_index.
func (m Model) MetaKeyByIndex(i int) (string, bool) {
	return sized(func(b *C.char, n C.size_t) C.int32_t { return C.llama_model_meta_key_by_index(m.c, C.int32_t(i), b, n) })
}

// MetaValStrByIndex is llama_model_meta_val_str_by_index.
func (m Model) MetaValStrByIndex(i int) (string, bool) {
	return sized(func(b *C.char, n C.size_t) C.int32_t {
		return C.llama_model_meta_val_str_by_index(m.c, C.int32_t(i), b, n)
	})
}

// MetaValStr is llama_model_meta_val_str.
func (m Model) MetaValStr(key string) (string, bool) {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	return sized(func(b *C.char, n C.size_t) C.int32_t { return C.llama_model_meta_val_str(m.c, ck, b, n) })
}

// ChatTemplate is llama_model_chat_template; name "" asks for the default.
func (m Model) ChatTemplate(name string) (string, bool) {
	var cn *C.char
	if name != "" {
		cn = C.CString(name)
		defer C.free(unsafe.Pointer(cn))
	}
	t := C.llama_model_chat_template(m.c, cn)
	if t == nil {
		return "", false
	}
	return C.GoString(t), true
}

// Quantize is llama_model_quantize with default parameters, the given
// llama_ftype and thread count; it returns 0 on success.
func Quantize(in, out string, ftype int, threads int) uint32 {
	p := C.llama_model_quantize_default_params()
	p.ftype = C.enum_llama_ftype(ftype)
	p.nthread = C.int32_t(threads)
	ci, co := C.CString(in), C.CString(out)
	defer C.free(unsafe.Pointer(ci))
	defer C.free(unsafe.Pointer(co))
	return uint32(C.llama_model_quantize(ci, co, &p))
}

// File types of llama_ftype used by llamaloop.
const (
	FtypeF32  = int(C.LLAMA_FTYPE_ALL_F32)
	FtypeF16  = int(C.LLAMA_FTYPE_MOSTLY_F16)
	FtypeQ8_0 = int(C.LLAMA_FTYPE_MOSTLY_Q8_0)
	FtypeQ4_0 = int(C.LLAMA_FTYPE_MOSTLY_Q4_0)
	FtypeQ4KM = int(C.LLAMA_FTYPE_MOSTLY_Q4_K_M)
)
