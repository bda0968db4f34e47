package backend

import (
	"errors"
	"fmt"
	"math"
)

// EmbeddingInput is an optional interface of a Backend that evaluates input
// embeddings in place of tokens (Feed.Embd): what a vision or audio encoder
// gives a decoder. It is a separate interface, found by a type assertion,
// so that token-only backends carry nothing for it; package generation
// refuses a request with embeddings on a backend without it.
//
// The token at an embedding position stays in the slot's history as a
// placeholder: Copy and Truncate treat it as any token, and a prefix
// cache must not match placeholders across different embeddings
// (prefixcache compares a hash of each embedding with its token).
type EmbeddingInput interface {
	Backend

	// InputEmbeddingSize is the width of an input embedding.
	InputEmbeddingSize() int
}

// ErrBadEmbedding reports a Feed.Embd that does not fit its feed or the
// model: a row count other than the tokens', a width other than the
// model's, a NaN or an infinity.
var ErrBadEmbedding = errors.New("invalid input embedding")

// CheckEmbd checks feeds[i].Embd against its tokens and width; what every
// EmbeddingInput's Eval does first.
func CheckEmbd(feeds []Feed, i, width int) error {
	f := feeds[i]
	if f.Embd == nil {
		return nil
	}
	if len(f.Embd) != len(f.Tokens) {
		return fmt.Errorf("%w: feed %d has %d embedding entries for %d tokens", ErrBadEmbedding, i, len(f.Embd), len(f.Tokens))
	}
	for j, e := range f.Embd {
		if e == nil {
			continue
		}
		if len(e) != width {
			return fmt.Errorf("%w: feed %d, position %d: width %d, the model's is %d", ErrBadEmbedding, i, j, len(e), width)
		}
		for k, v := range e {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%w: feed %d, position %d holds %v at %d", ErrBadEmbedding, i, j, v, k)
			}
		}
	}
	return nil
}

// EmbdAt is the input embedding of position j of f, or nil for its token.
func EmbdAt(f Feed, j int) []float32 {
	if f.Embd == nil {
		return nil
	}
	return f.Embd[j]
}
