package llamacpp_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/require"
)

// llama.cpp's defaults (f16 KV cache, flash attention chosen automatically,
// which on the CPU rounds attention inputs to f16) stay close to the
// reference too, only less so.
func TestDefaultContextNearReference(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	ref := loadReference(t, "tiny-f32")
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, BatchSize: 128, TypeK: llamacpp.KVF16, TypeV: llamacpp.KVF16,
		FlashAttention: llamacpp.FlashAttentionAuto})
	b := newBatch(t, 128, 1)
	tokens := randomTokens(1, 100, m.Vocab().Size())
	want, err := ref.Logits(tokens)
	require.NoError(t, err)
	d := maxDiff(t, decodeSeq(t, ctx, b, 0, 0, tokens), want)
	t.Logf("default context: largest |llama.cpp - reference|: %.3g", d)
	require.LessOrEqual(t, d, llamatest.Tolerance(t, llamatest.DefaultContext))
}

// Every position of one sequence agrees with the reference.
func TestLogitsMatchReference(t *testing.T) {
	for _, name := range []string{"tiny-f32", "tiny-f16", "prefix"} {
		t.Run(name, func(t *testing.T) {
			m := loadModel(t, name)
			ref := loadReference(t, name)
			ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, BatchSize: 128})
			b := newBatch(t, 128, 1)
			tokens := randomTokens(1, 100, m.Vocab().Size())
			want, err := ref.Logits(tokens)
			require.NoError(t, err)
			// Decode in two pieces to also exercise the KV cache.
			got := append(decodeSeq(t, ctx, b, 0, 0, tokens[:60]), decodeSeq(t, ctx, b, 0, 60, tokens[60:])...)
			d := maxDiff(t, got, want)
			t.Logf("%s: largest |llama.cpp - reference| over %d positions x %d logits: %.3g", name, len(tokens), m.Vocab().Size(), d)
			require.LessOrEqual(t, d, llamatest.Tolerance(t, llamatest.Check(name)))
		})
	}
}

// Several sequences of different lengths decoded together in one batch each
// agree with the reference evaluated alone.
func TestBatchedSequencesMatchReference(t *testing.T) {
	for _, unified := range []bool{false, true} {
		t.Run(fmt.Sprintf("unified=%v", unified), func(t *testing.T) {
			m := loadModel(t, "tiny-f32")
			ref := loadReference(t, "tiny-f32")
			ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 1024, BatchSize: 256, Sequences: 3, UnifiedKV: unified})
			b := newBatch(t, 256, 1)
			prompts := [][]int32{randomTokens(2, 17, 856), randomTokens(3, 5, 856), randomTokens(4, 40, 856)}
			// Interleave the sequences token by token in one batch.
			index := make([][]int, len(prompts))
			for i := 0; i < 40; i++ {
				for s, p := range prompts {
					if i < len(p) {
						k, err := b.Add(p[i], int32(i), int32(s), true)
						require.NoError(t, err)
						index[s] = append(index[s], k)
					}
				}
			}
			require.NoError(t, ctx.Decode(context.Background(), b))
			for s, p := range prompts {
				got := make([][]float32, len(p))
				for i, k := range index[s] {
					got[i], _ = ctx.CopyLogits(nil, k)
				}
				want, err := ref.Logits(p)
				require.NoError(t, err)
				require.LessOrEqual(t, maxDiff(t, got, want), llamatest.Tolerance(t, llamatest.TinyF32), "sequence %d", s)
			}
		})
	}
}

// A sequence copied from another and then extended gives exactly the logits
// of evaluating its full history from scratch; so does the source, extended
// differently. The prefix oracle's logits depend on the whole prefix, so a
// copy that lost or mixed history would show.
func TestSeqCopyKeepsHistory(t *testing.T) {
	for _, name := range []string{"prefix", "tiny-f32"} {
		for _, unified := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/unified=%v", name, unified), func(t *testing.T) {
				m := loadModel(t, name)
				ref := loadReference(t, name)
				ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 1024, BatchSize: 64, Sequences: 3, UnifiedKV: unified})
				b := newBatch(t, 64, 1)
				prefix := randomTokens(5, 30, m.Vocab().Size())
				tailA, tailB := randomTokens(6, 8, m.Vocab().Size()), randomTokens(7, 8, m.Vocab().Size())
				decodeSeq(t, ctx, b, 0, 0, prefix)
				require.NoError(t, ctx.SeqCopy(0, 2, -1, -1))
				gotB := decodeSeq(t, ctx, b, 2, len(prefix), tailB)
				gotA := decodeSeq(t, ctx, b, 0, len(prefix), tailA)
				for _, c := range []struct {
					tail []int32
					got  [][]float32
				}{{tailA, gotA}, {tailB, gotB}} {
					full, err := ref.Logits(append(append([]int32{}, prefix...), c.tail...))
					require.NoError(t, err)
					require.LessOrEqual(t, maxDiff(t, c.got, full[len(prefix):]), llamatest.Tolerance(t, llamatest.Check(name)))
				}
				if unified {
					// A partial copy shares only [0, 10): seq 1 continues from 10.
					require.NoError(t, ctx.SeqCopy(0, 1, 0, 10))
					p, _ := ctx.SeqPosMax(1)
					require.Equal(t, int32(9), p)
					got := decodeSeq(t, ctx, b, 1, 10, tailB)
					full, err := ref.Logits(append(append([]int32{}, prefix[:10]...), tailB...))
					require.NoError(t, err)
					require.LessOrEqual(t, maxDiff(t, got, full[10:]), llamatest.Tolerance(t, llamatest.Check(name)))
				} else {
					require.ErrorIs(t, ctx.SeqCopy(0, 1, 0, 10), llamacpp.ErrInvalidArgument)
				}
			})
		}
	}
}

// A removed range is forgotten: after removing a tail and decoding other
// tokens, the logits are those of the kept prefix plus the new tokens.
func TestSeqRemoveForgets(t *testing.T) {
	m := loadModel(t, "prefix")
	ref := loadReference(t, "prefix")
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, BatchSize: 64, Sequences: 2})
	b := newBatch(t, 64, 1)
	first := randomTokens(8, 25, m.Vocab().Size())
	decodeSeq(t, ctx, b, 0, 0, first)
	require.NoError(t, ctx.SeqRemove(0, 12, -1))
	p, _ := ctx.SeqPosMax(0)
	require.Equal(t, int32(11), p)
	next := randomTokens(9, 10, m.Vocab().Size())
	got := decodeSeq(t, ctx, b, 0, 12, next)
	want, err := ref.Logits(append(append([]int32{}, first[:12]...), next...))
	require.NoError(t, err)
	require.LessOrEqual(t, maxDiff(t, got, want[12:]), llamatest.Tolerance(t, llamatest.Prefix))

	// Keep, shift, divide and clear act on positions as documented.
	decodeSeq(t, ctx, b, 1, 0, first[:5])
	require.NoError(t, ctx.SeqKeep(1))
	p, _ = ctx.SeqPosMax(0)
	require.Equal(t, int32(-1), p, "SeqKeep(1) drops sequence 0")
	require.NoError(t, ctx.SeqShift(1, 2, -1, 10))
	lo, _ := ctx.SeqPosMin(1)
	hi, _ := ctx.SeqPosMax(1)
	require.Equal(t, []int32{0, 14}, []int32{lo, hi})
	require.NoError(t, ctx.SeqDivide(1, -1, -1, 2))
	hi, _ = ctx.SeqPosMax(1)
	require.Equal(t, int32(7), hi)
	require.NoError(t, ctx.ClearCache())
	hi, _ = ctx.SeqPosMax(1)
	require.Equal(t, int32(-1), hi)
}

// Every KV cache type llama-bench's -ctk and -ctv accept evaluates a
// sequence near the float64 reference: the 16-bit types about as near as
// llama.cpp's default context, 8-bit blocks within 0.5, and the 5 and 4-bit
// ones with a root-mean-square error under 12% and 25% of the logits' own
// (measured 7% and 13-15%: each bit less about doubles it; their largest
// errors reach 3 on this model).
func TestEveryKVTypeNearReference(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	ref := loadReference(t, "tiny-f32")
	tokens := randomTokens(5, 40, m.Vocab().Size())
	want, err := ref.Logits(tokens)
	require.NoError(t, err)
	for _, kv := range llamacpp.KVTypes() {
		t.Run(string(kv), func(t *testing.T) {
			ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 64, TypeK: kv, TypeV: kv,
				FlashAttention: llamacpp.FlashAttentionOn})
			got := decodeSeq(t, ctx, newBatch(t, 64, 1), 0, 0, tokens)
			var sumD, sumW float64
			for i := range got {
				for j := range got[i] {
					d := float64(got[i][j]) - want[i][j]
					sumD, sumW = sumD+d*d, sumW+want[i][j]*want[i][j]
				}
			}
			d, rel := maxDiff(t, got, want), math.Sqrt(sumD/sumW)
			t.Logf("%s: largest |llama.cpp - reference| %.3g, relative RMS error %.3g", kv, d, rel)
			switch kv {
			case llamacpp.KVF32, llamacpp.KVF16, llamacpp.KVBF16:
				require.LessOrEqual(t, d, 2*llamatest.Tolerance(t, llamatest.DefaultContext))
			case llamacpp.KVQ8_0:
				require.LessOrEqual(t, d, 0.5)
			case llamacpp.KVQ5_0, llamacpp.KVQ5_1:
				require.Less(t, rel, 0.12)
			default:
				require.Less(t, rel, 0.25)
			}
		})
	}
}
