// Package llamabackend adapts llama.cpp to the contract of package backend:
// [Backend] is a [backend.Backend] over the sequences of one
// llamacpp.Context, and [Tokenizer] a [backend.Tokenizer] and
// [backend.ChatTemplater] over a llamacpp.Vocab. Beside llamacpp itself, it
// is the only cgo dependency of a program that decodes with packages
// generation and beam on llama.cpp:
//
//	lb, err := llamabackend.New(ctx) // ctx: a *llamacpp.Context
//	gen := generation.NewGenerator(lb, llamabackend.Tokenizer{Vocab: model.Vocab()})
//	res, err := beam.Search(context.Background(), lb, prompts, beam.Options{Config: cfg})
//
// The package also holds the llama.cpp-backed tests and benchmarks of the
// decoding loop and of beam search: greedy decoding and beam search against
// the float64 reference forward pass, sampling frequencies, streaming text,
// cancellation inside a prompt evaluation, and throughput beside the raw
// decode loop.
package llamabackend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// Backend is the llama.cpp [backend.Backend]: slot i is sequence i of one
// llamacpp.Context, and every Eval packs the tokens of all its feeds into as
// few llama_decode calls as n_batch allows. Logits are views of llama.cpp's
// buffer, except for feeds whose last token was decoded before the final
// decode of a multi-decode Eval: those rows are copied once.
//
// A context with a unified KV cache (ContextParams.UnifiedKV) makes Copy
// share cells instead of duplicating a whole stream; that is what beam
// search wants. Room is per sequence (SequenceSize minus the sequence's
// length); with a unified cache the sequences also share the total, and an
// Eval that finds the cache full returns an error wrapping
// backend.ErrContextFull (and llamacpp.ErrContextFull), which the decoding
// loop turns into FinishContextFull for the rows of that step.
type Backend struct {
	ctx   *llamacpp.Context
	batch *llamacpp.Batch
	lens  []int
	views [][]float32
	// invariant: the context is batch-invariant (see evalInvariant)
	invariant bool
	copies    [][]float32
	last      []int // per feed: batch index of its last token in the decode that holds it

	all    []float32 // EvalAll: the rows of every token of every feed, in feed order
	allOff []int     // EvalAll: per feed, the index of its first row in all; nil after Eval

	// An Eval whose feeds are not in slot order evaluates them in slot
	// order (inSlotOrder): sorted holds them so, at[i] is the place of the
	// caller's feed i among them (empty when the caller's order was kept),
	// and views, last, copies and allOff are indexed by that place.
	sorted []backend.Feed
	at     []int

	enc *encoderState // an encoder-decoder model's (NewEncoderDecoder), or nil

	// positions of the slots (positions.go); mrope: the model's are
	// multi-position RoPE's
	pos   *backend.SlotPositions
	mrope bool
}

// New makes a Backend of ctx, which it owns from then on for decoding: do
// not decode through ctx directly while the backend is in use. It starts by
// clearing the context's cache. A model with an encoder needs
// NewEncoderDecoder.
func New(ctx *llamacpp.Context) (*Backend, error) {
	if ctx.Model().HasEncoder() {
		return nil, fmt.Errorf("%w: the model is an encoder-decoder: use NewEncoderDecoder", llamacpp.ErrInvalidArgument)
	}
	return newBackend(ctx)
}

func newBackend(ctx *llamacpp.Context) (*Backend, error) {
	if err := ctx.ClearCache(); err != nil {
		return nil, err
	}
	batch, err := llamacpp.NewBatch(ctx.BatchSize(), 1)
	if err != nil {
		return nil, err
	}
	return &Backend{ctx: ctx, batch: batch, lens: make([]int, ctx.Sequences()), invariant: ctx.BatchInvariant(),
		pos: backend.NewSlotPositions(ctx.Sequences()), mrope: ctx.Model().MRoPE()}, nil
}

// Close frees the backend's batches (the context stays open).
func (b *Backend) Close() error {
	if b.enc != nil && b.enc.batch != nil {
		b.enc.batch.Close()
	}
	return b.batch.Close()
}

// Context is the llama.cpp context the backend decodes with.
func (b *Backend) Context() *llamacpp.Context { return b.ctx }

// EOGTokens implements backend.EndOfGeneration: the model's
// end-of-generation tokens, which beam.Search takes as eos_token_id when
// its config has none.
func (b *Backend) EOGTokens() []int32 { return b.ctx.Model().Vocab().EOGTokens() }

// VocabSize implements backend.Backend.
func (b *Backend) VocabSize() int { return b.ctx.VocabSize() }

// Slots implements backend.Backend: the context's Sequences.
func (b *Backend) Slots() int { return len(b.lens) }

// Room implements backend.Backend.
func (b *Backend) Room(slot int) int {
	if slot < 0 || slot >= len(b.lens) {
		return 0
	}
	return max(0, b.ctx.SequenceSize()-b.lens[slot]-b.twinRoom())
}

// Len is the number of tokens slot holds.
func (b *Backend) Len(slot int) int { return b.lens[slot] }

func (b *Backend) checkSlot(slot int) error {
	if slot < 0 || slot >= len(b.lens) {
		return fmt.Errorf("%w: slot %d outside [0, %d)", llamacpp.ErrInvalidArgument, slot, len(b.lens))
	}
	return nil
}

// Eval implements backend.Backend.
func (b *Backend) Eval(ctx context.Context, feeds []backend.Feed) error {
	b.allOff = b.allOff[:0]
	total, err := b.checkFeeds(feeds)
	if err != nil {
		return err
	}
	if b.enc != nil {
		if err := b.prepareEncoder(ctx, feeds); err != nil {
			return err
		}
	}
	if feeds, err = b.inSlotOrder(feeds); err != nil {
		return err
	}
	defer clear(b.sorted) // the caller's tokens
	b.grow(len(feeds))
	if b.invariant {
		return b.evalInvariant(ctx, feeds, false)
	}
	b.batch.Clear()
	done := 0
	first := 0 // first feed whose output is still pending
	for i, f := range feeds {
		next := b.pos.Next(f.Slot, b.lens[f.Slot])
		runs := f.NonCausal
		for j := 0; j < len(f.Tokens); j++ {
			if len(runs) > 0 && runs[0].Start == j {
				n := runs[0].Len()
				if err := b.evalNonCausal(ctx, feeds, first, i, j, n, next, total-done-n > 0); err != nil {
					return err
				}
				first, runs, done = i, runs[1:], done+n
				j += n - 1
				continue
			}
			e := backend.EmbdAt(f, j)
			if b.batch.Len() == b.batch.Cap() || b.switches(e) {
				if err := b.decode(ctx, feeds, first, i, total-done > 0); err != nil {
					return err
				}
				first = i
			}
			isLast := j == len(f.Tokens)-1
			k, _ := b.add(f.Tokens[j], e, backend.PosAt(f, next, j), int32(f.Slot), isLast)
			if isLast {
				b.last[i] = k
			}
			done++
		}
		b.advance(f)
	}
	if b.batch.Len() == 0 {
		return nil // the last feed ended with a non-causal run
	}
	return b.decode(ctx, feeds, first, len(feeds), false)
}

// grow sizes the per-feed buffers for n feeds.
func (b *Backend) grow(n int) {
	if cap(b.views) < n {
		b.views = make([][]float32, n)
		b.last = make([]int, n)
		b.copies = append(b.copies, make([][]float32, n-len(b.copies))...)
	}
	b.views, b.last = b.views[:n], b.last[:n]
}

// checkFeeds validates feeds and returns their total number of tokens.
func (b *Backend) checkFeeds(feeds []backend.Feed) (int, error) {
	nv := int32(b.VocabSize())
	total := 0
	for i, f := range feeds {
		if err := b.checkSlot(f.Slot); err != nil {
			return 0, err
		}
		if len(f.Tokens) == 0 {
			return 0, fmt.Errorf("%w: feed %d is empty", llamacpp.ErrInvalidArgument, i)
		}
		for _, t := range f.Tokens {
			if t < 0 || t >= nv {
				return 0, fmt.Errorf("%w: token %d outside the vocabulary [0, %d)", backend.ErrTokenOutOfRange, t, nv)
			}
		}
		if err := b.checkEmbd(feeds, i); err != nil {
			return 0, err
		}
		if err := b.checkPos(feeds, i); err != nil {
			return 0, err
		}
		total += len(f.Tokens)
	}
	return total, nil
}

// decode runs the batch and collects the outputs of feeds[from:to] whose
// last token it held; more says whether another decode follows, in which
// case the rows are copied out of llama.cpp's buffer.
func (b *Backend) decode(ctx context.Context, feeds []backend.Feed, from, to int, more bool) error {
	if err := b.ctx.Decode(ctx, b.batch); err != nil {
		b.resync(feeds)
		return b.decodeError(err)
	}
	b.collect(feeds, from, to, more)
	return nil
}

// collect takes, after a decode, the rows of feeds[from:to] whose last
// token it held (copies when more decodes follow), and clears the batch.
func (b *Backend) collect(feeds []backend.Feed, from, to int, more bool) {
	inBatch := b.batch.Len()
	for i := from; i < to && i < len(feeds); i++ {
		if b.last[i] < 0 || b.last[i] >= inBatch {
			continue
		}
		row, err := b.ctx.Logits(b.last[i])
		if err != nil {
			continue // this feed's last token is in a later decode
		}
		if more {
			b.copies[i] = append(b.copies[i][:0], row...)
			row = b.copies[i]
		}
		b.views[i] = row
		b.last[i] = -1
	}
	b.batch.Clear()
}

// decodeError is a failed decode's error as the backend contract words it.
func (b *Backend) decodeError(err error) error {
	if errors.Is(err, llamacpp.ErrContextFull) {
		return fmt.Errorf("%w: %w", backend.ErrContextFull, err)
	}
	return err
}

// resync re-reads the true lengths after a failed decode.
func (b *Backend) resync(feeds []backend.Feed) {
	for _, f := range feeds {
		p, err := b.ctx.SeqPosMax(int32(f.Slot))
		if err == nil {
			b.lens[f.Slot] = b.pos.Resync(f.Slot, p)
		}
	}
}

// Logits implements backend.Backend.
func (b *Backend) Logits(i int) []float32 { return b.views[b.place(i)] }

// inSlotOrder returns feeds in increasing slot order: feeds itself when
// they are, else b.sorted, with b.at set for place. Without a unified KV
// cache (one KV stream per sequence) llama.cpp splits a batch into
// micro-batches that each hold sequences of consecutive increasing ids in
// the batch's order (llama_batch_allocr::split_equal), so feeds out of
// slot order, as a prefix cache that moves requests between sequences
// gives them, were decoded a few rows per micro-batch, each micro-batch a
// pass over all the weights: with 8 busy sequences serving ran at 0.7 of
// its speed in order.
func (b *Backend) inSlotOrder(feeds []backend.Feed) ([]backend.Feed, error) {
	b.at = b.at[:0]
	if inOrder(feeds) {
		return feeds, nil
	}
	b.sorted = append(b.sorted[:0], feeds...)
	slices.SortFunc(b.sorted, bySlot)
	if !inOrder(b.sorted) {
		clear(b.sorted)
		return nil, fmt.Errorf("%w: a slot appears twice in feeds", llamacpp.ErrInvalidArgument)
	}
	for _, f := range feeds {
		k, _ := slices.BinarySearchFunc(b.sorted, f, bySlot)
		b.at = append(b.at, k)
	}
	return b.sorted, nil
}

// inOrder reports whether the slots of feeds strictly increase.
func inOrder(feeds []backend.Feed) bool {
	for k := 1; k < len(feeds); k++ {
		if feeds[k-1].Slot >= feeds[k].Slot {
			return false
		}
	}
	return true
}

func bySlot(x, y backend.Feed) int { return cmp.Compare(x.Slot, y.Slot) }

// place is where the caller's feed i was evaluated among the last Eval's
// feeds (inSlotOrder).
func (b *Backend) place(i int) int {
	if i < 0 || i >= len(b.at) {
		return i
	}
	return b.at[i]
}

// Copy implements backend.Backend: dst is emptied, then gets src's cells
// (shared in a unified cache, a whole-stream copy otherwise).
func (b *Backend) Copy(dst, src int) error {
	if err := b.checkSlot(dst); err != nil {
		return err
	}
	if err := b.checkSlot(src); err != nil {
		return err
	}
	if dst == src {
		return nil
	}
	if err := b.ctx.SeqRemove(int32(dst), -1, -1); err != nil {
		return err
	}
	if err := b.ctx.SeqCopy(int32(src), int32(dst), -1, -1); err != nil {
		return err
	}
	b.lens[dst] = b.lens[src]
	b.pos.Copy(dst, src)
	if b.enc != nil {
		b.enc.want[dst] = b.enc.want[src]
	}
	return nil
}

// Truncate implements backend.Backend: the cells of token n and later
// leave slot's sequence (llama_memory_seq_rm from token n's position). A
// recurrent model's memory cannot forget part of a sequence; llama.cpp
// refuses and so does Truncate; nor can a history be cut inside an M-RoPE
// image, whose embeddings share one position.
func (b *Backend) Truncate(slot, n int) error {
	if err := b.checkSlot(slot); err != nil {
		return err
	}
	if n < 0 || n > b.lens[slot] {
		return fmt.Errorf("%w: truncate slot %d of %d tokens to %d", llamacpp.ErrInvalidArgument, slot, b.lens[slot], n)
	}
	if n == b.lens[slot] {
		return nil
	}
	cut, err := b.pos.Cut(slot, n)
	if err != nil {
		return fmt.Errorf("%w: %w", llamacpp.ErrInvalidArgument, err)
	}
	if err := b.ctx.SeqRemove(int32(slot), cut, -1); err != nil {
		return err
	}
	b.lens[slot] = n
	b.pos.Truncate(slot, n)
	return nil
}

// Clear implements backend.Backend.
func (b *Backend) Clear(slot int) error {
	if err := b.checkSlot(slot); err != nil {
		return err
	}
	if err := b.ctx.SeqRemove(int32(slot), -1, -1); err != nil {
		return err
	}
	b.lens[slot] = 0
	b.pos.Clear(slot)
	if b.enc != nil {
		b.enc.want[slot] = nil
	}
	return nil
}

// Tokenizer adapts a llama.cpp vocabulary to [backend.Tokenizer] (through
// the embedded Vocab's methods) and [backend.ChatTemplater]; Template, when
// set, replaces the model's chat template.
type Tokenizer struct {
	*llamacpp.Vocab
	Template string
}

// ApplyChatTemplate implements backend.ChatTemplater with llama.cpp's
// template engine.
func (t Tokenizer) ApplyChatTemplate(messages []backend.Message, addAssistant bool) (string, error) {
	return t.Vocab.ApplyChatTemplate(t.Template, messages, addAssistant)
}

// The adapters satisfy the contract.
var (
	_ backend.Backend         = (*Backend)(nil)
	_ backend.EmbeddingInput  = (*Backend)(nil)
	_ backend.PositionInput   = (*Backend)(nil)
	_ backend.NonCausalInput  = (*Backend)(nil)
	_ backend.EndOfGeneration = (*Backend)(nil)
	_ backend.Tokenizer       = Tokenizer{}
	_ backend.ChatTemplater   = Tokenizer{}
)
