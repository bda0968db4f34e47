package backend

import (
	"context"
	"fmt"
)

// AllLogits is an optional interface of a Backend whose evaluation can keep
// the logits after every token of a feed, not only after the last: what
// speculative decoding needs to verify a whole draft with one evaluation
// (package generation). Eval stays as it is, because asking llama.cpp for
// every position's logits costs a row of output per token, which a prompt
// does not want.
type AllLogits interface {
	Backend

	// EvalAll is Eval, except that on success LogitsAt(i, j) holds the
	// next-token logits after the first j+1 tokens of feeds[i], for every j
	// in [0, len(feeds[i].Tokens)), and Logits(i) is LogitsAt(i, last).
	EvalAll(ctx context.Context, feeds []Feed) error

	// LogitsAt returns the logits after token j of feeds[i] of the last
	// successful EvalAll, or nil outside it. Like Logits, the slice aliases
	// the backend's buffer until the next Eval, EvalAll, Copy, Truncate or
	// Clear, and the caller may modify it in place.
	LogitsAt(i, j int) []float32
}

// EvalAll implements AllLogits: every position's row comes from the model,
// which is asked once per position.
func (b *MemoryBackend) EvalAll(ctx context.Context, feeds []Feed) error {
	b.nAll = 0
	// Eval validates, appends and computes the last row of each feed; the
	// rows before it are the model's answers for the shorter histories.
	if err := b.Eval(ctx, feeds); err != nil {
		return err
	}
	if len(b.all) < len(feeds) {
		b.all = append(b.all, make([][]float32, len(feeds)-len(b.all))...)
	}
	for i, f := range feeds {
		h := b.histories[f.Slot]
		n := len(f.Tokens)
		if cap(b.all[i]) < n*b.vocabSize {
			b.all[i] = make([]float32, n*b.vocabSize)
		}
		b.all[i] = b.all[i][:n*b.vocabSize]
		for j := range n - 1 {
			b.stats.ModelCalls++
			row, err := b.model(h[:len(h)-n+j+1])
			if err != nil {
				b.nOut = 0
				return fmt.Errorf("backend: memory model: %w", err)
			}
			if len(row) != b.vocabSize {
				b.nOut = 0
				return fmt.Errorf("backend: memory model returned %d logits, want %d", len(row), b.vocabSize)
			}
			copy(b.all[i][j*b.vocabSize:], row)
		}
		copy(b.all[i][(n-1)*b.vocabSize:], b.out[i])
	}
	b.nAll = len(feeds)
	return nil
}

// LogitsAt implements AllLogits.
func (b *MemoryBackend) LogitsAt(i, j int) []float32 {
	if i < 0 || i >= b.nAll || i >= b.nOut || j < 0 || (j+1)*b.vocabSize > len(b.all[i]) {
		return nil
	}
	return b.all[i][j*b.vocabSize : (j+1)*b.vocabSize]
}

var _ AllLogits = (*MemoryBackend)(nil)
