//go:build !llamacpp_external

package cgo

import (
	// The projector graphs of llama.cpp's multimodal library (mtmd.go).
	_ "github.com/ollama/ollama/llama/llama.cpp/tools/mtmd/models"
	// Compiles and links llama.cpp (libllama) and ggml with its CPU backend.
	_ "github.com/ollama/ollama/llama/llama.cpp/src"
	_ "github.com/ollama/ollama/ml/backend/ggml/ggml/src"
)

// Engine names the llama.cpp this program was built with.
const Engine = "module"

// EngineVersion is the llama.cpp build the engine reports: the pinned
// module's has no llama_version, so "" (internal/cli names its commit).
func EngineVersion() string { return "" }

// WrapsBackendFree reports whether the link's -Wl,--wrap=ggml_backend_free
// reaches llama.cpp's own calls (see llamaloop_free in shim.h): always for
// the module, which is compiled into the program.
const WrapsBackendFree = true
