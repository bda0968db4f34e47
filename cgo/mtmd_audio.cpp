//go:build !llamacpp_external

// llama.cpp's multimodal library (libmtmd), mtmd-audio.cpp compiled from the pinned
// ollama module by path; see mtmd.go for why not through the module's
// tools/mtmd package. The path is relative to the module's llama.cpp/include
// folder, which CGO_CPPFLAGS names.
#include "../tools/mtmd/mtmd-audio.cpp"
