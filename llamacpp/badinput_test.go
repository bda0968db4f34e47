package llamacpp_test

import (
	"context"
	"github.com/llamaloop/llamaloop/backend"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(modelPath(t, "tiny-f32"))
	require.NoError(t, err)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o644))
		return p
	}
	cases := map[string]struct {
		path string
		msg  string
	}{
		"missing":     {filepath.Join(dir, "nope.gguf"), "no such file"},
		"directory":   {dir, "is a directory"},
		"empty":       {write("empty.gguf", nil), "not a GGUF file"},
		"not gguf":    {write("text.gguf", []byte("this is not a model file at all")), "not a GGUF file"},
		"header only": {write("head.gguf", good[:64]), "cannot load model"},
		"truncated":   {write("trunc.gguf", good[:len(good)/2]), "cannot load model"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := llamacpp.LoadModel(c.path, llamatest.ModelParams(t, llamacpp.ModelParams{}))
			require.Error(t, err)
			assert.Nil(t, m)
			assert.ErrorIs(t, err, llamacpp.ErrLoad)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
	// A panicking progress callback cancels the load instead of crashing.
	_, err = llamacpp.LoadModel(modelPath(t, "tiny-f32"), llamatest.ModelParams(t, llamacpp.ModelParams{Progress: func(float32) bool { panic("boom") }}))
	assert.ErrorIs(t, err, llamacpp.ErrLoad)
	// A cancelled progress callback aborts the load.
	_, err = llamacpp.LoadModel(modelPath(t, "tiny-f32"), llamatest.ModelParams(t, llamacpp.ModelParams{Progress: func(float32) bool { return false }}))
	assert.ErrorIs(t, err, llamacpp.ErrLoad)
}

func TestBadBatches(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 16, Sequences: 2})
	big := newBatch(t, 64, 1)
	n := int32(m.Vocab().Size())
	bg := context.Background()

	fill := func(tokens []int32, seq int32) {
		big.Clear()
		for i, tok := range tokens {
			_, err := big.Add(tok, int32(i), seq, i == len(tokens)-1)
			require.NoError(t, err)
		}
	}
	fill(randomTokens(1, 17, int(n)), 0)
	assert.ErrorIs(t, ctx.Decode(bg, big), llamacpp.ErrInvalidArgument, "more tokens than n_batch")
	big.Clear()
	assert.ErrorIs(t, ctx.Decode(bg, big), llamacpp.ErrInvalidArgument, "empty batch")
	fill([]int32{5, n, 7}, 0)
	assert.ErrorContains(t, ctx.Decode(bg, big), "outside the vocabulary")
	fill([]int32{5, -1}, 0)
	assert.ErrorIs(t, ctx.Decode(bg, big), llamacpp.ErrInvalidArgument)
	fill([]int32{5, 6}, 2)
	assert.ErrorContains(t, ctx.Decode(bg, big), "sequence id 2")
	big.Clear()
	_, err := big.AddShared(5, 0, []int32{0, 1}, true)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument, "batch allows one sequence per token")

	// A gap in positions is llama.cpp's own check: an invalid batch, cache unchanged.
	fill([]int32{5, 6, 7}, 0)
	require.NoError(t, ctx.Decode(bg, big))
	big.Clear()
	_, _ = big.Add(8, 10, 0, true)
	err = ctx.Decode(bg, big)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidBatch)
	var de *llamacpp.DecodeError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, int32(-1), de.Code)
	p, _ := ctx.SeqPosMax(0)
	assert.Equal(t, int32(2), p)

	// Logits only exist for flagged tokens of the last successful decode.
	_, err = ctx.Logits(0)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	_, err = ctx.Logits(99)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)

	// The memory API checks sequence ids before llama.cpp asserts on them.
	assert.ErrorIs(t, ctx.SeqRemove(2, -1, -1), llamacpp.ErrInvalidArgument)
	assert.ErrorIs(t, ctx.SeqCopy(0, 5, -1, -1), llamacpp.ErrInvalidArgument)
	_, err = ctx.SeqPosMax(-1)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	assert.ErrorIs(t, ctx.SeqDivide(0, -1, -1, 0), llamacpp.ErrInvalidArgument)

	// Batch capacity.
	small := newBatch(t, 1, 1)
	_, err = small.Add(1, 0, 0, true)
	require.NoError(t, err)
	_, err = small.Add(1, 1, 0, true)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	_, err = llamacpp.NewBatch(0, 1)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)

	// The context is still usable.
	fill([]int32{9, 10}, 1)
	require.NoError(t, ctx.Decode(bg, big))
	_, err = ctx.Logits(1)
	require.NoError(t, err)
}

// A full context reports ErrContextFull and keeps what it held.
func TestContextFull(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 256})
	require.Equal(t, 256, ctx.Size())
	b := newBatch(t, 256, 1)
	decodeSeq(t, ctx, b, 0, 0, randomTokens(1, 200, 856))
	b.Clear()
	for i := range 100 {
		_, _ = b.Add(5, int32(200+i), 0, i == 99)
	}
	err := ctx.Decode(context.Background(), b)
	require.ErrorIs(t, err, llamacpp.ErrContextFull)
	p, _ := ctx.SeqPosMax(0)
	assert.Equal(t, int32(199), p)
	// Still usable: 56 more tokens fit.
	decodeSeq(t, ctx, b, 0, 200, randomTokens(2, 56, 856))
}

func TestBadParameters(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	for name, p := range map[string]llamacpp.ContextParams{
		"sequences":  {Sequences: llamacpp.MaxSequences() + 1},
		"negative":   {ContextSize: -1},
		"ubatch":     {BatchSize: 64, MicroBatchSize: 128},
		"threads":    {Threads: -2},
		"kv type":    {TypeK: "q3_x"},
		"flash attn": {FlashAttention: 7},
	} {
		_, err := m.NewContext(p)
		assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument, name)
	}
	// A quantized V cache without flash attention, which llama.cpp refuses
	// too, is refused naming both.
	_, err := m.NewContext(llamacpp.ContextParams{TypeV: llamacpp.KVQ8_0, FlashAttention: llamacpp.FlashAttentionOff})
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	assert.ErrorContains(t, err, "TypeV q8_0: a quantized V cache needs flash attention")
}

func TestClosed(t *testing.T) {
	m, err := llamacpp.LoadModel(modelPath(t, "tiny-f32"), llamatest.ModelParams(t, llamacpp.ModelParams{}))
	require.NoError(t, err)
	ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: 256, Threads: 1})
	require.NoError(t, err)
	b := newBatch(t, 8, 1)
	_, _ = b.Add(5, 0, 0, true)

	// Closing the model while a context is open keeps it alive for that context.
	require.NoError(t, m.Close())
	require.NoError(t, ctx.Decode(context.Background(), b))
	_, err = m.NewContext(llamacpp.ContextParams{})
	assert.ErrorIs(t, err, llamacpp.ErrClosed)

	require.NoError(t, ctx.Close())
	require.NoError(t, ctx.Close(), "Close is idempotent")
	assert.ErrorIs(t, ctx.Decode(context.Background(), b), llamacpp.ErrClosed)
	_, err = ctx.Logits(0)
	assert.ErrorIs(t, err, llamacpp.ErrClosed)
	assert.ErrorIs(t, ctx.SeqRemove(0, -1, -1), llamacpp.ErrClosed)
	_, err = m.Vocab().Tokenize("hello", true, false)
	assert.ErrorIs(t, err, llamacpp.ErrClosed)
	_, err = m.Metadata()
	assert.ErrorIs(t, err, llamacpp.ErrClosed)
	require.NoError(t, m.Close())

	require.NoError(t, b.Close())
	_, err = b.Add(1, 0, 0, true)
	assert.ErrorIs(t, err, llamacpp.ErrClosed)
}

// A model whose tokenizer lists fewer tokens than its embedding rows is
// refused with llama.cpp's explanation, not loaded half-way.
func TestVocabularyMismatch(t *testing.T) {
	r, err := gguf.Open(modelPath(t, "tiny-f32"))
	require.NoError(t, err)
	defer r.Close()
	md := make([]gguf.KV, len(r.Metadata))
	copy(md, r.Metadata)
	for i, kv := range md {
		switch v := kv.Value.(type) {
		case []string:
			md[i].Value = v[:len(v)-1]
		case []float32:
			md[i].Value = v[:len(v)-1]
		case []int32:
			md[i].Value = v[:len(v)-1]
		}
	}
	path := filepath.Join(t.TempDir(), "mismatch.gguf")
	f, err := os.Create(path)
	require.NoError(t, err)
	w, err := gguf.NewWriter(f, md, r.Tensors)
	require.NoError(t, err)
	for _, ti := range r.Tensors {
		data, err := r.TensorBytes(ti.Name)
		require.NoError(t, err)
		_, err = w.Write(data)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())

	_, err = llamacpp.LoadModel(path, llamatest.ModelParams(t, llamacpp.ModelParams{}))
	require.ErrorIs(t, err, llamacpp.ErrLoad)
	assert.Contains(t, err.Error(), "token_embd.weight")
	t.Log(err)
}

// Forgotten models and contexts (never closed, one of them armed with a
// cancellable Go context) are freed by their cleanups without harm.
func TestForgottenObjectsAreFreed(t *testing.T) {
	path := modelPath(t, "tiny-f32")
	for range 3 {
		func() {
			m, err := llamacpp.LoadModel(path, llamatest.ModelParams(t, llamacpp.ModelParams{}))
			require.NoError(t, err)
			ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: 256, Threads: 1})
			require.NoError(t, err)
			b, err := llamacpp.NewBatch(4, 1)
			require.NoError(t, err)
			_, _ = b.Add(5, 0, 0, true)
			gctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			require.NoError(t, ctx.Decode(gctx, b))
		}()
		runtime.GC()
		runtime.GC()
	}
	// The package still works afterwards.
	m := loadModel(t, "tiny-f32")
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256})
	decodeSeq(t, ctx, newBatch(t, 8, 1), 0, 0, []int32{5, 6})
}

func TestMoreBadInput(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	_, err := m.NewContext(llamacpp.ContextParams{Threads: llamacpp.MaxThreads + 1})
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256})
	assert.ErrorIs(t, ctx.SetThreads(1, 100000), llamacpp.ErrInvalidArgument)

	b := newBatch(t, 4, 2)
	_, err = b.AddShared(5, 0, []int32{1, 1}, true)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument, "duplicate sequence ids")

	p := modelPath(t, "tiny-f32")
	assert.ErrorIs(t, llamacpp.Quantize(p, p, llamacpp.Q8_0, 1), llamacpp.ErrInvalidArgument, "quantize onto itself")

	// The vocabulary's constants survive Close.
	m2, err := llamacpp.LoadModel(p, llamatest.ModelParams(t, llamacpp.ModelParams{VocabOnly: true}))
	require.NoError(t, err)
	v := m2.Vocab()
	require.NoError(t, m2.Close())
	assert.Equal(t, int32(2), v.EOS())
	assert.True(t, v.IsEOG(2))
	_, err = v.Tokenize("x", false, false)
	assert.ErrorIs(t, err, llamacpp.ErrClosed)
	_, err = v.ApplyChatTemplate("", []backend.Message{{Role: "user", Content: "hi"}}, true)
	assert.ErrorIs(t, err, llamacpp.ErrClosed)
}
