package llamacpp_test

import (
	"context"
	"errors"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/require"
)

func loadT5Reference(t testing.TB) *reference.T5 {
	t.Helper()
	r, err := reference.LoadT5(modelPath(t, "tiny-t5"))
	require.NoError(t, err)
	return r
}

// encodeSeqs runs the encoder over inputs, input i shared by the sequences
// seqs[i], in one Encode.
func encodeSeqs(t testing.TB, ctx *llamacpp.Context, b *llamacpp.Batch, inputs [][]int32, seqs [][]int32) {
	t.Helper()
	b.Clear()
	for i, in := range inputs {
		for p, tok := range in {
			_, err := b.AddShared(tok, int32(p), seqs[i], false)
			require.NoError(t, err)
		}
	}
	require.NoError(t, ctx.Encode(context.Background(), b))
}

// refDecode is the reference's logits of decoder tokens after encoder input in.
func refDecode(t testing.TB, ref *reference.T5, in, dec []int32) [][]float64 {
	t.Helper()
	enc, err := ref.Encode(in)
	require.NoError(t, err)
	rows, err := ref.NewDecoder(enc).Eval(dec)
	require.NoError(t, err)
	return rows
}

func TestT5Model(t *testing.T) {
	m := loadModel(t, "tiny-t5")
	require.True(t, m.HasEncoder())
	start, ok := m.DecoderStart()
	require.True(t, ok)
	require.Equal(t, testmodel.TinyT5().DecoderStart, start)
	require.Equal(t, "t5", m.Info().Architecture)

	tiny := loadModel(t, "tiny-f32")
	require.False(t, tiny.HasEncoder())
	_, ok = tiny.DecoderStart()
	require.False(t, ok)
}

// The encoder (bidirectional relative buckets beyond max_exact), the
// decoder's causal self-attention with its buckets and the cross-attention
// agree with the float64 reference at every decoder position, decoded in
// two pieces to use the KV cache.
func TestT5LogitsMatchReference(t *testing.T) {
	m := loadModel(t, "tiny-t5")
	ref := loadT5Reference(t)
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, BatchSize: 128})
	b := newBatch(t, 128, 1)
	in := randomTokens(5, 40, m.Vocab().Size())
	dec := append([]int32{ref.DecoderStart}, randomTokens(6, 39, m.Vocab().Size())...)
	encodeSeqs(t, ctx, b, [][]int32{in}, [][]int32{{0}})
	got := append(decodeSeq(t, ctx, b, 0, 0, dec[:25]), decodeSeq(t, ctx, b, 0, 25, dec[25:])...)
	d := maxDiff(t, got, refDecode(t, ref, in, dec))
	t.Logf("t5: largest |llama.cpp - reference| over %d decoder positions x %d logits: %.3g", len(dec), m.Vocab().Size(), d)
	require.LessOrEqual(t, d, llamatest.Tolerance(t, llamatest.T5))
}

// Two encoder inputs encoded together, one of them shared by two
// sequences, and three decoder sequences decoded together, the shared
// one's two copies diverging after a SeqCopy: each agrees with the
// reference alone. llama.cpp's cross-attention reads the encoder output of
// the last Encode for every sequence listed on its tokens, so a copied
// sequence keeps its encoder input as long as the copy's id was encoded too.
func TestT5SequencesAndCopyMatchReference(t *testing.T) {
	m := loadModel(t, "tiny-t5")
	ref := loadT5Reference(t)
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, BatchSize: 128, Sequences: 3, UnifiedKV: true})
	b := newBatch(t, 128, 3)
	nv := m.Vocab().Size()
	inA, inB := randomTokens(7, 12, nv), randomTokens(8, 30, nv)
	encodeSeqs(t, ctx, b, [][]int32{inA, inB}, [][]int32{{0, 1}, {2}})

	start := ref.DecoderStart
	prefix := append([]int32{start}, randomTokens(9, 4, nv)...)
	decB := append([]int32{start}, randomTokens(10, 9, nv)...)
	decodeSeq(t, ctx, b, 0, 0, prefix)
	require.NoError(t, ctx.SeqCopy(0, 1, -1, -1))
	tail0, tail1 := randomTokens(11, 5, nv), randomTokens(12, 5, nv)

	b.Clear()
	idx := map[int32][]int{}
	add := func(seq int32, pos int, toks []int32) {
		for i, tok := range toks {
			k, err := b.Add(tok, int32(pos+i), seq, true)
			require.NoError(t, err)
			idx[seq] = append(idx[seq], k)
		}
	}
	add(0, len(prefix), tail0)
	add(1, len(prefix), tail1)
	add(2, 0, decB)
	require.NoError(t, ctx.Decode(context.Background(), b))
	rows := func(seq int32) [][]float32 {
		var out [][]float32
		for _, k := range idx[seq] {
			r, err := ctx.CopyLogits(nil, k)
			require.NoError(t, err)
			out = append(out, r)
		}
		return out
	}
	tol := llamatest.Tolerance(t, llamatest.T5)
	want0 := refDecode(t, ref, inA, append(append([]int32(nil), prefix...), tail0...))[len(prefix):]
	want1 := refDecode(t, ref, inA, append(append([]int32(nil), prefix...), tail1...))[len(prefix):]
	d0, d1, d2 := maxDiff(t, rows(0), want0), maxDiff(t, rows(1), want1), maxDiff(t, rows(2), refDecode(t, ref, inB, decB))
	t.Logf("t5 batched: largest differences %.3g (seq 0), %.3g (seq 1, copied), %.3g (seq 2)", d0, d1, d2)
	require.LessOrEqual(t, max(d0, d1, d2), tol)
}

func TestT5BadInput(t *testing.T) {
	m := loadModel(t, "tiny-t5")
	_, err := m.NewContext(llamacpp.ContextParams{ContextSize: 512, Sequences: 2, Threads: 1})
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	require.ErrorContains(t, err, "needs UnifiedKV")

	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, BatchSize: 64, MicroBatchSize: 16, Sequences: 2, UnifiedKV: true})
	b := newBatch(t, 64, 2)
	// Decoding before any Encode would make llama.cpp read an empty
	// cross-attention state.
	_, err = b.Add(0, 0, 0, true)
	require.NoError(t, err)
	err = ctx.Decode(context.Background(), b)
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	require.ErrorContains(t, err, "sequence 0 at batch index 0 has no encoder output")

	// More than one micro-batch of encoder input.
	b.Clear()
	for p, tok := range randomTokens(1, 17, m.Vocab().Size()) {
		_, err := b.Add(tok, int32(p), 0, false)
		require.NoError(t, err)
	}
	err = ctx.Encode(context.Background(), b)
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	require.ErrorContains(t, err, "exceeds the micro-batch size 16")

	// A sequence the last Encode did not list.
	encodeSeqs(t, ctx, b, [][]int32{randomTokens(2, 5, m.Vocab().Size())}, [][]int32{{0}})
	b.Clear()
	_, err = b.Add(0, 0, 1, true)
	require.NoError(t, err)
	require.ErrorContains(t, ctx.Decode(context.Background(), b), "sequence 1 at batch index 0 has no encoder output")

	// A cancelled Encode leaves no sequence encoded.
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.Clear()
	_, err = b.Add(5, 0, 0, false)
	require.NoError(t, err)
	require.True(t, errors.Is(ctx.Encode(cctx, b), llamacpp.ErrAborted))

	// A decoder-only model has no encoder.
	tiny := newContext(t, loadModel(t, "tiny-f32"), llamacpp.ContextParams{ContextSize: 256})
	require.ErrorContains(t, tiny.Encode(context.Background(), b), "has no encoder")
}

// In llama.cpp's default context (f16 KV cache, flash attention chosen by
// llama.cpp, which the cross-attention may take) the t5 logits stay close
// to the reference, as the llama ones do.
func TestT5DefaultContextNearReference(t *testing.T) {
	m := loadModel(t, "tiny-t5")
	ref := loadT5Reference(t)
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, BatchSize: 128, TypeK: llamacpp.KVF16, TypeV: llamacpp.KVF16,
		FlashAttention: llamacpp.FlashAttentionAuto})
	b := newBatch(t, 128, 1)
	in := randomTokens(5, 40, m.Vocab().Size())
	dec := append([]int32{ref.DecoderStart}, randomTokens(6, 39, m.Vocab().Size())...)
	encodeSeqs(t, ctx, b, [][]int32{in}, [][]int32{{0}})
	d := maxDiff(t, decodeSeq(t, ctx, b, 0, 0, dec), refDecode(t, ref, in, dec))
	t.Logf("t5, default context: largest |llama.cpp - reference|: %.3g", d)
	require.LessOrEqual(t, d, llamatest.Tolerance(t, llamatest.DefaultContext))
}
