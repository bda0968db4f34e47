package serve

import (
	"fmt"
	"net/http"
)

// Limits bound what a request may cost before it reaches the engine: the
// grammar compiled from its tools and response_format (linear in the
// schema's bytes, about a second per MB on a 2-vCPU AMD EPYC), the prompt
// its tools make, and the inputs of an embeddings request. Over a limit
// the request is answered 400 with the code that names it. A zero field
// takes its default.
type Limits struct {
	// MaxTools is the most tools of a request (code too_many_tools;
	// default DefaultMaxTools, OpenAI's).
	MaxTools int
	// MaxSchemaBytes is the most bytes of a response_format schema, and of
	// a request's tool parameters together (code schema_too_large; default
	// DefaultMaxSchemaBytes).
	MaxSchemaBytes int
	// MaxEmbeddingInputs is the most inputs of an embeddings request (code
	// too_many_inputs; default DefaultMaxEmbeddingInputs, OpenAI's).
	MaxEmbeddingInputs int
	// MaxEmbeddingTokens is the most tokens of an embeddings request's
	// inputs together (code too_many_tokens; default
	// DefaultMaxEmbeddingTokens).
	MaxEmbeddingTokens int
	// MaxMedia is the most images and audio clips of a request together
	// (code too_many_media; default DefaultMaxMedia).
	MaxMedia int
	// MaxMediaBytes is the most bytes of a media item, decoded from
	// base64 (code media_too_large; default DefaultMaxMediaBytes).
	MaxMediaBytes int
	// MaxMediaPixels is the most pixels of an image, read from its header
	// before it is decoded (code image_too_large; default
	// DefaultMaxMediaPixels).
	MaxMediaPixels int
}

// Defaults of Limits.
const (
	DefaultMaxTools           = 128
	DefaultMaxSchemaBytes     = 256 << 10
	DefaultMaxEmbeddingInputs = 2048
	DefaultMaxEmbeddingTokens = 32768
)

// withDefaults returns l with its zero fields set to their defaults.
func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxTools, DefaultMaxTools)
	def(&l.MaxSchemaBytes, DefaultMaxSchemaBytes)
	def(&l.MaxEmbeddingInputs, DefaultMaxEmbeddingInputs)
	def(&l.MaxEmbeddingTokens, DefaultMaxEmbeddingTokens)
	def(&l.MaxMedia, DefaultMaxMedia)
	def(&l.MaxMediaBytes, DefaultMaxMediaBytes)
	def(&l.MaxMediaPixels, DefaultMaxMediaPixels)
	return l
}

// schemaTooLarge is the error of a schema (what) of n bytes over limit.
func schemaTooLarge(param, what string, n, limit int) *requestError {
	return &requestError{status: http.StatusBadRequest, param: param, code: "schema_too_large",
		msg: fmt.Sprintf("%s: %d bytes of JSON Schema, more than the %d a request may have (llamaserve --max-schema-bytes)", what, n, limit)}
}
