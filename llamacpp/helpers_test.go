package llamacpp_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/require"
)

// Models are written once per test binary into a temporary directory.
var (
	modelDir  string
	modelOnce sync.Map // name -> *sync.Once
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "llamacpp-test")
	if err != nil {
		panic(err)
	}
	modelDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// modelPath writes the named model on first use and returns its path.
func modelPath(t testing.TB, name string) string {
	t.Helper()
	path := filepath.Join(modelDir, name+".gguf")
	once, _ := modelOnce.LoadOrStore(name, new(sync.Once))
	var err error
	once.(*sync.Once).Do(func() {
		switch name {
		case "tiny-f32":
			err = testmodel.WriteRandom(path, testmodel.TinySpec(gguf.TensorF32))
		case "tiny-f16":
			err = testmodel.WriteRandom(path, testmodel.TinySpec(gguf.TensorF16))
		case "tiny-last":
			// the tiny model saying it is pooled by its last token
			s := testmodel.TinySpec(gguf.TensorF32)
			s.Extra = []gguf.KV{{Key: "llama.pooling_type", Value: uint32(3)}}
			err = testmodel.WriteRandom(path, s)
		case "prefix":
			err = testmodel.NewPrefix(7).Write(path)
		case "bench-small":
			err = testmodel.WriteRandom(path, testmodel.BenchSmallSpec())
		case "tiny-t5":
			err = testmodel.TinyT5().Write(path)
		case "tiny-qwen2vl":
			err = testmodel.TinyQwen2VLText().Write(path)
		default:
			t.Fatalf("unknown test model %q", name)
		}
	})
	require.NoError(t, err)
	_, err = os.Stat(path)
	require.NoError(t, err, "model %s was not written", name)
	return path
}

func loadModel(t testing.TB, name string) *llamacpp.Model {
	t.Helper()
	m, err := llamacpp.LoadModel(modelPath(t, name), llamatest.ModelParams(t, llamacpp.ModelParams{}))
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

func newContext(t testing.TB, m *llamacpp.Model, p llamacpp.ContextParams) *llamacpp.Context {
	t.Helper()
	if p.Threads == 0 {
		// One thread: test binaries run in parallel on small machines, and
		// ggml's spinning thread pool collapses when cores are oversubscribed.
		p.Threads = 1
	}
	if p.TypeK == "" {
		// An f32 cache without flash attention keeps comparisons against the
		// reference tight; llama.cpp's defaults are tested on their own.
		p.TypeK, p.TypeV = llamacpp.KVF32, llamacpp.KVF32
		p.FlashAttention = llamacpp.FlashAttentionOff
	}
	ctx, err := m.NewContext(p)
	require.NoError(t, err)
	t.Cleanup(func() { ctx.Close() })
	return ctx
}

func newBatch(t testing.TB, n, seqsPerToken int) *llamacpp.Batch {
	t.Helper()
	b, err := llamacpp.NewBatch(n, seqsPerToken)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

func loadReference(t testing.TB, name string) *reference.Model {
	t.Helper()
	r, err := reference.Load(modelPath(t, name))
	require.NoError(t, err)
	return r
}

// randomTokens draws n ordinary tokens (no control tokens) deterministically.
func randomTokens(seed, n, vocab int) []int32 {
	out := make([]int32, n)
	x := uint64(seed)*0x9E3779B97F4A7C15 + 1
	for i := range out {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		out[i] = int32(3 + x%uint64(vocab-3))
	}
	return out
}

// decodeSeq evaluates tokens as the continuation of seq starting at pos, in
// one decode with every output flagged, and returns copies of the rows.
func decodeSeq(t testing.TB, ctx *llamacpp.Context, b *llamacpp.Batch, seq int32, pos int, tokens []int32) [][]float32 {
	t.Helper()
	b.Clear()
	for i, tok := range tokens {
		_, err := b.Add(tok, int32(pos+i), seq, true)
		require.NoError(t, err)
	}
	require.NoError(t, ctx.Decode(context.Background(), b))
	rows := make([][]float32, len(tokens))
	for i := range tokens {
		row, err := ctx.CopyLogits(nil, i)
		require.NoError(t, err)
		rows[i] = row
	}
	return rows
}

// maxDiff is the largest |got-want| over matching rows.
func maxDiff(t testing.TB, got [][]float32, want [][]float64) float64 {
	t.Helper()
	require.Equal(t, len(want), len(got))
	d := 0.0
	for i := range got {
		require.Equal(t, len(want[i]), len(got[i]))
		for j := range got[i] {
			d = math.Max(d, math.Abs(float64(got[i][j])-want[i][j]))
		}
	}
	return d
}
