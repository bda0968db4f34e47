package llamacpp

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/llamaloop/llamaloop/cgo"
)

// Input embeddings: a batch may carry vectors in place of token ids (what a
// vision or audio encoder gives a decoder, llama_batch.embd). llama.cpp
// decodes a batch of tokens or a batch of embeddings, never both, so a
// prompt that mixes them takes a decode per run of either kind (as the
// llama.cpp backend's Eval does); positions and sequences continue across
// them as for tokens.
//
// Models with multi-position RoPE (M-RoPE, Qwen2-VL; llama.cpp's
// n_pos_per_embd 4) are refused: their embeddings take four positions each
// (time, height, width and a zero) in llama_batch.pos, laid out as four
// planes of n_tokens, which this batch's one position per entry does not
// carry, and llamaloop has no float64 reference of such a model to check
// them against.

// embdRows are the C rows of a batch's input embeddings.
type embdRows struct {
	c     unsafe.Pointer // capacity × width float32, malloc'd
	rows  []float32
	width int
	used  bool // the batch holds embeddings, not tokens
}

func (e *embdRows) free() {
	if e.c != nil {
		cgo.CFree(e.c)
		nativeFree(int64(4 * len(e.rows)))
		*e = embdRows{}
	}
}

var errMixed = invalid("the batch holds input embeddings: llama.cpp decodes a batch of tokens or of embeddings, " +
	"so tokens go into a decode of their own")

// AddEmbedding appends an input embedding at position pos of sequence seq in
// place of a token; output asks for its logits. Every embedding of a batch
// has the same width, the model's input width (checked at Decode); a value
// that is NaN or infinite is refused. A batch holds tokens or embeddings:
// Clear it to change. It returns the entry's batch index.
func (b *Batch) AddEmbedding(vec []float32, pos, seq int32, output bool) (int, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	if b.n == b.capacity {
		return 0, invalid("batch full (%d tokens)", b.capacity)
	}
	if b.n > 0 && !b.embd.used {
		return 0, invalid("the batch holds tokens: llama.cpp decodes a batch of tokens or of embeddings, " +
			"so embeddings go into a decode of their own")
	}
	if len(vec) == 0 {
		return 0, invalid("empty input embedding")
	}
	for j, v := range vec {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return 0, invalid("input embedding at batch index %d holds %v at %d", b.n, v, j)
		}
	}
	if b.n > 0 && len(vec) != b.embd.width {
		return 0, invalid("input embedding of width %d in a batch of width %d", len(vec), b.embd.width)
	}
	if len(vec) != b.embd.width {
		b.embd.free()
		n := b.capacity * len(vec)
		if err := checkMemory(uint64(4*n), fmt.Sprintf("input embeddings of width %d in a batch of capacity %d", len(vec), b.capacity), ""); err != nil {
			return 0, err
		}
		p := cgo.CMalloc(4 * n)
		if p == nil {
			return 0, fmt.Errorf("%w: allocating input embeddings of width %d for a batch of capacity %d failed", ErrNoMemory, len(vec), b.capacity)
		}
		nativeAlloc(int64(4 * n))
		b.embd = embdRows{c: p, rows: unsafe.Slice((*float32)(p), n), width: len(vec)}
	}
	i := b.n
	copy(b.embd.rows[i*b.embd.width:], vec)
	b.tokens[i], b.pos[i], b.nSeqID[i] = 0, pos, 1
	*b.seqIDs[i] = seq
	b.outputs[i] = 0
	if output {
		b.outputs[i] = 1
	}
	b.embd.used = true
	b.n++
	return i, nil
}

// InputEmbeddingSize is the width of an input embedding (n_embd_inp).
func (m *Model) InputEmbeddingSize() int {
	if m.acquire() != nil {
		return 0
	}
	defer m.release()
	return m.c.NEmbdInp()
}

// noEmbdInput are the architectures whose graph builders abort on a batch
// of input embeddings (GGML_ABORT in the pinned llama.cpp), with the reason;
// with M-RoPE, glm4's take four positions, refused below anyway.
var noEmbdInput = map[string]string{
	"gemma3n": "llama.cpp's gemma3n graph does not support them",
	"glm4":    "llama.cpp's glm4 graph takes them only with M-RoPE",
	"glm4moe": "llama.cpp's glm4moe graph takes them only with M-RoPE",
}

// checkEmbdInput checks an embeddings batch against the context's model.
func (ctx *Context) checkEmbdInput(b *Batch) error {
	if ctx.model.ropeType >= 0 && ctx.model.ropeType&8 != 0 {
		return invalid("model %s uses multi-position RoPE (M-RoPE): its input embeddings need four positions each, "+
			"which llamaloop's batch does not carry", ctx.model.path)
	}
	if why, ok := noEmbdInput[ctx.model.info.Architecture]; ok {
		return invalid("model %s (%s) takes no input embeddings: %s", ctx.model.path, ctx.model.info.Architecture, why)
	}
	if w := ctx.model.InputEmbeddingSize(); b.embd.width != w {
		return invalid("input embeddings of width %d; the model takes %d", b.embd.width, w)
	}
	return nil
}

// decodeBatch is llama_decode of b's tokens or of its embeddings, on the
// context's evaluation thread when it has one.
func (ctx *Context) decodeBatch(b *Batch) int32 {
	return ctx.pools.thread.eval(ctx.c, evalCall{b: b})
}

// HoldsEmbeddings reports whether the batch holds input embeddings (then
// Add refuses tokens until Clear).
func (b *Batch) HoldsEmbeddings() bool { return b.embd.used }
