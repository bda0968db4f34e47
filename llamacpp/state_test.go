package llamacpp_test

import (
	"encoding/binary"
	"testing"

	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A sequence's state restored into another sequence scores the next token
// as the original does; a state cut short or with changed bytes, or one
// given to a sequence that is not empty, is refused without a crash and
// leaves the target sequence empty.
func TestSeqState(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 2})
	b := newBatch(t, 64, 1)
	toks := randomTokens(1, 10, m.Vocab().Size())
	decodeSeq(t, ctx, b, 0, 0, toks)
	state, err := ctx.SeqState(0)
	require.NoError(t, err)

	empty := func() {
		t.Helper()
		p, err := ctx.SeqPosMax(1)
		require.NoError(t, err)
		require.Equal(t, int32(-1), p, "sequence 1 is empty")
	}
	for cut := 0; cut < len(state); cut += max(1, len(state)/40) {
		err := ctx.SetSeqState(1, state[:cut])
		require.ErrorIs(t, err, llamacpp.ErrState, "cut at %d", cut)
		empty()
	}
	streams := append([]byte(nil), state...)
	h := llamacpp.SeqStateHeaderLen() // llama.cpp's header before the KV cache's part
	binary.LittleEndian.PutUint32(streams[h:], 1)
	require.ErrorContains(t, ctx.SetSeqState(1, streams), "KV cache of 1 streams, this context has 2")
	empty()
	// Cell metadata that llama.cpp rejects: a cell of two sequences, a
	// cell count beyond the cache.
	for _, patch := range []struct{ at, v int }{{4 + 4 + 4, 2}, {4, 1 << 30}, {4, 600}, {4, 200}, {4, 11}} {
		bad := append([]byte(nil), state...)
		binary.LittleEndian.PutUint32(bad[h+patch.at:], uint32(patch.v))
		require.ErrorIs(t, ctx.SetSeqState(1, bad), llamacpp.ErrState)
		empty()
	}

	// Corrupted positions, which llama.cpp would store: negative, beyond
	// the sequence, INT_MIN, one position twice. The error names them.
	for _, tc := range []struct {
		cell int
		pos  int32
		want string
	}{
		{0, -1, "cell 0: position -1 outside the sequence's [0, 256)"},
		{3, 16 << 20, "cell 3: position 16777216 outside"},
		{9, -1 << 31, "cell 9: position -2147483648 outside"},
		{5, 256, "cell 5: position 256 outside"},
		{1, 0, "cell 1: position 0 twice"},
	} {
		bad := append([]byte(nil), state...)
		binary.LittleEndian.PutUint32(bad[h+8+12*tc.cell:], uint32(tc.pos))
		err := ctx.SetSeqState(1, bad)
		require.ErrorIs(t, err, llamacpp.ErrState)
		assert.ErrorContains(t, err, tc.want)
		empty()
	}

	require.NoError(t, ctx.SetSeqState(1, state))
	p, err := ctx.SeqPosMax(1)
	require.NoError(t, err)
	assert.Equal(t, int32(9), p)
	next := randomTokens(2, 1, m.Vocab().Size())
	want := decodeSeq(t, ctx, b, 0, 10, next)
	got := decodeSeq(t, ctx, b, 1, 10, next)
	assert.Equal(t, want, got, "the restored cells are the original's, bit for bit")

	require.ErrorIs(t, ctx.SetSeqState(1, state), llamacpp.ErrInvalidArgument, "sequence 1 is not empty")
	_, err = ctx.SeqState(2)
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	ctx.Close()
	_, err = ctx.SeqState(0)
	require.ErrorIs(t, err, llamacpp.ErrClosed)
}

// The walk over a state's KV-cache part (which SetSeqState does for a
// hybrid model, to find its recurrent part) ends exactly at the end of the
// states llama.cpp writes for an attention-only model, in every layout
// that changes them: per-sequence or unified streams, values transposed
// (no flash attention) or not; a state cut short is refused.
func TestKVStateLen(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	for _, unified := range []bool{false, true} {
		for _, fa := range []llamacpp.FlashAttention{llamacpp.FlashAttentionOff, llamacpp.FlashAttentionOn} {
			ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 2, UnifiedKV: unified, FlashAttention: fa})
			b := newBatch(t, 64, 1)
			decodeSeq(t, ctx, b, 1, 0, randomTokens(3, 7, m.Vocab().Size()))
			state, err := ctx.SeqState(1)
			require.NoError(t, err)
			n, err := llamacpp.KVStateLen(state)
			require.NoError(t, err, "unified %v, %v", unified, fa)
			assert.Equal(t, len(state), n, "unified %v, %v", unified, fa)
			for _, cut := range []int{3, 9, len(state) / 2, len(state) - 1} {
				_, err := llamacpp.KVStateLen(state[:cut])
				require.ErrorIs(t, err, llamacpp.ErrState, "cut at %d", cut)
			}
			ctx.Close()
		}
	}
}
