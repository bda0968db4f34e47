package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/llamaloop/llamaloop/embedding"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// embedder is the serve.Embedder of --embeddings: a llama.cpp context of
// its own beside the generation context (so that generation requests are
// served as without the flag), one sequence of --batch cells, which
// evaluates one input per decode, one request at a time.
type embedder struct {
	mu  sync.Mutex
	ctx *llamacpp.Context
	b   *llamacpp.Batch
}

// newEmbedder creates the embeddings context of --embeddings with the
// pooling of --pooling (the model's by default).
func newEmbedder(m *llamacpp.Model, o *options) (*embedder, error) {
	pooling, err := embedding.ParsePooling(o.pooling)
	if err != nil {
		return nil, cli.Usagef("--pooling: %v", err)
	}
	ctx, err := cli.NewContext(m, fmt.Sprintf("--embeddings --batch %d", o.batch), llamacpp.ContextParams{
		ContextSize: o.batch, BatchSize: o.batch, Threads: o.threads, Embeddings: true, Pooling: pooling,
		BatchInvariant: o.cacheType == "f32"})
	if err != nil {
		return nil, err
	}
	if ctx.Pooling() == embedding.PoolingNone {
		ctx.Close()
		return nil, cli.Usagef("--embeddings: the model's pooling is none (one vector per token, no %s.%s): "+
			"choose one with --pooling mean, cls or last", m.Info().Architecture, llamacpp.PoolingKey)
	}
	b, err := llamacpp.NewBatch(ctx.BatchSize(), 1)
	if err != nil {
		ctx.Close()
		return nil, err
	}
	return &embedder{ctx: ctx, b: b}, nil
}

// Embed implements serve.Embedder.
func (e *embedder) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ctx.Embed(ctx, e.b, inputs, embedding.NormNone)
}

// Dimensions implements serve.Embedder.
func (e *embedder) Dimensions() int { return e.ctx.EmbeddingSize() }

// MaxTokens implements serve.Embedder.
func (e *embedder) MaxTokens() int { return min(e.ctx.BatchSize(), e.ctx.SequenceSize()) }

// Close frees the context and the batch.
func (e *embedder) Close() {
	e.b.Close()
	e.ctx.Close()
}
