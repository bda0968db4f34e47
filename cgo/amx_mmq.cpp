//go:build !llamacpp_external

// ggml's AMX matrix kernels (ggml-cpu/amx/mmq.cpp), compiled from the pinned
// module by path in a translation unit of their own, as upstream compiles them;
// amx.cpp beside this file says why and how.
#if defined(__AMX_INT8__) && defined(__AVX512VNNI__)
#include "../src/ggml-cpu/amx/mmq.cpp"
#endif
