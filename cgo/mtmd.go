//go:build !llamacpp_external

package cgo

// llama.cpp's multimodal library (libmtmd: mtmd.cpp, clip.cpp,
// mtmd-audio.cpp and the projector graphs) loads a projector GGUF (mmproj)
// beside a text model, splits a prompt with media markers into text and
// media chunks and encodes a media chunk to input embeddings.
//
// The module's tools/mtmd package cannot be compiled from the module cache:
// its mtmd-helper.cpp includes miniaudio and stb_image from llama.cpp's
// vendor/ folder, which Go's module zips leave out. So mtmd_*.cpp compile
// mtmd.cpp, clip.cpp and mtmd-audio.cpp by path (as amx.cpp does ggml's AMX
// kernels), link_module.go imports the projector graphs' package (tools/mtmd/models,
// which compiles), and mtmd-helper.cpp is not compiled: llamaloop decodes
// images and WAV in Go and lays out positions itself. The header comes by a
// path relative to CGO_CPPFLAGS' llama.cpp/include, so the flags, and Go's
// build cache of llama.cpp, stay as they were.

/*
#include <stdlib.h>
#include "shim.h"
#include "../tools/mtmd/mtmd.h"

mtmd_context * llamaloop_mtmd_init_from_file(const char * path, const struct llama_model * model, struct mtmd_context_params params);
void llamaloop_mtmd_free(mtmd_context * ctx);
*/
import "C"

import "unsafe"

// MtmdAvailable reports whether llama.cpp's multimodal library is linked:
// always with the pinned module (mtmd_external.go says when not).
const MtmdAvailable = true

// Mtmd is an mtmd_context pointer.
type Mtmd struct{ c *C.mtmd_context }

// Nil reports whether m is NULL.
func (m Mtmd) Nil() bool { return m.c == nil }

// MtmdParams are the fields of mtmd_context_params that llamaloop sets; the
// others keep mtmd_context_params_default's values (no warmup is set here:
// Warmup false skips the encode of a dummy image at load).
type MtmdParams struct {
	UseGPU      bool
	NThreads    int32
	MediaMarker string // "" keeps mtmd_default_marker
	Warmup      bool
}

// The pinned module's mtmd_init_from_file ignores flash_attn_type (it
// hands clip CLIP_FLASH_ATTN_TYPE_AUTO), so clip turns flash attention on
// where the backend has it: on the CPU, queries, keys and values are then
// rounded to f16 (about 1e-3 relative in the encoders' embeddings).

// MtmdDefaultMarker is mtmd_default_marker.
func MtmdDefaultMarker() string { return C.GoString(C.mtmd_default_marker()) }

// MtmdLogInstall routes clip's and mtmd's log to the handler of
// SetLogHandler, at the level of SetLogMinLevel.
func MtmdLogInstall() { C.llamaloop_mtmd_log_install() }

// MtmdInitFromFile is mtmd_init_from_file (its backend frees deferred, as
// Free's); it returns a nil context when the file is refused (clip's
// exceptions are caught inside).
func MtmdInitFromFile(path string, model Model, p MtmdParams) Mtmd {
	cp := C.mtmd_context_params_default()
	cp.use_gpu = C.bool(p.UseGPU)
	cp.print_timings = false
	cp.warmup = C.bool(p.Warmup)
	if p.NThreads > 0 {
		cp.n_threads = C.int(p.NThreads)
	}
	if p.MediaMarker != "" {
		cm := C.CString(p.MediaMarker)
		defer C.free(unsafe.Pointer(cm))
		cp.media_marker = cm // copied into a std::string by mtmd_context
	}
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	return Mtmd{C.llamaloop_mtmd_init_from_file(cs, model.c, cp)}
}

// Free is mtmd_free, with the backend frees deferred past the scheduler's
// (shim.c).
func (m Mtmd) Free() { C.llamaloop_mtmd_free(m.c) }

// UseNonCausal is mtmd_decode_use_non_causal.
func (m Mtmd) UseNonCausal() bool { return bool(C.mtmd_decode_use_non_causal(m.c)) }

// UseMRoPE is mtmd_decode_use_mrope.
func (m Mtmd) UseMRoPE() bool { return bool(C.mtmd_decode_use_mrope(m.c)) }

// SupportVision is mtmd_support_vision.
func (m Mtmd) SupportVision() bool { return bool(C.mtmd_support_vision(m.c)) }

// SupportAudio is mtmd_support_audio.
func (m Mtmd) SupportAudio() bool { return bool(C.mtmd_support_audio(m.c)) }

// AudioBitrate is mtmd_get_audio_bitrate: the sample rate audio must have,
// or -1 without audio support.
func (m Mtmd) AudioBitrate() int { return int(C.mtmd_get_audio_bitrate(m.c)) }

// Bitmap is an mtmd_bitmap pointer.
type Bitmap struct{ c *C.mtmd_bitmap }

// Nil reports whether b is NULL.
func (b Bitmap) Nil() bool { return b.c == nil }

// BitmapInit is mtmd_bitmap_init: rgb holds nx*ny*3 bytes (copied).
func BitmapInit(nx, ny uint32, rgb []byte) Bitmap {
	return Bitmap{C.mtmd_bitmap_init(C.uint32_t(nx), C.uint32_t(ny), (*C.uchar)(unsafe.Pointer(unsafe.SliceData(rgb))))}
}

// BitmapInitFromAudio is mtmd_bitmap_init_from_audio (samples copied).
func BitmapInitFromAudio(samples []float32) Bitmap {
	return Bitmap{C.mtmd_bitmap_init_from_audio(C.size_t(len(samples)), (*C.float)(unsafe.SliceData(samples)))}
}

// SetID is mtmd_bitmap_set_id.
func (b Bitmap) SetID(id string) {
	cs := C.CString(id)
	defer C.free(unsafe.Pointer(cs))
	C.mtmd_bitmap_set_id(b.c, cs)
}

// Free is mtmd_bitmap_free.
func (b Bitmap) Free() { C.mtmd_bitmap_free(b.c) }

// Chunks is an mtmd_input_chunks pointer.
type Chunks struct{ c *C.mtmd_input_chunks }

// Nil reports whether c is NULL.
func (c Chunks) Nil() bool { return c.c == nil }

// ChunksInit is mtmd_input_chunks_init.
func ChunksInit() Chunks { return Chunks{C.mtmd_input_chunks_init()} }

// Free is mtmd_input_chunks_free.
func (c Chunks) Free() { C.mtmd_input_chunks_free(c.c) }

// Size is mtmd_input_chunks_size.
func (c Chunks) Size() int { return int(C.mtmd_input_chunks_size(c.c)) }

// Chunk is a const mtmd_input_chunk pointer, owned by its Chunks.
type Chunk struct{ c *C.mtmd_input_chunk }

// Get is mtmd_input_chunks_get.
func (c Chunks) Get(i int) Chunk { return Chunk{C.mtmd_input_chunks_get(c.c, C.size_t(i))} }

// Chunk types (enum mtmd_input_chunk_type).
const (
	ChunkText  = int(C.MTMD_INPUT_CHUNK_TYPE_TEXT)
	ChunkImage = int(C.MTMD_INPUT_CHUNK_TYPE_IMAGE)
	ChunkAudio = int(C.MTMD_INPUT_CHUNK_TYPE_AUDIO)
)

// Type is mtmd_input_chunk_get_type.
func (ch Chunk) Type() int { return int(C.mtmd_input_chunk_get_type(ch.c)) }

// TextTokens is mtmd_input_chunk_get_tokens_text, copied into dst.
func (ch Chunk) TextTokens(dst []int32) []int32 {
	var n C.size_t
	p := C.mtmd_input_chunk_get_tokens_text(ch.c, &n)
	if p == nil || n == 0 {
		return dst
	}
	return append(dst, unsafe.Slice((*int32)(unsafe.Pointer(p)), int(n))...)
}

// NTokens is mtmd_input_chunk_get_n_tokens.
func (ch Chunk) NTokens() int { return int(C.mtmd_input_chunk_get_n_tokens(ch.c)) }

// NPos is mtmd_input_chunk_get_n_pos.
func (ch Chunk) NPos() int { return int(C.mtmd_input_chunk_get_n_pos(ch.c)) }

// ID is mtmd_input_chunk_get_id ("" when none).
func (ch Chunk) ID() string {
	p := C.mtmd_input_chunk_get_id(ch.c)
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// ImageGrid is mtmd_image_tokens_get_nx and _ny of the chunk's image
// tokens: the output grid for M-RoPE; 0, 0 for a chunk without them.
func (ch Chunk) ImageGrid() (nx, ny int) {
	it := C.mtmd_input_chunk_get_tokens_image(ch.c)
	if it == nil {
		return 0, 0
	}
	return int(C.mtmd_image_tokens_get_nx(it)), int(C.mtmd_image_tokens_get_ny(it))
}

// Tokenize is mtmd_tokenize of text (add_special, parse_special) with the
// bitmaps in marker order into out: 0 on success, 1 when the number of
// bitmaps does not match the markers, 2 when preprocessing failed.
func (m Mtmd) Tokenize(out Chunks, text string, addSpecial, parseSpecial bool, bitmaps []Bitmap) int32 {
	cs := C.CString(text)
	defer C.free(unsafe.Pointer(cs))
	in := C.mtmd_input_text{text: cs, add_special: C.bool(addSpecial), parse_special: C.bool(parseSpecial)}
	var arr **C.mtmd_bitmap
	if len(bitmaps) > 0 {
		// A C array: Go memory holding C pointers may be passed, but keep it plain.
		p := C.malloc(C.size_t(len(bitmaps)) * C.size_t(unsafe.Sizeof(uintptr(0))))
		defer C.free(p)
		s := unsafe.Slice((**C.mtmd_bitmap)(p), len(bitmaps))
		for i, b := range bitmaps {
			s[i] = b.c
		}
		arr = (**C.mtmd_bitmap)(p)
	}
	return int32(C.mtmd_tokenize(m.c, out.c, &in, arr, C.size_t(len(bitmaps))))
}

// EncodeChunk is mtmd_encode_chunk: 0 on success.
func (m Mtmd) EncodeChunk(ch Chunk) int32 { return int32(C.mtmd_encode_chunk(m.c, ch.c)) }

// OutputEmbd is mtmd_get_output_embd viewed as n floats (valid until the
// next EncodeChunk or Free); nil when there is none.
func (m Mtmd) OutputEmbd(n int) []float32 {
	p := C.mtmd_get_output_embd(m.c)
	if p == nil {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), n)
}
