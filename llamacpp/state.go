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
	body, err := seqStateBody(state)
	if err != nil {
		return err
	}
	if len(body) < 4 {
		return fmt.Errorf("%w: %d bytes", ErrState, len(state))
	}
	if ctx.model.c.IsRecurrent() {
		if err := checkRecurrentCells(body); err != nil {
			return err
		}
	}
	if ctx.model.c.IsHybrid() {
		// A hybrid's state is its KV cache's, then its recurrent memory's.
		n, err := kvStateLen(state)
		if err != nil {
			return err
		}
		if err := checkRecurrentCells(state[n:]); err != nil {
			return err
		}
	}
	if n := binary.LittleEndian.Uint32(body); n != ctx.kvStreams() {
		return fmt.Errorf("%w: it was saved from a KV cache of %d streams, this context has %d (the same Sequences and UnifiedKV are needed)",
			ErrState, n, ctx.kvStreams())
	}
	// llama.cpp sizes its buffers by the cell count that the state gives
	// before it reads the cells: a count beyond the cache is refused here,
	// rather than left to an allocation of that size. A sequence's cells
	// are in one stream, after the empty streams' zero counts.
	for off := 4; off+4 <= len(body); off += 4 {
		if n := binary.LittleEndian.Uint32(body[off:]); n != 0 {
			if n > uint32(ctx.nCtxSeq) {
				return fmt.Errorf("%w: %d cells for a sequence of %d", ErrState, n, ctx.nCtxSeq)
			}
			if err := ctx.checkCells(body[off+4:], int(n)); err != nil {
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

// checkRecurrentCells checks the cell count that opens a recurrent
// memory's part of a state: the memory keeps one cell per sequence, and
// llama.cpp asserts (rather than checks) that a state's cells fit where it
// placed the first.
func checkRecurrentCells(part []byte) error {
	if len(part) < 4 {
		return fmt.Errorf("%w: no recurrent state after %d bytes", ErrState, len(part))
	}
	if n := binary.LittleEndian.Uint32(part); n > 1 {
		return fmt.Errorf("%w: %d cells, but a recurrent model's sequence state has one", ErrState, n)
	}
	return nil
}

// kvStateLen returns the length of the KV-cache part that opens a sequence
// state, walking it as llama_kv_cache::state_write lays it out: a stream
// count, then for each stream a cell count and, for a stream with cells,
// the cells' metadata (position, sequence count, sequences) and their data
// (a transposed-values flag, a layer count, then per layer the keys' type,
// row size and rows, and the values' the same or, transposed, their type,
// element size, width and elements).
func kvStateLen(state []byte) (int, error) {
	body, err := seqStateBody(state)
	if err != nil {
		return 0, err
	}
	r := stateReader{b: body}
	streams := r.u32()
	for range min(streams, 1<<16) {
		cells := uint64(r.u32())
		if cells == 0 || r.err != nil {
			continue
		}
		for range min(cells, uint64(len(state))) {
			r.skip(4)
			r.skip(4 * uint64(r.u32()))
		}
		vTrans, layers := r.u32(), r.u32()
		for range min(layers, 1<<16) {
			r.skip(4)
			r.skip(mulCap(r.u64(), cells))
		}
		for range min(layers, 1<<16) {
			r.skip(4)
			if vTrans == 0 {
				r.skip(mulCap(r.u64(), cells))
				continue
			}
			el, width := uint64(r.u32()), uint64(r.u32())
			r.skip(mulCap(mulCap(el, width), cells))
		}
	}
	if r.err != nil {
		return 0, fmt.Errorf("%w: its KV-cache part ends past its %d bytes", ErrState, len(state))
	}
	return len(state) - len(body) + r.off, nil
}

// seqStateBody returns the memory's part of a sequence state: the state
// itself, or after the header that llama.cpp after the pin writes first
// (seqStateMagic and the sequence saved).
func seqStateBody(state []byte) ([]byte, error) {
	if seqStateMagic == 0 {
		return state, nil
	}
	if len(state) < 8 || binary.LittleEndian.Uint32(state) != seqStateMagic {
		return nil, fmt.Errorf("%w: no sequence state header (magic %#x)", ErrState, uint32(seqStateMagic))
	}
	return state[8:], nil
}

// stateReader reads little-endian fields from a state; past its end it
// records an error and reads zeros.
type stateReader struct {
	b   []byte
	off int
	err error
}

func (r *stateReader) skip(n uint64) {
	if r.err != nil || n > uint64(len(r.b)-r.off) {
		r.err = ErrState
		return
	}
	r.off += int(n)
}

func (r *stateReader) u32() uint32 {
	at := r.off
	if r.skip(4); r.err != nil {
		return 0
	}
	return binary.LittleEndian.Uint32(r.b[at:])
}

func (r *stateReader) u64() uint64 {
	at := r.off
	if r.skip(8); r.err != nil {
		return 0
	}
	return binary.LittleEndian.Uint64(r.b[at:])
}

// mulCap multiplies sizes, saturating: a product past any state's length
// is as good as infinite.
func mulCap(a, b uint64) uint64 {
	if a != 0 && b > (1<<62)/a {
		return 1 << 62
	}
	return a * b
}
