package llamacpp

import (
	"context"
	"unsafe"

	"github.com/llamaloop/llamaloop/cgo"
	"github.com/llamaloop/llamaloop/embedding"
)

// Embeddings out of llama.cpp. A context created with
// ContextParams.Embeddings computes, besides logits, the model's last hidden
// state after its output norm (llama.cpp's t_embd, the input of the output
// head): per token with pooling none, or pooled per sequence with mean,
// cls (the first position) or last. The ollama-vendored llama.cpp computes
// outputs only for tokens flagged as outputs even with embeddings on, so a
// generation in such a context costs what it costs elsewhere; Embed and
// EmbedTokens flag every token, because llama.cpp pools the rows of the
// output tokens.

// PoolingKey is the GGUF key, after "<architecture>.", of a model's pooling
// type (llama.cpp's enum llama_pooling_type). llama.cpp itself reads it for
// the architectures of embedding models only (BERT, Qwen2/3, ...); llamaloop
// reads it for every architecture, so that a llama model that says it is
// pooled is.
const PoolingKey = "pooling_type"

// embeddingParams sets the embedding fields of cp from p: the pooling is
// p.Pooling, else the model's PoolingKey, else llama.cpp's choice.
func (m *Model) embeddingParams(p ContextParams, cp *cgo.ContextParams) error {
	if !p.Embeddings {
		if p.Pooling != embedding.PoolingModel {
			return invalid("Pooling %s without Embeddings", p.Pooling)
		}
		return nil
	}
	pooling := p.Pooling
	key := m.info.Architecture + "." + PoolingKey
	if v, ok := m.MetadataInt(key); ok && pooling == embedding.PoolingModel {
		pooling = embedding.FromLlama(int32(v))
		if pooling < embedding.PoolingNone || pooling > embedding.PoolingRank {
			return invalid("model %s: %s = %d is not a llama.cpp pooling type (0..4)", m.path, key, v)
		}
	}
	switch pooling {
	case embedding.PoolingRank:
		return invalid("Pooling rank is a reranker's classification head, not an embedding; llamaloop does not rerank")
	case embedding.PoolingModel, embedding.PoolingNone, embedding.PoolingMean, embedding.PoolingCLS, embedding.PoolingLast:
	default:
		return invalid("Pooling %d", int(pooling))
	}
	cp.Embeddings = true
	cp.PoolingType = pooling.Llama()
	if pooling != embedding.PoolingNone {
		// llama.cpp pools each micro-batch on its own: a sequence split
		// over two would get the pooling of its second part.
		cp.NUbatch = cp.NBatch
	}
	if pooling == embedding.PoolingMean && cp.NSeqMax > 1 {
		// llama.cpp reserves its worst-case graph with min(n_ctx, n_ubatch)
		// tokens rounded up to a multiple of n_seq_max but as many outputs
		// as tokens before the rounding, and its mean pooling then fails
		// an assertion (a matrix product of mismatched widths) that aborts
		// the process.
		if n := min(effectiveNCtx(cp), cp.NUbatch); n%cp.NSeqMax != 0 {
			return invalid("mean pooling with %d sequences needs min(ContextSize, BatchSize) = %d to be a multiple of %d "+
				"(llama.cpp aborts otherwise)", cp.NSeqMax, n, cp.NSeqMax)
		}
	}
	return nil
}

// effectiveNCtx is the n_ctx llama.cpp makes of cp's: padded to 256 cells
// per sequence without a unified cache, in all with one.
func effectiveNCtx(cp *cgo.ContextParams) uint32 {
	pad := func(n uint32) uint32 { return (n + 255) / 256 * 256 }
	if cp.KVUnified {
		return pad(cp.NCtx)
	}
	return pad(cp.NCtx/cp.NSeqMax) * cp.NSeqMax
}

// Pooling is the pooling of an Embeddings context as llama.cpp resolved it
// (PoolingNone, PoolingMean, PoolingCLS or PoolingLast), or PoolingModel for
// a context without embeddings.
func (ctx *Context) Pooling() embedding.Pooling { return ctx.pooling }

// EmbeddingSize is the width of an output embedding (n_embd).
func (ctx *Context) EmbeddingSize() int { return ctx.model.info.Embd }

func (ctx *Context) checkEmbeddings(pooled bool) error {
	if err := ctx.check(); err != nil {
		return err
	}
	switch {
	case ctx.pooling == embedding.PoolingModel:
		return invalid("the context computes no embeddings: create it with ContextParams.Embeddings")
	case pooled && ctx.pooling == embedding.PoolingNone:
		return invalid("the context's pooling is none: it has per-token embeddings (TokenEmbedding, EmbedTokens), not pooled ones")
	case !pooled && ctx.pooling != embedding.PoolingNone:
		return invalid("the context pools its embeddings (%s): per-token embeddings need Pooling none", ctx.pooling)
	}
	return nil
}

// SequenceEmbedding returns the pooled embedding of sequence seq from the
// last successful Decode, as the model computed it (not normalised). The
// sequence must have been decoded whole in that Decode: llama.cpp pools the
// tokens of one decode. The slice is a view of llama.cpp's buffer, valid
// like a Logits view.
func (ctx *Context) SequenceEmbedding(seq int32) ([]float32, error) {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	return ctx.sequenceEmbedding(seq)
}

// sequenceEmbedding is SequenceEmbedding with the lock held.
func (ctx *Context) sequenceEmbedding(seq int32) ([]float32, error) {
	if err := ctx.checkEmbeddings(true); err != nil {
		return nil, err
	}
	if err := ctx.checkSeq(seq); err != nil {
		return nil, err
	}
	if ctx.lastN == 0 {
		return nil, invalid("no successful decode to read an embedding from")
	}
	p := ctx.c.EmbeddingsSeq(seq)
	if p == nil {
		return nil, invalid("sequence %d has no embedding: the last decode did not hold it", seq)
	}
	return unsafe.Slice(p, ctx.EmbeddingSize()), nil
}

// TokenEmbedding returns the embedding of batch index i of the last
// successful Decode (the token must have been added with output set), as
// the model computed it (not normalised), in a context whose pooling is
// none. The slice is a view of llama.cpp's buffer, valid like a Logits view.
func (ctx *Context) TokenEmbedding(i int) ([]float32, error) {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	return ctx.tokenEmbedding(i)
}

// tokenEmbedding is TokenEmbedding with the lock held.
func (ctx *Context) tokenEmbedding(i int) ([]float32, error) {
	if err := ctx.checkEmbeddings(false); err != nil {
		return nil, err
	}
	if i < 0 || i >= ctx.lastN || ctx.lastOutputs[i] == 0 {
		return nil, invalid("batch index %d has no embedding (last decode: %d tokens)", i, ctx.lastN)
	}
	p := ctx.c.EmbeddingsIth(i)
	if p == nil {
		return nil, invalid("llama.cpp has no embedding for batch index %d", i)
	}
	return unsafe.Slice(p, ctx.EmbeddingSize()), nil
}

// Embed returns one pooled embedding per input, each normalised as norm
// says (embedding.NormL2 for cosine similarity by dot product), in a
// context with pooled embeddings. Each input is evaluated alone from
// position 0, in one decode, so it may hold at most BatchSize tokens (and
// fit in SequenceSize cells); several inputs share a decode when the KV
// cache is unified (llama.cpp splits a decode of several sequences of a
// split cache into equal parts per sequence, which would cut their
// pooling). Embed uses the whole context: it clears the KV cache before
// every decode and leaves it empty, and uses b, whose capacity bounds a
// decode too.
func (ctx *Context) Embed(gctx context.Context, b *Batch, inputs [][]int32, norm embedding.Norm) ([][]float32, error) {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.checkEmbeddings(true); err != nil {
		return nil, err
	}
	limit, err := ctx.embedLimit(b, inputs)
	if err != nil {
		return nil, err
	}
	perDecode := 1
	if ctx.unified {
		perDecode = ctx.nSeq
	}
	out := make([][]float32, len(inputs))
	for start := 0; start < len(inputs); {
		b.Clear()
		end := start
		for n := 0; end < len(inputs) && end-start < perDecode && n+len(inputs[end]) <= limit; end++ {
			if err := addSeq(b, inputs[end], int32(end-start)); err != nil {
				return nil, err
			}
			n += len(inputs[end])
		}
		if err := ctx.decodeAlone(gctx, b); err != nil {
			return nil, err
		}
		for j := start; j < end; j++ {
			row, err := ctx.sequenceEmbedding(int32(j - start))
			if err != nil {
				return nil, err
			}
			out[j] = append([]float32(nil), row...)
			embedding.Normalize(out[j], norm)
		}
		start = end
	}
	return out, ctx.clearCache()
}

// EmbedTokens returns the embedding of every token of tokens, each
// normalised as norm says, in a context whose pooling is none; tokens are
// evaluated alone from position 0 in decodes of up to BatchSize tokens, and
// the KV cache is left empty.
func (ctx *Context) EmbedTokens(gctx context.Context, b *Batch, tokens []int32, norm embedding.Norm) ([][]float32, error) {
	ctx.mu.Lock()
	defer ctx.mu.Unlock()
	if err := ctx.checkEmbeddings(false); err != nil {
		return nil, err
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, invalid("no tokens to embed")
	}
	if len(tokens) > ctx.nCtxSeq {
		return nil, invalid("%d tokens do not fit in the %d cells of a sequence", len(tokens), ctx.nCtxSeq)
	}
	if err := ctx.clearCache(); err != nil {
		return nil, err
	}
	step := min(b.Cap(), ctx.nBatch)
	out := make([][]float32, 0, len(tokens))
	for start := 0; start < len(tokens); start += step {
		b.Clear()
		for i, t := range tokens[start:min(start+step, len(tokens))] {
			if _, err := b.Add(t, int32(start+i), 0, true); err != nil {
				return nil, err
			}
		}
		if err := ctx.decode(gctx, b); err != nil {
			ctx.clearCache()
			return nil, err
		}
		for i := range b.Len() {
			row, err := ctx.tokenEmbedding(i)
			if err != nil {
				return nil, err
			}
			v := append([]float32(nil), row...)
			embedding.Normalize(v, norm)
			out = append(out, v)
		}
	}
	return out, ctx.clearCache()
}

// embedLimit checks every input against the most tokens one decode may
// carry and returns that limit.
func (ctx *Context) embedLimit(b *Batch, inputs [][]int32) (int, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	limit := min(b.Cap(), ctx.nBatch)
	for i, in := range inputs {
		switch {
		case len(in) == 0:
			return 0, invalid("input %d is empty", i)
		case len(in) > limit:
			return 0, invalid("input %d has %d tokens, more than the %d of one decode (BatchSize and the batch's capacity): "+
				"a pooled embedding is computed in one decode", i, len(in), limit)
		case len(in) > ctx.nCtxSeq:
			return 0, invalid("input %d has %d tokens, more than the %d cells of a sequence", i, len(in), ctx.nCtxSeq)
		}
	}
	return limit, nil
}

// addSeq adds tokens as sequence seq from position 0, every token an output
// (llama.cpp pools the output rows).
func addSeq(b *Batch, tokens []int32, seq int32) error {
	for i, t := range tokens {
		if _, err := b.Add(t, int32(i), seq, true); err != nil {
			return err
		}
	}
	return nil
}

// decodeAlone decodes b into an empty cache, and leaves the cache empty if
// the decode fails.
func (ctx *Context) decodeAlone(gctx context.Context, b *Batch) error {
	if err := ctx.clearCache(); err != nil {
		return err
	}
	if err := ctx.decode(gctx, b); err != nil {
		ctx.clearCache()
		return err
	}
	return nil
}
