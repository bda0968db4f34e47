package llamacpp

import (
	"errors"
	"fmt"
)

// Sentinel errors; the errors the package returns wrap them, so test with
// errors.Is.
var (
	// ErrClosed: the Model, Context or Batch was closed.
	ErrClosed = errors.New("llamacpp: use of a closed object")
	// ErrInvalidArgument: a parameter, token id, sequence id, position or
	// index is out of range. Nothing was sent to llama.cpp.
	ErrInvalidArgument = errors.New("llamacpp: invalid argument")
	// ErrContextFull: llama_decode found no KV slot for the batch (return
	// code 1). The context is unchanged: remove cells or use fewer tokens.
	ErrContextFull = errors.New("llamacpp: context full (no KV slot for the batch)")
	// ErrAborted: the decode was cancelled (return code 2). Micro-batches
	// already computed stay in the cache; re-read SeqPosMax.
	ErrAborted = errors.New("llamacpp: decode aborted")
	// ErrInvalidBatch: llama_decode rejected the batch (return code -1),
	// e.g. positions that do not continue a sequence. The cache is unchanged.
	ErrInvalidBatch = errors.New("llamacpp: invalid batch")
	// ErrDecodeFailed: allocation or graph computation failed (return code
	// -2, -3 or another negative code).
	ErrDecodeFailed = errors.New("llamacpp: decode failed")
	// ErrNoMemory: an allocation that a parameter asks for (a context's KV
	// cache, a batch) does not fit in the memory the process can get: free
	// memory, its cgroup's limit, its address-space limit. The error names
	// the parameter; nothing was allocated.
	ErrNoMemory = errors.New("llamacpp: not enough memory")
	// ErrLoad: the model file could not be loaded.
	ErrLoad = errors.New("llamacpp: cannot load model")
)

// DecodeError is a non-zero return code of llama_decode with llama.cpp's own
// explanation, when it logged one.
type DecodeError struct {
	Code   int32  // llama_decode's return value
	Detail string // llama.cpp's logged explanation, or ""
}

// Error returns the message of the error Code stands for, with Detail.
func (e *DecodeError) Error() string {
	msg := e.Unwrap().Error()
	if e.Detail != "" {
		return fmt.Sprintf("%s (code %d: %s)", msg, e.Code, e.Detail)
	}
	return fmt.Sprintf("%s (code %d)", msg, e.Code)
}

// Unwrap maps the return code to its sentinel error.
func (e *DecodeError) Unwrap() error {
	switch e.Code {
	case 1:
		return ErrContextFull
	case 2:
		return ErrAborted
	case -1:
		return ErrInvalidBatch
	default:
		return ErrDecodeFailed
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}
