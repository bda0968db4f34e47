package reference

import (
	"errors"
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func assertRowsClose(t *testing.T, want, got [][]float64, tol float64) {
	t.Helper()
	require.Equal(t, len(want), len(got))
	for i := range want {
		require.Equal(t, len(want[i]), len(got[i]))
		for j := range want[i] {
			if d := math.Abs(want[i][j] - got[i][j]); d > tol*(1+math.Abs(want[i][j])) || math.IsNaN(got[i][j]) {
				t.Fatalf("position %d, token %d: want %.17g, got %.17g", i, j, want[i][j], got[i][j])
			}
		}
	}
}

func randomTokens(rng *rand.Rand, n, vocab int) []int32 {
	out := []int32{testmodel.BOS}
	for len(out) < n {
		out = append(out, int32(rng.IntN(vocab)))
	}
	return out
}

func TestMarkovOracle(t *testing.T) {
	v := testmodel.TinyVocab(true)
	rows, err := testmodel.RandomTransitions(v.Size(), 11)
	require.NoError(t, err)
	m, err := testmodel.NewMarkov("markov", v, rows)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "markov.gguf")
	require.NoError(t, m.Write(path))
	model, err := Load(path)
	require.NoError(t, err)

	tokens := randomTokens(rand.New(rand.NewPCG(1, 2)), 24, v.Size())
	got, err := model.Logits(tokens)
	require.NoError(t, err)
	want := make([][]float64, len(tokens))
	for i, tok := range tokens {
		want[i] = m.Logits(tok)
	}
	assertRowsClose(t, want, got, 1e-13)
}

func TestDemoOracle(t *testing.T) {
	d, err := testmodel.NewDemo()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "demo.gguf")
	require.NoError(t, d.Write(path))
	model, err := Load(path)
	require.NoError(t, err)
	tokens := d.Spec.Vocab.Tokenize("The model reads a prompt, then zzz é.", true)
	got, err := model.Logits(tokens)
	require.NoError(t, err)
	for i, tok := range tokens {
		assertRowsClose(t, [][]float64{d.Logits(tok)}, got[i:i+1], 1e-13)
	}
}

func TestPrefixOracle(t *testing.T) {
	p := testmodel.NewPrefix(3)
	path := filepath.Join(t.TempDir(), "prefix.gguf")
	require.NoError(t, p.Write(path))
	model, err := Load(path)
	require.NoError(t, err)
	tokens := randomTokens(rand.New(rand.NewPCG(5, 6)), 40, p.Spec.Vocab.Size())
	got, err := model.Logits(tokens)
	require.NoError(t, err)
	want, err := p.Logits(tokens)
	require.NoError(t, err)
	assertRowsClose(t, want, got, 1e-12)
}

// naive evaluates a model read straight from the file, written as
// differently as practical from the package: whole-sequence matrices, RoPE as
// complex rotation, an explicit causal mask.
func naive(t *testing.T, path string, tokens []int32) [][]float64 {
	t.Helper()
	r, err := gguf.Open(path)
	require.NoError(t, err)
	defer r.Close()
	u := func(key string) int {
		v, err := gguf.Get[uint32](r.File, key)
		require.NoError(t, err)
		return int(v)
	}
	d, nLayer, nHead, nKV, nFF := u("llama.embedding_length"), u("llama.block_count"), u("llama.attention.head_count"),
		u("llama.attention.head_count_kv"), u("llama.feed_forward_length")
	eps32, err := gguf.Get[float32](r.File, "llama.attention.layer_norm_rms_epsilon")
	require.NoError(t, err)
	base32, err := gguf.Get[float32](r.File, "llama.rope.freq_base")
	require.NoError(t, err)
	eps, base, hd := float64(eps32), float64(base32), d/nHead
	mat := func(name string) [][]float64 { // [rows = ne[1]][cols = ne[0]]
		info, ok := r.Tensor(name)
		require.True(t, ok, name)
		flat, err := r.Float64s(name)
		require.NoError(t, err)
		cols := int(info.Shape[0])
		out := make([][]float64, len(flat)/cols)
		for i := range out {
			out[i] = flat[i*cols : (i+1)*cols]
		}
		return out
	}
	vec := func(name string) []float64 { return mat(name)[0] }
	mul := func(w [][]float64, x []float64) []float64 {
		out := make([]float64, len(w))
		for i, row := range w {
			for j := range row {
				out[i] += row[j] * x[j]
			}
		}
		return out
	}
	norm := func(x, w []float64) []float64 {
		ms := 0.0
		for _, v := range x {
			ms += v * v / float64(len(x))
		}
		out := make([]float64, len(x))
		for i := range x {
			out[i] = x[i] / math.Sqrt(ms+eps) * w[i]
		}
		return out
	}
	rope := func(x []float64, pos int) {
		for h := 0; h < len(x)/hd; h++ {
			for i := 0; i < hd/2; i++ {
				theta := float64(pos) / math.Pow(base, float64(2*i)/float64(hd))
				z := complex(x[h*hd+2*i], x[h*hd+2*i+1]) * cmplx.Exp(complex(0, theta))
				x[h*hd+2*i], x[h*hd+2*i+1] = real(z), imag(z)
			}
		}
	}

	emb := mat("token_embd.weight")
	out := emb
	if _, ok := r.Tensor("output.weight"); ok {
		out = mat("output.weight")
	}
	n := len(tokens)
	xs := make([][]float64, n)
	for i, tok := range tokens {
		xs[i] = append([]float64(nil), emb[tok]...)
	}
	for l := 0; l < nLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		wq, wk, wv, wo := mat(p+"attn_q.weight"), mat(p+"attn_k.weight"), mat(p+"attn_v.weight"), mat(p+"attn_output.weight")
		qs, ks, vs := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for i := range xs {
			a := norm(xs[i], vec(p+"attn_norm.weight"))
			qs[i], ks[i], vs[i] = mul(wq, a), mul(wk, a), mul(wv, a)
			rope(qs[i], i)
			rope(ks[i], i)
		}
		for i := range xs {
			o := make([]float64, d)
			for h := 0; h < nHead; h++ {
				g := h * nKV / nHead
				w := make([]float64, n)
				sum := 0.0
				for j := 0; j < n; j++ {
					if j > i {
						continue // masked: weight exp(-inf) = 0
					}
					s := 0.0
					for c := 0; c < hd; c++ {
						s += qs[i][h*hd+c] * ks[j][g*hd+c]
					}
					w[j] = math.Exp(s / math.Sqrt(float64(hd)))
					sum += w[j]
				}
				for j := 0; j <= i; j++ {
					for c := 0; c < hd; c++ {
						o[h*hd+c] += w[j] / sum * vs[j][g*hd+c]
					}
				}
			}
			attn := mul(wo, o)
			for c := range xs[i] {
				xs[i][c] += attn[c]
			}
			f := norm(xs[i], vec(p+"ffn_norm.weight"))
			gate, up := mul(mat(p+"ffn_gate.weight"), f), mul(mat(p+"ffn_up.weight"), f)
			hidden := make([]float64, nFF)
			for c := range hidden {
				hidden[c] = gate[c] * (1 / (1 + math.Exp(-gate[c]))) * up[c]
			}
			down := mul(mat(p+"ffn_down.weight"), hidden)
			for c := range xs[i] {
				xs[i][c] += down[c]
			}
		}
	}
	logits := make([][]float64, n)
	for i := range xs {
		logits[i] = mul(out, norm(xs[i], vec("output_norm.weight")))
	}
	return logits
}

func smallSpec(mutate func(*testmodel.Spec)) testmodel.Spec {
	s := testmodel.TinySpec(gguf.TensorF32)
	s.NLayer = 1
	if mutate != nil {
		mutate(&s)
	}
	return s
}

func TestAgainstNaive(t *testing.T) {
	cases := map[string]testmodel.Spec{
		"one layer gqa":      smallSpec(nil),
		"one layer mha":      smallSpec(func(s *testmodel.Spec) { s.NHeadKV = 4 }),
		"one layer mqa tied": smallSpec(func(s *testmodel.Spec) { s.NHeadKV = 1; s.Tied = true }),
		"two layers f16":     smallSpec(func(s *testmodel.Spec) { s.NLayer = 2; s.WeightType = gguf.TensorF16; s.RopeFreqBase = 500 }),
		"tiny":               testmodel.TinySpec(gguf.TensorF32),
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			require.NoError(t, testmodel.WriteRandom(path, spec))
			model, err := Load(path)
			require.NoError(t, err)
			// Positions up to 30 make RoPE's low frequencies matter.
			tokens := randomTokens(rand.New(rand.NewPCG(7, 8)), 30, spec.Vocab.Size())
			got, err := model.Logits(tokens)
			require.NoError(t, err)
			assertRowsClose(t, naive(t, path, tokens), got, 1e-10)
		})
	}
}

// TestTinyLogitsScale: random logits are O(1)..O(10) and not degenerate.
func TestTinyLogitsScale(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, testmodel.WriteRandom(path, testmodel.TinySpec(gguf.TensorF16)))
	model, err := Load(path)
	require.NoError(t, err)
	v := testmodel.TinyVocab(true)
	logits, err := model.Logits(v.Tokenize("the model reads a prompt and returns the logits", true))
	require.NoError(t, err)
	tops := map[int]bool{}
	for i, row := range logits {
		mean, sd := 0.0, 0.0
		for _, l := range row {
			mean += l / float64(len(row))
		}
		for _, l := range row {
			sd += (l - mean) * (l - mean) / float64(len(row))
		}
		sd = math.Sqrt(sd)
		assert.True(t, sd > 1 && sd < 10, "position %d: logit sd %g", i, sd)
		top := math.Exp(testmodel.LogSoftmax(row)[argmax(row)])
		assert.True(t, top > 0.01 && top < 0.99, "position %d: top probability %g", i, top)
		tops[argmax(row)] = true
	}
	assert.Greater(t, len(tops), len(logits)/2, "positions must not all predict the same token")
}

func argmax(x []float64) int {
	best := 0
	for i := range x {
		if x[i] > x[best] {
			best = i
		}
	}
	return best
}

func loadTiny(t *testing.T) (*Model, int) {
	t.Helper()
	spec := testmodel.TinySpec(gguf.TensorF32)
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, testmodel.WriteRandom(path, spec))
	model, err := Load(path)
	require.NoError(t, err)
	return model, spec.Vocab.Size()
}

func TestCausalAndIncremental(t *testing.T) {
	model, vocab := loadTiny(t)
	rng := rand.New(rand.NewPCG(9, 9))
	tokens := randomTokens(rng, 20, vocab)
	full, err := model.Logits(tokens)
	require.NoError(t, err)

	// Causality: changing later tokens leaves earlier logits untouched.
	changed := append([]int32(nil), tokens...)
	for i := 12; i < len(changed); i++ {
		changed[i] = int32(rng.IntN(vocab))
	}
	other, err := model.Logits(changed)
	require.NoError(t, err)
	assert.Equal(t, full[:12], other[:12])
	assert.NotEqual(t, full[19], other[19])

	// Incremental evaluation in chunks equals evaluation from scratch.
	seq := model.NewSequence()
	var inc [][]float64
	for _, chunk := range [][]int32{tokens[:1], tokens[1:7], tokens[7:8], tokens[8:]} {
		rows, err := seq.Eval(chunk)
		require.NoError(t, err)
		inc = append(inc, rows...)
	}
	assert.Equal(t, full, inc)
	assert.Equal(t, 20, seq.Len())

	// A copied sequence extended differently equals the full history.
	base := model.NewSequence()
	_, err = base.Eval(tokens[:12])
	require.NoError(t, err)
	fork := base.Clone()
	a, err := base.Eval(tokens[12:])
	require.NoError(t, err)
	b, err := fork.Eval(changed[12:])
	require.NoError(t, err)
	assert.Equal(t, full[12:], a)
	assert.Equal(t, other[12:], b)

	// Truncating and re-evaluating equals the other history.
	require.NoError(t, base.Truncate(12))
	c, err := base.Eval(changed[12:])
	require.NoError(t, err)
	assert.Equal(t, other[12:], c)
	assert.Error(t, base.Truncate(21))
	assert.Error(t, base.Truncate(-1))
}

func TestBadTokens(t *testing.T) {
	model, vocab := loadTiny(t)
	seq := model.NewSequence()
	_, err := seq.Eval([]int32{1, 2})
	require.NoError(t, err)
	for _, bad := range []int32{-1, int32(vocab)} {
		_, err := seq.Eval([]int32{5, bad})
		assert.ErrorIs(t, err, ErrToken)
		assert.Equal(t, 2, seq.Len(), "a failed Eval leaves the sequence unchanged")
	}
	_, err = model.Logits([]int32{int32(vocab) + 7})
	assert.ErrorIs(t, err, ErrToken)
	rows, err := model.Logits(nil)
	require.NoError(t, err)
	assert.Empty(t, rows)
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(filepath.Join(dir, "missing.gguf"))
	assert.Error(t, err)

	junk := filepath.Join(dir, "junk.gguf")
	require.NoError(t, os.WriteFile(junk, []byte("not a model"), 0o644))
	_, err = Load(junk)
	assert.Error(t, err)

	write := func(md []gguf.KV, tensors []gguf.TensorInfo) string {
		p := filepath.Join(dir, fmt.Sprintf("f%d.gguf", len(md)*100+len(tensors)))
		f, err := os.Create(p)
		require.NoError(t, err)
		defer f.Close()
		w, err := gguf.NewWriter(f, md, tensors)
		require.NoError(t, err)
		for _, ti := range tensors {
			require.NoError(t, w.WriteFloat32s(make([]float32, ti.Elements())))
		}
		require.NoError(t, w.Close())
		return p
	}
	_, err = Load(write([]gguf.KV{{Key: "general.architecture", Value: "gpt2"}}, nil))
	assert.ErrorContains(t, err, "not llama")
	_, err = Load(write([]gguf.KV{{Key: "general.architecture", Value: "llama"}}, nil))
	assert.Error(t, err)

	// A valid model plus a stray tensor is rejected, as llama.cpp would.
	spec := smallSpec(nil)
	good := filepath.Join(dir, "good.gguf")
	require.NoError(t, testmodel.WriteRandom(good, spec))
	r, err := gguf.Open(good)
	require.NoError(t, err)
	md, infos := r.Metadata, append([]gguf.TensorInfo(nil), r.Tensors...)
	r.Close()
	_, err = Load(write(md, append(infos, gguf.TensorInfo{Name: "rope_freqs.weight", Type: gguf.TensorF32, Shape: []uint64{32}})))
	assert.ErrorContains(t, err, "tensors")
	// A tensor of the wrong shape.
	infos[0].Shape = []uint64{infos[0].Shape[0], infos[0].Shape[1] - 1}
	_, err = Load(write(md, infos))
	assert.ErrorContains(t, err, "shape")
}

func TestQuantizedUnsupported(t *testing.T) {
	dir := t.TempDir()
	spec := smallSpec(nil)
	good := filepath.Join(dir, "good.gguf")
	require.NoError(t, testmodel.WriteRandom(good, spec))
	r, err := gguf.Open(good)
	require.NoError(t, err)
	md, infos := r.Metadata, append([]gguf.TensorInfo(nil), r.Tensors...)
	r.Close()
	for i := range infos {
		if infos[i].Name == "blk.0.attn_q.weight" {
			infos[i].Type = gguf.TensorQ8_0
		}
	}
	p := filepath.Join(dir, "q.gguf")
	f, err := os.Create(p)
	require.NoError(t, err)
	w, err := gguf.NewWriter(f, md, infos)
	require.NoError(t, err)
	for _, ti := range infos {
		size, err := ti.Size()
		require.NoError(t, err)
		_, err = w.Write(make([]byte, size))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
	_, err = Load(p)
	assert.True(t, errors.Is(err, gguf.ErrUnsupportedType), "%v", err)
}

func BenchmarkTinyStep(b *testing.B) {
	spec := testmodel.TinySpec(gguf.TensorF32)
	path := filepath.Join(b.TempDir(), "tiny.gguf")
	require.NoError(b, testmodel.WriteRandom(path, spec))
	model, err := Load(path)
	require.NoError(b, err)
	b.ResetTimer()
	for range b.N {
		seq := model.NewSequence()
		if _, err := seq.Eval([]int32{1, 100, 200, 300, 400, 500, 600, 700}); err != nil {
			b.Fatal(err)
		}
	}
}
