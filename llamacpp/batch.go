package llamacpp

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/llamaloop/llamaloop/cgo"
)

// Batch is a reusable llama_batch: tokens with positions, sequence ids and
// output flags, written into C memory allocated once. Adding tokens
// allocates nothing. A Batch is not safe for concurrent use.
type Batch struct {
	c        *cgo.Batch
	capacity int
	seqsPer  int
	n        int

	tokens  []int32
	pos     []int32
	nSeqID  []int32
	seqIDs  []*int32
	outputs []int8

	// input embeddings (inputembd.go): the C rows of an embeddings batch,
	// allocated on its first AddEmbedding
	embd embdRows
}

// MaxBatch is the largest batch: NewBatch's capacity and a context's
// BatchSize.
const MaxBatch = 1 << 20

// NewBatch allocates a batch of up to capacity tokens (at most MaxBatch),
// each belonging to at most seqsPerToken sequences (1 unless prompts are
// shared through a unified KV cache). A batch that does not fit in the
// memory available gives an error wrapping ErrNoMemory.
func NewBatch(capacity, seqsPerToken int) (*Batch, error) {
	if capacity < 1 || capacity > MaxBatch {
		return nil, invalid("batch capacity %d outside [1, %d]", capacity, MaxBatch)
	}
	if seqsPerToken < 1 || seqsPerToken > MaxSequences() {
		return nil, invalid("sequences per token %d outside [1, %d]", seqsPerToken, MaxSequences())
	}
	if err := checkMemory(batchBytes(capacity, seqsPerToken),
		fmt.Sprintf("NewBatch capacity %d with %d sequences per token", capacity, seqsPerToken), ""); err != nil {
		return nil, err
	}
	c := cgo.BatchInit(capacity, seqsPerToken)
	if c == nil {
		return nil, fmt.Errorf("%w: allocating a batch of capacity %d with %d sequences per token failed",
			ErrNoMemory, capacity, seqsPerToken)
	}
	b := &Batch{c: c, capacity: capacity, seqsPer: seqsPerToken}
	b.tokens, b.pos, b.nSeqID, b.seqIDs, b.outputs = b.c.Views(capacity)
	runtime.SetFinalizer(b, func(b *Batch) { b.Close() })
	return b, nil
}

// batchBytes is the C memory of a batch: token, position, sequence count,
// output flag and sequence-list pointer per token, and each token's
// sequence list in its own allocation (16 bytes of malloc overhead).
func batchBytes(capacity, seqsPerToken int) uint64 {
	return uint64(capacity) * uint64(4+4+4+1+8+16+4*seqsPerToken)
}

// Close frees the batch; it is idempotent.
func (b *Batch) Close() error {
	if b.c != nil {
		b.c.Free()
		b.c = nil
		b.tokens, b.pos, b.nSeqID, b.seqIDs, b.outputs = nil, nil, nil, nil, nil
		b.embd.free()
		runtime.SetFinalizer(b, nil)
	}
	return nil
}

func (b *Batch) check() error {
	if b == nil || b.c == nil {
		return fmt.Errorf("batch: %w", ErrClosed)
	}
	return nil
}

// Clear empties the batch for reuse.
func (b *Batch) Clear() { b.n, b.embd.used = 0, false }

// Len is the number of tokens in the batch.
func (b *Batch) Len() int { return b.n }

// Cap is the batch's capacity.
func (b *Batch) Cap() int { return b.capacity }

// Add appends a token at position pos of sequence seq; output asks for its
// logits. It returns the token's batch index.
func (b *Batch) Add(token, pos, seq int32, output bool) (int, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	if b.n == b.capacity {
		return 0, invalid("batch full (%d tokens)", b.capacity)
	}
	if b.embd.used {
		return 0, errMixed
	}
	i := b.n
	b.tokens[i], b.pos[i], b.nSeqID[i] = token, pos, 1
	*b.seqIDs[i] = seq
	b.outputs[i] = 0
	if output {
		b.outputs[i] = 1
	}
	b.n++
	return i, nil
}

// AddShared appends a token that belongs to several sequences at once (a
// shared prompt in a unified KV cache).
func (b *Batch) AddShared(token, pos int32, seqs []int32, output bool) (int, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	if len(seqs) == 0 || len(seqs) > b.seqsPer {
		return 0, invalid("%d sequences for one token (batch allows 1..%d)", len(seqs), b.seqsPer)
	}
	for j, s := range seqs {
		for _, t := range seqs[:j] {
			if s == t {
				return 0, invalid("sequence id %d listed twice for one token", s)
			}
		}
	}
	i, err := b.Add(token, pos, seqs[0], output)
	if err != nil {
		return 0, err
	}
	b.nSeqID[i] = int32(len(seqs))
	copy(unsafe.Slice(b.seqIDs[i], b.seqsPer), seqs)
	return i, nil
}

// SetOutput changes the output flag of batch index i.
func (b *Batch) SetOutput(i int, output bool) error {
	if err := b.check(); err != nil {
		return err
	}
	if i < 0 || i >= b.n {
		return invalid("batch index %d outside [0, %d)", i, b.n)
	}
	b.outputs[i] = 0
	if output {
		b.outputs[i] = 1
	}
	return nil
}

func (b *Batch) seqsOf(i int) []int32 {
	n := int(b.nSeqID[i])
	if n < 1 || n > b.seqsPer {
		return []int32{-1}
	}
	return unsafe.Slice(b.seqIDs[i], n)
}
