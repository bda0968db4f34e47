//go:build !llamacpp_external

// ggml's AMX kernels, compiled from the pinned ollama module by path.
// (An external llama.cpp, build tag llamacpp_external, has them in its own
// CPU backend.)
//
// When the compiler targets AMX (-march=native on a Sapphire Rapids or later
// Xeon, -march=sapphirerapids), ggml-cpu.cpp registers the AMX buffer type
// ggml_backend_amx_buffer_type(), which lives in ggml-cpu/amx/amx.cpp and
// mmq.cpp: sources that no package of the module compiles. Upstream's CMake
// compiles them into the CPU backend; here this file does, under the same
// macros that guard their use, so a build without AMX compiles nothing.
//
// The paths are relative to the module's ggml/include folder, which
// CGO_CPPFLAGS names; the AMX sources' own includes need ggml/src and
// ggml/src/ggml-cpu, which the Makefile adds (as -idirafter) only when the
// flags target AMX. `make env` prints them for builds outside the Makefile.
#if defined(__AMX_INT8__) && defined(__AVX512VNNI__)

#if !__has_include("ggml-backend-impl.h") || !__has_include("ggml-cpu-impl.h")
#error "llamaloop: the flags target AMX, so ggml's AMX kernels are compiled here: add -idirafter <ollama module>/ml/backend/ggml/ggml/src -idirafter <ollama module>/ml/backend/ggml/ggml/src/ggml-cpu to CGO_CPPFLAGS (make env prints them)"
#endif

#include "../src/ggml-cpu/amx/amx.cpp"

#endif
