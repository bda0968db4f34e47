package cgo_test

import (
	"testing"

	"github.com/llamaloop/llamaloop/cgo"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/stretchr/testify/require"
)

// TestBatchInitOutOfMemory: a batch whose per-token sequence lists do not
// fit under the address-space limit gives nil, not a batch holding NULLs
// (about 270 MB asked for with 192 MB left: room for the Go runtime to map
// a few more of its 64 MB heap arenas meanwhile).
func TestBatchInitOutOfMemory(t *testing.T) {
	if !llamatest.UnderAddressLimit(t, 192<<20) {
		return
	}
	require.Nil(t, cgo.BatchInit(1<<20, 256))
	b := cgo.BatchInit(16, 2)
	require.NotNil(t, b)
	b.Free()
}
