//go:build llamacpp_external

package cgo

/*
#if !defined(LLAMALOOP_EXTERNAL)
#error "llamaloop: the build tag llamacpp_external needs the flags of make LLAMA_CPP=DIR (eval \"$(make -s env LLAMA_CPP=DIR)\" prints them)"
#endif
#include "shim.h"
*/
import "C"

// Engine names the llama.cpp this program was built with: "external", a
// llama.cpp installed with CMake and named by make LLAMA_CPP=DIR (its
// headers and libraries come from CGO_CPPFLAGS and CGO_LDFLAGS).
const Engine = "external"

// EngineVersion is llama_version of the linked llama.cpp ("" where it has
// none).
func EngineVersion() string { return C.GoString(C.llamaloop_version()) }

// WrapsBackendFree reports whether the link's -Wl,--wrap=ggml_backend_free
// reaches llama.cpp's own calls (see llamaloop_free in shim.h): it does for
// a static install, not inside shared libraries, where upstream's
// scheduler, which frees no backend late, needs no deferral.
const WrapsBackendFree = C.LLAMALOOP_SHARED == 0
