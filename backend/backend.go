package backend

import (
	"context"
	"errors"
)

// Backend evaluates token histories held in numbered slots and exposes the
// next-token logits after each evaluation. The decoding loop of package
// generation and the beam search of package beam are written once against
// it; a slot is a llama.cpp sequence in the llama.cpp backend and a plain
// token history in memory.
//
// A Backend is not safe for concurrent use.
type Backend interface {
	// VocabSize is the width of every logits row.
	VocabSize() int

	// Slots is the number of slots, numbered 0..Slots()-1, that may hold a
	// history at the same time.
	Slots() int

	// Room reports how many more tokens slot can take before the backend is
	// full (a llama.cpp context has a fixed number of KV cells). Backends
	// without such a limit return math.MaxInt.
	Room(slot int) int

	// Eval appends each feed's tokens to the history of its slot and
	// evaluates them: all feeds of one call share the work (one llama_decode
	// per n_batch tokens). A feed may carry a whole prompt. Each slot appears
	// at most once in feeds. On success Logits(i) holds the next-token logits
	// after the last token of feeds[i]. A token outside [0, VocabSize()) is
	// an error wrapping ErrTokenOutOfRange. An implementation whose slots
	// share a fixed store (a unified KV cache) returns an error wrapping
	// ErrContextFull when the store has no room for the feeds. Eval honours
	// ctx within a long evaluation (between its batches at least) and then
	// returns an error that wraps ctx.Err(). On any error the histories of
	// the slots in feeds are undefined and the caller should Clear them.
	Eval(ctx context.Context, feeds []Feed) error

	// Logits returns the next-token logits of feeds[i] of the last successful
	// Eval. The slice aliases the backend's buffer: it is valid until the next
	// call of Eval, Copy or Clear, and the caller may modify it in place.
	Logits(i int) []float32

	// Copy makes slot dst hold exactly the history of slot src, discarding
	// what dst held. Copying a slot onto itself does nothing.
	Copy(dst, src int) error

	// Clear empties slot.
	Clear(slot int) error

	// Truncate keeps the first n tokens of slot's history and forgets the
	// rest, as if only those had been evaluated: what speculative decoding
	// does with rejected draft tokens and a prefix cache with the tail of a
	// shared sequence. n outside [0, length of the history] is an error.
	Truncate(slot, n int) error
}

// Feed is the input of one slot for one Backend.Eval call: Tokens are
// appended to the history of slot Slot. The backend reads Tokens only during
// the call.
type Feed struct {
	Slot   int
	Tokens []int32
	// Embd, when not nil, has one entry per token: a non-nil entry is an
	// input embedding evaluated at that position in place of the token
	// (which stays in the history as its placeholder). Only a backend that
	// implements EmbeddingInput is given one (embeddings.go).
	Embd [][]float32
	// Pos, when not nil, has one entry per token: the position of each
	// input for a model with multi-position RoPE; without it the feed
	// continues at the slot's next position. Only a backend that
	// implements PositionInput is given one (positions.go).
	Pos []Pos
	// NonCausal, when not nil, lists runs of positions of Tokens, each
	// all embeddings, that attend to each other both ways (and to the
	// slot's history): each run is evaluated whole, with causal attention
	// off. Only a backend that implements NonCausalInput is given one
	// (noncausal.go).
	NonCausal []Span
}

// Errors that callers may test for with errors.Is.
var (
	// ErrTokenOutOfRange reports a token id outside [0, vocabulary size).
	ErrTokenOutOfRange = errors.New("token id out of range")
	// ErrContextFull is what a Backend's Eval wraps when the backend as a
	// whole has no room for the feeds (a llama.cpp cache whose sequences
	// share their cells), as opposed to one slot lacking room, which Room
	// reports beforehand.
	ErrContextFull = errors.New("context full")
)
