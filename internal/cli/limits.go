package cli

import (
	"errors"
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

// NewContext creates a context of m after checking its size, for a
// command: what names the options that set the size (e.g. "--ctx 10000000")
// and leads every error. A size beyond MaxCells, or a context that llamacpp
// finds too large for the memory available (a *llamacpp.MemoryError, checked
// before llama.cpp allocates anything), is a usage error (exit status 2)
// that says how much it needs instead of naming llamacpp's parameters.
func NewContext(m *llamacpp.Model, what string, p llamacpp.ContextParams) (*llamacpp.Context, error) {
	if p.ContextSize > MaxCells {
		return nil, Usagef("%s: the KV cache would have %d cells; llama.cpp takes at most %d", what, p.ContextSize, MaxCells)
	}
	ctx, err := m.NewContext(p)
	var me *llamacpp.MemoryError
	switch {
	case errors.As(err, &me):
		return nil, Usagef("%s: the context needs %s, more than the %s of memory available now",
			what, me.Needs(), llamacpp.FormatBytes(me.Available))
	case err != nil:
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return ctx, nil
}
