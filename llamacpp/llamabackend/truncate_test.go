package llamabackend_test

import (
	"context"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/require"
)

// TestLlamaTruncate checks that a truncated sequence scores its next tokens as
// a sequence that never held the forgotten ones: the cells of the removed
// positions are gone, not merely hidden behind a shorter length.
func TestLlamaTruncate(t *testing.T) {
	m := llamaModel(t, "tiny")
	_, b := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 64, Sequences: 2})
	ctx := context.Background()
	prefix := []int32{1, 5, 9, 13}
	require.NoError(t, b.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: append(append([]int32{}, prefix...), 20, 21, 22)}}))
	require.NoError(t, b.Truncate(0, len(prefix)))
	require.Equal(t, len(prefix), b.Len(0))
	pos, err := b.Context().SeqPosMax(0)
	require.NoError(t, err)
	require.EqualValues(t, len(prefix)-1, pos, "cells past the kept prefix must leave the cache")

	require.NoError(t, b.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: []int32{30}}, {Slot: 1, Tokens: append(append([]int32{}, prefix...), 30)}}))
	require.InDeltaSlice(t, b.Logits(1), b.Logits(0), 1e-4)

	require.Error(t, b.Truncate(0, b.Len(0)+1))
	require.Error(t, b.Truncate(0, -1))
	require.Error(t, b.Truncate(2, 0))
}
