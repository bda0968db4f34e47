package cli

import (
	"fmt"

	"github.com/llamaloop/llamaloop/llamacpp"
)

// MaxCells is the most KV cells llamacpp.ContextParams.ContextSize takes;
// the commands check their sizes against it before they ask for a context.
const MaxCells = 1 << 24

// CheckThreads checks the value of a --threads option: at least 1 and at
// most llamacpp.MaxThreads (ggml's limit). More threads than CPUs is
// allowed: llamacpp logs a warning, which the commands print (see
// LogWarnings) unless --quiet.
func CheckThreads(n int) error {
	if n < 1 || n > llamacpp.MaxThreads {
		return Usagef("--threads %d: must be from 1 to %d", n, llamacpp.MaxThreads)
	}
	return nil
}

// KVBytes estimates the bytes of a KV cache of cells cells for a model:
// keys and values of every layer in f16, llama.cpp's default cache type.
func KVBytes(info llamacpp.ModelInfo, cells int) uint64 {
	headDim := 0
	if info.Heads > 0 {
		headDim = info.Embd / info.Heads
	}
	perCell := uint64(info.Layers) * 2 * uint64(headDim*max(info.HeadsKV, 1)) * 2
	return uint64(max(cells, 0)) * perCell
}

// CheckCells checks, before llama.cpp allocates anything, that a context of
// cells KV cells (all sequences together) can exist: at most MaxCells, and
// a cache that fits in the memory this process can still allocate
// (AvailableMemory; the model is loaded by then). what names the options
// that set the size, for the message, e.g. "--ctx 10000000".
func CheckCells(what string, info llamacpp.ModelInfo, cells int) error {
	if cells > MaxCells {
		return Usagef("%s: the KV cache would have %d cells; llama.cpp takes at most %d", what, cells, MaxCells)
	}
	avail, need := AvailableMemory(), KVBytes(info, cells)
	if avail > 0 && need > avail {
		return Usagef("%s: the KV cache of %d cells needs %s, more than the %s of memory available now",
			what, cells, GiB(need), GiB(avail))
	}
	return nil
}

// GiB formats a byte count in GiB (MiB below one GiB).
func GiB(n uint64) string {
	if n < 1<<30 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
