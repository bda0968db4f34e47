package cgo

/*
#cgo CXXFLAGS: -std=c++17
#cgo LDFLAGS: -Wl,--wrap=ggml_backend_free -ldl
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
	captureHandler  atomic.Pointer[func(handle uintptr, text string)]
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

// SetCaptureHandler sets the Go function that receives the warnings and
// errors logged during loads started with a non-zero capture handle (the
// text as logged: a line may arrive in pieces).
func SetCaptureHandler(h func(handle uintptr, text string)) { captureHandler.Store(&h) }

//export llamaloopGoCapture
func llamaloopGoCapture(handle C.uintptr_t, text *C.char) {
	if h := captureHandler.Load(); h != nil {
		(*h)(uintptr(handle), C.GoString(text))
	}
}

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

// LogInstallLibrary routes the log of the ggml-base library at path, which
// backends loaded from a folder link, through the handler too; it reports
// whether that library is loaded.
func LogInstallLibrary(path string) bool {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	return C.llamaloop_log_install_lib(cs) != 0
}

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

// CMalloc is malloc.
func CMalloc(n int) unsafe.Pointer { return C.malloc(C.size_t(n)) }

// CFree is free.
func CFree(p unsafe.Pointer) { C.free(p) }

// MallocTrim is glibc's malloc_trim(0): it hands the C heap's free memory
// back to the system. Elsewhere it does nothing and returns false.
func MallocTrim() bool { return C.llamaloop_malloc_trim() != 0 }
