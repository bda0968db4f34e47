package llamacpp

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrState is what SetSeqState wraps when llama.cpp refuses a sequence
// state (another model, KV cache type or layout, or no room).
var ErrState = errors.New("llamacpp: cannot restore the sequence state")

// kvStreams is the number of KV streams of the context's cache, the first
// field of a sequence state: one in a unified cache, one per sequence
// otherwise.
func (ctx *Context) kvStreams() uint32 {
	if ctx.unified {
		return 1
	}
	return uint32(ctx.nSeq)
}

// SeqState returns the KV-cache state of seq (its cells' positions, keys and
// values) as llama_state_seq_get_data writes it. The bytes are opaque and
// tied to the llama.cpp build, the model, the KV cache types and the cache
// layout (Sequences and UnifiedKV): SetSeqState restores them into a context
// with the same. Without a unified cache, a SeqCopy into seq takes effect
// at the next Decode; save after it.
func (ctx *Context) SeqState(seq int32) ([]byte, error) {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.checkSeq(seq); err != nil {
		return nil, err
	}
	n := ctx.c.StateSeqGetSize(seq)
	if n <= 0 {
		return nil, fmt.Errorf("llamacpp: sequence %d: llama.cpp reports no state (%s)", seq, takeLastError())
	}
	buf := make([]byte, n)
	if got := ctx.c.StateSeqGetData(buf, seq); got != n {
		return nil, fmt.Errorf("llamacpp: sequence %d: llama.cpp wrote %d of %d state bytes (%s)", seq, got, n, takeLastError())
	}
	return buf, nil
}

// SetSeqState restores into seq, which must be empty, a state that SeqState
// returned. A state from a cache of another layout, or whose cells hold
// positions outside the sequence's [0, SequenceSize()) or one position
// twice, is refused before it reaches llama.cpp (which would store them:
// a later Decode would attend to cells at the wrong places); one that llama.cpp refuses (another model or KV type,
// too few free cells) is an error wrapping ErrState, and seq stays empty:
// the context is as it was.
func (ctx *Context) SetSeqState(seq int32, state []byte) error {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.checkSeq(seq); err != nil {
		return err
	}
	if p := ctx.c.SeqPosMax(seq); p >= 0 {
		return invalid("sequence %d holds %d positions: restore a state into an empty sequence", seq, p+1)
	}
	if len(state) < 4 {
		return fmt.Errorf("%w: %d bytes", ErrState, len(state))
	}
	if ctx.model.c.IsRecurrent() {
		// A recurrent memory keeps one cell per sequence; llama.cpp asserts
		// that a state's cells fit where it placed the first.
		if n := binary.LittleEndian.Uint32(state); n > 1 {
			return fmt.Errorf("%w: %d cells, but a recurrent model's sequence state has one", ErrState, n)
		}
	}
	if n := binary.LittleEndian.Uint32(state); n != ctx.kvStreams() {
		return fmt.Errorf("%w: it was saved from a KV cache of %d streams, this context has %d (the same Sequences and UnifiedKV are needed)",
			ErrState, n, ctx.kvStreams())
	}
	// llama.cpp sizes its buffers by the cell count that the state gives
	// before it reads the cells: a count beyond the cache is refused here,
	// rather than left to an allocation of that size. A sequence's cells
	// are in one stream, after the empty streams' zero counts.
	for off := 4; off+4 <= len(state); off += 4 {
		if n := binary.LittleEndian.Uint32(state[off:]); n != 0 {
			if n > uint32(ctx.nCtxSeq) {
				return fmt.Errorf("%w: %d cells for a sequence of %d", ErrState, n, ctx.nCtxSeq)
			}
			if err := ctx.checkCells(state[off+4:], int(n)); err != nil {
				return err
			}
			break
		}
	}
	takeLastError()
	if got := ctx.c.StateSeqSetData(state, seq); got != len(state) {
		detail := takeLastError()
		ctx.c.SeqRm(seq, -1, -1) // llama.cpp empties seq on failure; make sure of it
		if detail == "" {
			detail = fmt.Sprintf("read %d of %d bytes", got, len(state))
		}
		return fmt.Errorf("%w: %s", ErrState, detail)
	}
	return nil
}

// cellMetaSize is the size of a cell's metadata in a sequence state: its
// position, its count of sequences (1) and the sequence.
const cellMetaSize = 12

// checkCells checks the metadata of a state's n cells, at the start of
// meta: positions inside the sequence and distinct, one sequence per cell.
func (ctx *Context) checkCells(meta []byte, n int) error {
	if len(meta) < n*cellMetaSize {
		return fmt.Errorf("%w: %d cells need %d bytes of metadata, the state has %d", ErrState, n, n*cellMetaSize, len(meta))
	}
	seen := make([]bool, ctx.nCtxSeq)
	for i := range n {
		cell := meta[i*cellMetaSize:]
		pos := int32(binary.LittleEndian.Uint32(cell))
		if pos < 0 || int(pos) >= ctx.nCtxSeq {
			return fmt.Errorf("%w: cell %d: position %d outside the sequence's [0, %d)", ErrState, i, pos, ctx.nCtxSeq)
		}
		if seen[pos] {
			return fmt.Errorf("%w: cell %d: position %d twice", ErrState, i, pos)
		}
		seen[pos] = true
		if k := binary.LittleEndian.Uint32(cell[4:]); k != 1 {
			return fmt.Errorf("%w: cell %d: %d sequences, a sequence's state has 1", ErrState, i, k)
		}
	}
	return nil
}
