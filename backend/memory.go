package backend

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// ModelFunc returns the next-token logits after history (a toy model: a
// table or a function). history aliases the backend's storage: the function
// must neither keep nor modify it. The returned slice must have the
// backend's vocabulary size; the backend copies it, so the function may
// return the same buffer every time.
type ModelFunc func(history []int32) ([]float32, error)

// MemoryBackend implements Backend over a ModelFunc; each slot is a plain
// token history. It is exact and deterministic, which makes it the backend
// of the loop's and the search's tests, of the parity replays and of
// benchmarks of the loop itself.
//
// Like llama.cpp, it evaluates a feed in chunks of at most BatchSize tokens
// (default: the whole feed) and checks the context between chunks, and it
// asks the model only for the logits after the last token of each feed. It
// counts its work (see MemoryStats) so that tests can check, for example,
// that a prompt is evaluated once.
type MemoryBackend struct {
	vocabSize int
	model     ModelFunc
	histories [][]int32
	capacity  int
	batchSize int

	// out[i] holds the logits of feeds[i] of the last successful Eval.
	out   [][]float32
	nOut  int
	stats MemoryStats

	// all[i] holds every row of feeds[i] of the last successful EvalAll
	// (AllLogits), valid while nAll > i and the Eval outputs are.
	all  [][]float32
	nAll int
}

// MemoryStats counts the work a MemoryBackend did.
type MemoryStats struct {
	EvalCalls  int // calls of Eval, failed ones included
	Chunks     int // batches of at most BatchSize tokens (llama_decode calls in llama.cpp)
	ModelCalls int // calls of the ModelFunc, one per evaluated feed
	Tokens     int // tokens appended to histories
}

// NewMemoryBackend returns a backend with slots empty slots over model,
// whose logits rows have vocabSize entries. Slots have no size limit until
// SetCapacity.
func NewMemoryBackend(vocabSize, slots int, model ModelFunc) *MemoryBackend {
	return &MemoryBackend{
		vocabSize: vocabSize,
		model:     model,
		histories: make([][]int32, slots),
		capacity:  math.MaxInt,
		batchSize: math.MaxInt,
	}
}

// SetCapacity limits each slot to n tokens, like the KV cells of a llama.cpp
// sequence: Room reports n minus the slot's length and Eval fails on a feed
// that does not fit. n <= 0 removes the limit.
func (b *MemoryBackend) SetCapacity(n int) {
	if n <= 0 {
		n = math.MaxInt
	}
	b.capacity = n
}

// SetBatchSize makes Eval process at most n tokens per chunk (n_batch in
// llama.cpp) and check its context between chunks. n <= 0 means unlimited.
func (b *MemoryBackend) SetBatchSize(n int) {
	if n <= 0 {
		n = math.MaxInt
	}
	b.batchSize = n
}

// Stats reports the work done since the backend was made or ResetStats.
func (b *MemoryBackend) Stats() MemoryStats { return b.stats }

// ResetStats sets every counter to zero.
func (b *MemoryBackend) ResetStats() { b.stats = MemoryStats{} }

// History returns the tokens slot holds. The slice aliases the backend's
// storage and is valid until the next Eval, Copy or Clear.
func (b *MemoryBackend) History(slot int) []int32 {
	if slot < 0 || slot >= len(b.histories) {
		return nil
	}
	return b.histories[slot]
}

// VocabSize implements Backend.
func (b *MemoryBackend) VocabSize() int { return b.vocabSize }

// Slots implements Backend.
func (b *MemoryBackend) Slots() int { return len(b.histories) }

// Room implements Backend: math.MaxInt without a capacity, otherwise the
// capacity minus the slot's length. An invalid slot has no room.
func (b *MemoryBackend) Room(slot int) int {
	if slot < 0 || slot >= len(b.histories) {
		return 0
	}
	if b.capacity == math.MaxInt {
		return math.MaxInt
	}
	return b.capacity - len(b.histories[slot])
}

// Eval implements Backend. It validates every feed before it changes any
// history, so a rejected call (bad slot, empty feed, token outside the
// vocabulary, no room) leaves every slot as it was; only a cancellation or a
// model error in the middle of a call leaves histories partly extended.
func (b *MemoryBackend) Eval(ctx context.Context, feeds []Feed) error {
	b.stats.EvalCalls++
	b.nOut, b.nAll = 0, 0
	if err := b.check(feeds); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for len(b.out) < len(feeds) {
		b.out = append(b.out, make([]float32, b.vocabSize))
	}
	// Chunks of batchSize tokens taken across feeds in order, as a llama.cpp
	// backend fills its batches; the model is asked once a feed is complete.
	room := b.batchSize
	for i, f := range feeds {
		toks := f.Tokens
		for len(toks) > 0 {
			if room == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
				room = b.batchSize
			}
			n := min(room, len(toks))
			if room == b.batchSize {
				b.stats.Chunks++
			}
			b.histories[f.Slot] = append(b.histories[f.Slot], toks[:n]...)
			b.stats.Tokens += n
			toks = toks[n:]
			room -= n
		}
		b.stats.ModelCalls++
		logits, err := b.model(b.histories[f.Slot])
		if err != nil {
			return fmt.Errorf("backend: memory model: %w", err)
		}
		if len(logits) != b.vocabSize {
			return fmt.Errorf("backend: memory model returned %d logits, want %d", len(logits), b.vocabSize)
		}
		copy(b.out[i], logits)
	}
	b.nOut = len(feeds)
	return nil
}

func (b *MemoryBackend) check(feeds []Feed) error {
	for i, f := range feeds {
		if f.Slot < 0 || f.Slot >= len(b.histories) {
			return fmt.Errorf("backend: feed %d: slot %d out of range [0,%d)", i, f.Slot, len(b.histories))
		}
		if len(f.Tokens) == 0 {
			return fmt.Errorf("backend: feed %d: no tokens", i)
		}
		if f.Pos != nil {
			return fmt.Errorf("backend: feed %d: %w: a memory model reads tokens only, at no position", i, ErrBadPosition)
		}
		for j := range i {
			if feeds[j].Slot == f.Slot {
				return fmt.Errorf("backend: feeds %d and %d share slot %d", j, i, f.Slot)
			}
		}
		for _, t := range f.Tokens {
			if t < 0 || int(t) >= b.vocabSize {
				return fmt.Errorf("backend: feed %d: %w: %d not in [0,%d)", i, ErrTokenOutOfRange, t, b.vocabSize)
			}
		}
		if len(f.Tokens) > b.Room(f.Slot) {
			return fmt.Errorf("backend: feed %d: %d tokens for slot %d with room for %d: %w",
				i, len(f.Tokens), f.Slot, b.Room(f.Slot), errNoRoom)
		}
	}
	return nil
}

var errNoRoom = errors.New("slot full")

// Logits implements Backend. It returns nil for an index that was not a
// feed of the last successful Eval.
func (b *MemoryBackend) Logits(i int) []float32 {
	if i < 0 || i >= b.nOut {
		return nil
	}
	return b.out[i]
}

// Copy implements Backend.
func (b *MemoryBackend) Copy(dst, src int) error {
	if dst < 0 || dst >= len(b.histories) || src < 0 || src >= len(b.histories) {
		return fmt.Errorf("backend: copy %d to %d: slot out of range [0,%d)", src, dst, len(b.histories))
	}
	if dst == src {
		return nil
	}
	b.histories[dst] = append(b.histories[dst][:0], b.histories[src]...)
	b.nOut = 0
	return nil
}

// Truncate implements Backend.
func (b *MemoryBackend) Truncate(slot, n int) error {
	if slot < 0 || slot >= len(b.histories) {
		return fmt.Errorf("backend: truncate %d: slot out of range [0,%d)", slot, len(b.histories))
	}
	if n < 0 || n > len(b.histories[slot]) {
		return fmt.Errorf("backend: truncate slot %d of %d tokens to %d", slot, len(b.histories[slot]), n)
	}
	b.histories[slot] = b.histories[slot][:n]
	b.nOut = 0
	return nil
}

// Clear implements Backend.
func (b *MemoryBackend) Clear(slot int) error {
	if slot < 0 || slot >= len(b.histories) {
		return fmt.Errorf("backend: clear %d: slot out of range [0,%d)", slot, len(b.histories))
	}
	b.histories[slot] = b.histories[slot][:0]
	b.nOut = 0
	return nil
}
