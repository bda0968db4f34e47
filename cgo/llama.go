package cgo

/*
#cgo CXXFLAGS: -std=c++17
#include "shim.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// Log levels of ggml_log_level.
const (
	LogDebug = int(C.GGML_LOG_LEVEL_DEBUG)
	LogInfo  = int(C.GGML_LOG_LEVEL_INFO)
	LogWarn  = int(C.GGML_LOG_LEVEL_WARN)
	LogError = int(C.GGML_LOG_LEVEL_ERROR)
	LogNone  = 100
)

// NullToken is LLAMA_TOKEN_NULL.
const NullToken = int32(C.LLAMA_TOKEN_NULL)

var (
	logHandler      atomic.Pointer[func(level int, text string)]
	progressHandler atomic.Pointer[func(handle uintptr, progress float32) bool]
)

// SetLogHandler sets the Go function that receives llama.cpp's and ggml's log
// messages at or above SetLogMinLevel's level. It may be called from threads
// that Go did not create.
func SetLogHandler(h func(level int, text string)) { logHandler.Store(&h) }

// SetLogMinLevel sets the lowest level that is forwarded to the handler;
// LogNone forwards nothing.
func SetLogMinLevel(level int) { C.llamaloop_log_set_min(C.int(level)) }

// SetProgressHandler sets the Go function that receives model loading
// progress for loads started with a non-zero handle.
func SetProgressHandler(h func(handle uintptr, progress float32) bool) { progressHandler.Store(&h) }

//export llamaloopGoLog
func llamaloopGoLog(level C.int, text *C.char) {
	if h := logHandler.Load(); h != nil {
		(*h)(int(level), C.GoString(text))
	}
}

//export llamaloopGoProgress
func llamaloopGoProgress(progress C.float, handle C.uintptr_t) C.bool {
	if h := progressHandler.Load(); h != nil {
		return C.bool((*h)(uintptr(handle), float32(progress)))
	}
	return true
}

// LogInstall routes llama.cpp's and ggml's logs through the handler.
func LogInstall() { C.llamaloop_log_install() }

// BackendInit is llama_backend_init.
func BackendInit() { C.llama_backend_init() }

// SystemInfo is llama_print_system_info.
func SystemInfo() string { return C.GoString(C.llama_print_system_info()) }

// MaxParallelSequences is llama_max_parallel_sequences.
func MaxParallelSequences() int { return int(C.llama_max_parallel_sequences()) }

// SupportsMmap is llama_supports_mmap.
func SupportsMmap() bool { return bool(C.llama_supports_mmap()) }

// SupportsMlock is llama_supports_mlock.
func SupportsMlock() bool { return bool(C.llama_supports_mlock()) }

// SupportsGPUOffload is llama_supports_gpu_offload.
func SupportsGPUOffload() bool { return bool(C.llama_supports_gpu_offload()) }

// TimeUs is llama_time_us.
func TimeUs() int64 { return int64(C.llama_time_us()) }

// ---- devices and backends (ggml-backend.h)

// Device is a ggml_backend_dev_t.
type Device struct{ c C.ggml_backend_dev_t }

// Device types of ggml_backend_dev_type.
const (
	DeviceCPU   = int(C.GGML_BACKEND_DEVICE_TYPE_CPU)
	DeviceGPU   = int(C.GGML_BACKEND_DEVICE_TYPE_GPU)
	DeviceIGPU  = int(C.GGML_BACKEND_DEVICE_TYPE_IGPU)
	DeviceAccel = int(C.GGML_BACKEND_DEVICE_TYPE_ACCEL)
)

// DeviceCount is ggml_backend_dev_count.
func DeviceCount() int { return int(C.ggml_backend_dev_count()) }

// DeviceGet is ggml_backend_dev_get.
func DeviceGet(i int) Device { return Device{C.ggml_backend_dev_get(C.size_t(i))} }

// Name is ggml_backend_dev_name.
func (d Device) Name() string { return C.GoString(C.ggml_backend_dev_name(d.c)) }

// Description is ggml_backend_dev_description.
func (d Device) Description() string { return C.GoString(C.ggml_backend_dev_description(d.c)) }

// Type is ggml_backend_dev_type.
func (d Device) Type() int { return int(C.ggml_backend_dev_type(d.c)) }

// Memory is ggml_backend_dev_memory.
func (d Device) Memory() (free, total uint64) {
	var f, t C.size_t
	C.ggml_backend_dev_memory(d.c, &f, &t)
	return uint64(f), uint64(t)
}

// BackendLoad is ggml_backend_load; it reports whether a backend registered.
func BackendLoad(path string) bool {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	return C.ggml_backend_load(cs) != nil
}

// ---- models

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
	return ModelParams{NGPULayers: int32(p.n_gpu_layers), UseMmap: bool(p.use_mmap), UseMlock: bool(p.use_mlock),
		VocabOnly: bool(p.vocab_only), CheckTensors: bool(p.check_tensors)}
}

// ModelLoadFromFile is llama_model_load_from_file; a non-zero progress
// handle routes progress to the handler set by SetProgressHandler.
func ModelLoadFromFile(path string, mp ModelParams, progress uintptr) Model {
	p := C.llama_model_default_params()
	p.n_gpu_layers = C.int32_t(mp.NGPULayers)
	p.use_mmap = C.bool(mp.UseMmap)
	p.use_mlock = C.bool(mp.UseMlock)
	p.vocab_only = C.bool(mp.VocabOnly)
	p.check_tensors = C.bool(mp.CheckTensors)
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	return Model{C.llamaloop_model_load(cs, p, C.uintptr_t(progress))}
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
)

// ---- contexts

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
}

// DefaultContextParams reads llama_context_default_params.
func DefaultContextParams() ContextParams {
	p := C.llama_context_default_params()
	return ContextParams{NCtx: uint32(p.n_ctx), NBatch: uint32(p.n_batch), NUbatch: uint32(p.n_ubatch),
		NSeqMax: uint32(p.n_seq_max), NThreads: int32(p.n_threads), NThreadsBatch: int32(p.n_threads_batch),
		FlashAttn: int32(p.flash_attn_type), TypeK: int32(p.type_k), TypeV: int32(p.type_v),
		KVUnified: bool(p.kv_unified), OffloadKQV: bool(p.offload_kqv), NoPerf: bool(p.no_perf)}
}

// Context is a struct llama_context pointer.
type Context struct{ c *C.struct_llama_context }

// Nil reports whether ctx is NULL.
func (ctx Context) Nil() bool { return ctx.c == nil }

// InitFromModel is llama_init_from_model.
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
	p.embeddings = false
	return Context{C.llama_init_from_model(m.c, p)}
}

// Free is llama_free.
func (ctx Context) Free() { C.llama_free(ctx.c) }

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

// SetAbortFlag installs an abort callback that returns true while *flag is
// non-zero; flag must point to C memory that outlives the context (nil
// removes the callback).
func (ctx Context) SetAbortFlag(flag *int32) {
	C.llamaloop_set_abort_flag(ctx.c, (*C.int32_t)(unsafe.Pointer(flag)))
}

// Decode is llama_decode.
func (ctx Context) Decode(b *Batch) int32 { return int32(C.llama_decode(ctx.c, b.c)) }

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

// ---- memory (KV cache)

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

// ---- batches

// Batch is a struct llama_batch allocated by llama_batch_init.
type Batch struct{ c C.struct_llama_batch }

// BatchInit is llama_batch_init for tokens (not embeddings).
func BatchInit(nTokens, nSeqMax int) *Batch {
	return &Batch{C.llama_batch_init(C.int32_t(nTokens), 0, C.int32_t(nSeqMax))}
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

// ---- vocabulary

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

// ---- llama.cpp's own samplers (for side-by-side benchmarks)

// Sampler is a struct llama_sampler pointer.
type Sampler struct{ c *C.struct_llama_sampler }

// SamplerChain builds llama.cpp's chain: penalties (when lastN > 0), top-k,
// top-p, temperature and dist(seed), the settings of a typical chat model.
func SamplerChain(lastN int, repeat float32, topK int, topP, temp float32, seed uint32) Sampler {
	p := C.llama_sampler_chain_default_params()
	ch := C.llama_sampler_chain_init(p)
	if lastN > 0 {
		C.llama_sampler_chain_add(ch, C.llama_sampler_init_penalties(C.int32_t(lastN), C.float(repeat), 0, 0))
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

// CMalloc is malloc; CFree is free.
func CMalloc(n int) unsafe.Pointer { return C.malloc(C.size_t(n)) }

// CFree is free.
func CFree(p unsafe.Pointer) { C.free(p) }
