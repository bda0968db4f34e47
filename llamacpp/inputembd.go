package llamacpp

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/llamaloop/llamaloop/backend"
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
// n_pos_per_embd 4) take four positions per embedding (temporal, height,
// width and a zero) in llama_batch.pos, laid out as four planes of
// n_tokens: AddEmbeddingMRoPE gives them, and Decode lays them out. A
// token of such a model takes one position, which llama.cpp copies to
// every plane.

// embdRows are the C rows of a batch's input embeddings.
type embdRows struct {
	c     unsafe.Pointer // capacity × width float32, malloc'd
	rows  []float32
	width int
	used  bool // the batch holds embeddings, not tokens

	// M-RoPE positions (AddEmbeddingMRoPE): mpos per entry, laid out as
	// planes in cpos (4 × capacity int32, malloc'd on first use) at Decode
	mrope bool
	mpos  []backend.Pos
	cpos  unsafe.Pointer
}

func (e *embdRows) free() {
	e.freeRows()
	if e.cpos != nil {
		cgo.CFree(e.cpos)
		nativeFree(int64(16 * len(e.mpos)))
	}
	*e = embdRows{}
}

// freeRows frees the rows alone (to change their width).
func (e *embdRows) freeRows() {
	if e.c != nil {
		cgo.CFree(e.c)
		nativeFree(int64(4 * len(e.rows)))
		e.c, e.rows, e.width = nil, nil, 0
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
	if err := b.checkEmbd(false); err != nil {
		return 0, err
	}
	return b.addEmbedding(vec, pos, seq, output)
}

// AddEmbeddingMRoPE is AddEmbedding for a model with multi-position RoPE
// (Model.MRoPE): the embedding sits at pos's temporal, height and width
// positions (the fourth plane 0), as Chunk.Positions and mtmd lay an
// image out. A batch holds embeddings of one kind: Clear it to change.
func (b *Batch) AddEmbeddingMRoPE(vec []float32, pos backend.Pos, seq int32, output bool) (int, error) {
	if err := b.checkEmbd(true); err != nil {
		return 0, err
	}
	if pos.T < 0 || pos.H < 0 || pos.W < 0 {
		return 0, invalid("negative M-RoPE position %v at batch index %d", pos, b.n)
	}
	if b.embd.cpos == nil {
		if err := checkMemory(uint64(16*b.capacity), fmt.Sprintf("M-RoPE positions of a batch of capacity %d", b.capacity), ""); err != nil {
			return 0, err
		}
		p := cgo.CMalloc(16 * b.capacity)
		if p == nil {
			return 0, fmt.Errorf("%w: allocating M-RoPE positions for a batch of capacity %d failed", ErrNoMemory, b.capacity)
		}
		nativeAlloc(int64(16 * b.capacity))
		b.embd.cpos, b.embd.mpos = p, make([]backend.Pos, b.capacity)
	}
	i, err := b.addEmbedding(vec, pos.T, seq, output)
	if err != nil {
		return 0, err
	}
	b.embd.mrope, b.embd.mpos[i] = true, pos
	return i, nil
}

// checkEmbd checks that an embedding, with M-RoPE positions or not, fits
// the batch.
func (b *Batch) checkEmbd(mrope bool) error {
	if err := b.check(); err != nil {
		return err
	}
	if b.n == b.capacity {
		return invalid("batch full (%d tokens)", b.capacity)
	}
	if b.n > 0 && !b.embd.used {
		return invalid("the batch holds tokens: llama.cpp decodes a batch of tokens or of embeddings, " +
			"so embeddings go into a decode of their own")
	}
	if b.n > 0 && b.embd.mrope != mrope {
		return invalid("the batch holds embeddings with M-RoPE positions or without, not both")
	}
	return nil
}

func (b *Batch) addEmbedding(vec []float32, pos, seq int32, output bool) (int, error) {
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
		b.embd.freeRows()
		n := b.capacity * len(vec)
		if err := checkMemory(uint64(4*n), fmt.Sprintf("input embeddings of width %d in a batch of capacity %d", len(vec), b.capacity), ""); err != nil {
			return 0, err
		}
		p := cgo.CMalloc(4 * n)
		if p == nil {
			return 0, fmt.Errorf("%w: allocating input embeddings of width %d for a batch of capacity %d failed", ErrNoMemory, len(vec), b.capacity)
		}
		nativeAlloc(int64(4 * n))
		b.embd.c, b.embd.rows, b.embd.width = p, unsafe.Slice((*float32)(p), n), len(vec)
	}
	i := b.n
	copy(b.embd.rows[i*b.embd.width:], vec)
	b.tokens[i], b.pos[i], b.nSeqID[i] = 0, pos, 1
	*b.seqIDs[i] = seq
	b.outputs[i] = 0
	if output {
		b.outputs[i] = 1
	}
	b.embd.used, b.embd.mrope = true, false
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
// of input embeddings (GGML_ABORT in the pinned llama.cpp) unless the model
// has M-RoPE (gemma3n never has), with the reason.
var noEmbdInput = map[string]string{
	"gemma3n": "llama.cpp's gemma3n graph does not support them",
	"glm4":    "llama.cpp's glm4 graph takes them only with M-RoPE",
	"glm4moe": "llama.cpp's glm4moe graph takes them only with M-RoPE",
}

// checkEmbdInput checks an embeddings batch against the context's model.
func (ctx *Context) checkEmbdInput(b *Batch) error {
	switch mrope := ctx.model.MRoPE(); {
	case mrope && !b.embd.mrope:
		return invalid("model %s uses multi-position RoPE (M-RoPE): its input embeddings need four positions each "+
			"(Batch.AddEmbeddingMRoPE)", ctx.model.path)
	case !mrope && b.embd.mrope:
		return invalid("input embeddings with M-RoPE positions for model %s, which takes one position per input", ctx.model.path)
	}
	if why, ok := noEmbdInput[ctx.model.info.Architecture]; ok && !ctx.model.MRoPE() {
		return invalid("model %s (%s) takes no input embeddings: %s", ctx.model.path, ctx.model.info.Architecture, why)
	}
	if w := ctx.model.InputEmbeddingSize(); b.embd.width != w {
		return invalid("input embeddings of width %d; the model takes %d", b.embd.width, w)
	}
	return nil
}

// decodeBatch is llama_decode of b's tokens or of its embeddings, with
// their M-RoPE positions laid out as llama.cpp reads them: the temporal,
// height, width and zero planes of n_tokens each; on the context's
// evaluation thread when it has one.
func (ctx *Context) decodeBatch(b *Batch) int32 {
	if b.embd.used && b.embd.mrope {
		planes := unsafe.Slice((*int32)(b.embd.cpos), 4*b.n)
		for i, p := range b.embd.mpos[:b.n] {
			planes[i], planes[b.n+i], planes[2*b.n+i], planes[3*b.n+i] = p.T, p.H, p.W, 0
		}
	}
	return ctx.pools.thread.eval(ctx.c, evalCall{b: b})
}

// MRoPE reports whether the model rotates by multi-position RoPE (the
// Qwen2-VL family; llama.cpp's n_pos_per_embd 4): its input embeddings
// take M-RoPE positions (Batch.AddEmbeddingMRoPE).
func (m *Model) MRoPE() bool { return m.ropeType >= 0 && m.ropeType&8 != 0 }

// HoldsEmbeddings reports whether the batch holds input embeddings (then
// Add refuses tokens until Clear).
func (b *Batch) HoldsEmbeddings() bool { return b.embd.used }
