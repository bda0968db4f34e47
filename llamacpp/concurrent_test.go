package llamacpp_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Encode, Decode and the sequence operations called at once from several
// goroutines on one T5 context wait for each other (the context's lock)
// instead of aborting inside llama.cpp: every call succeeds, and what the
// decoders left in the cache gives the reference's logits, as a serial run
// does. The goroutines start together on a closed channel; each repeats its
// calls, so that they overlap on any machine without depending on timing.
func TestT5ConcurrentEncodeDecode(t *testing.T) {
	m := loadModel(t, "tiny-t5")
	ref := loadT5Reference(t)
	const seqs = 4 // 0 and 1 decoded, 2 left empty, 3 a scratch copy
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, BatchSize: 64, Sequences: seqs, UnifiedKV: true})
	nv := m.Vocab().Size()
	in := randomTokens(21, 12, nv)
	dec := [][]int32{
		append([]int32{ref.DecoderStart}, randomTokens(22, 15, nv)...),
		append([]int32{ref.DecoderStart}, randomTokens(23, 15, nv)...),
	}
	// Every Encode covers every sequence with the same input, so that any
	// interleaving leaves the same cross-attention state.
	encode := func(b *llamacpp.Batch) error {
		b.Clear()
		for p, tok := range in {
			if _, err := b.AddShared(tok, int32(p), []int32{0, 1, 2, 3}, false); err != nil {
				return err
			}
		}
		return ctx.Encode(context.Background(), b)
	}
	require.NoError(t, encode(newBatch(t, 64, seqs)))

	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 1024)
	run := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := f(); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	encB := newBatch(t, 64, seqs)
	run("encoder", func() error {
		for range 20 {
			if err := encode(encB); err != nil {
				return err
			}
		}
		return nil
	})
	for s := range 2 {
		b := newBatch(t, 64, 1)
		run(fmt.Sprintf("decoder %d", s), func() error {
			// all but the last token, one per Decode; the last is decoded
			// after the others stopped, to read its logits
			for p, tok := range dec[s][:len(dec[s])-1] {
				b.Clear()
				if _, err := b.Add(tok, int32(p), int32(s), true); err != nil {
					return err
				}
				if err := ctx.Decode(context.Background(), b); err != nil {
					return fmt.Errorf("position %d: %w", p, err)
				}
			}
			return nil
		})
	}
	run("sequence ops", func() error {
		for range 20 {
			for s := range int32(seqs) {
				if _, err := ctx.SeqPosMax(s); err != nil {
					return err
				}
				if _, err := ctx.SeqPosMin(s); err != nil {
					return err
				}
			}
			if err := ctx.SeqCopy(0, 3, -1, -1); err != nil {
				return err
			}
			state, err := ctx.SeqState(3)
			if err != nil {
				return err
			}
			if err := ctx.SeqRemove(3, -1, -1); err != nil {
				return err
			}
			if err := ctx.SetSeqState(3, state); err != nil {
				return err
			}
			if err := ctx.SeqRemove(3, -1, -1); err != nil {
				return err
			}
			ctx.Perf()
			ctx.Threads()
		}
		return nil
	})
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	if t.Failed() {
		return
	}

	tol := llamatest.Tolerance(t, llamatest.T5)
	b := newBatch(t, 64, 1)
	for s, toks := range dec {
		n := len(toks)
		pmax, err := ctx.SeqPosMax(int32(s))
		require.NoError(t, err)
		require.Equal(t, int32(n-2), pmax, "sequence %d", s)
		got := decodeSeq(t, ctx, b, int32(s), n-1, toks[n-1:])
		d := maxDiff(t, got, refDecode(t, ref, in, toks)[n-1:])
		t.Logf("sequence %d after the concurrent calls: largest |llama.cpp - reference| %.3g", s, d)
		require.LessOrEqual(t, d, tol)
	}
	for _, s := range []int32{2, 3} {
		pmax, err := ctx.SeqPosMax(s)
		require.NoError(t, err)
		require.Equal(t, int32(-1), pmax, "sequence %d stays empty", s)
	}
}
