package llamaloop

import (
	"context"
	"errors"
	"fmt"

	"github.com/llamaloop/llamaloop/embedding"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// Embed returns one embedding per text: the model's pooled output,
// normalised to length 1 (so that a dot product is the cosine similarity),
// as llama.cpp's embedding tool and OpenAI's embeddings give. The Model
// must have been opened with Options.Context.Embeddings. Each text is
// evaluated alone and must fit in one batch (Options.Context.BatchSize,
// default 512 tokens). For other norms, or one vector per token, call
// Context().Embed or Context().EmbedTokens.
func (m *Model) Embed(ctx context.Context, texts ...string) ([][]float32, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if m.gen != nil {
		return nil, errors.New("llamaloop: Embed needs an embeddings context: open the model with Options{Context: llamacpp.ContextParams{Embeddings: true}}")
	}
	if m.ctx.Pooling() == embedding.PoolingNone {
		return nil, errors.New("llamaloop: the model's embeddings are per token (pooling none): open it with Options.Context.Pooling set (embedding.PoolingMean, PoolingCLS or PoolingLast) for one vector per text, or call Context().EmbedTokens")
	}
	if m.batch == nil {
		b, err := llamacpp.NewBatch(m.ctx.BatchSize(), 1)
		if err != nil {
			return nil, fmt.Errorf("llamaloop: %w", err)
		}
		m.batch = b
	}
	inputs := make([][]int32, len(texts))
	for i, t := range texts {
		toks, err := m.model.Vocab().Tokenize(t, true, false)
		if err != nil {
			return nil, fmt.Errorf("llamaloop: text %d: %w", i, err)
		}
		if len(toks) > m.ctx.BatchSize() {
			return nil, fmt.Errorf("llamaloop: text %d has %d tokens, more than the batch of %d: open the model with a larger Options.Context.BatchSize", i, len(toks), m.ctx.BatchSize())
		}
		inputs[i] = toks
	}
	out, err := m.ctx.Embed(ctx, m.batch, inputs, embedding.NormL2)
	if err != nil {
		return nil, fmt.Errorf("llamaloop: %w", err)
	}
	return out, nil
}
