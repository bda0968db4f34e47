package testmodel

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustDemo(t *testing.T) *Demo {
	t.Helper()
	d, err := NewDemo()
	require.NoError(t, err)
	return d
}

func open(t *testing.T, path string) *gguf.Reader {
	t.Helper()
	r, err := gguf.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// wantShapes lists the tensors llama.cpp's load_tensors creates for
// LLM_ARCH_LLAMA (llama-model.cpp), written out by hand.
func wantShapes(d, kv, ff, vocab, layers uint64, tied bool) map[string][]uint64 {
	m := map[string][]uint64{
		"token_embd.weight":  {d, vocab},
		"output_norm.weight": {d},
	}
	if !tied {
		m["output.weight"] = []uint64{d, vocab}
	}
	for i := uint64(0); i < layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		m[p+"attn_norm.weight"] = []uint64{d}
		m[p+"attn_q.weight"] = []uint64{d, d}
		m[p+"attn_k.weight"] = []uint64{d, kv}
		m[p+"attn_v.weight"] = []uint64{d, kv}
		m[p+"attn_output.weight"] = []uint64{d, d}
		m[p+"ffn_norm.weight"] = []uint64{d}
		m[p+"ffn_gate.weight"] = []uint64{d, ff}
		m[p+"ffn_down.weight"] = []uint64{ff, d}
		m[p+"ffn_up.weight"] = []uint64{d, ff}
	}
	return m
}

func shapes(r *gguf.Reader) map[string][]uint64 {
	m := map[string][]uint64{}
	for _, t := range r.Tensors {
		m[t.Name] = t.Shape
	}
	return m
}

func TestTinyFile(t *testing.T) {
	for _, typ := range []gguf.TensorType{gguf.TensorF32, gguf.TensorF16} {
		s := TinySpec(typ)
		path := filepath.Join(t.TempDir(), "tiny.gguf")
		require.NoError(t, WriteRandom(path, s))
		r := open(t, path)
		V := uint64(s.Vocab.Size())
		assert.Equal(t, wantShapes(256, 128, 512, V, 3, false), shapes(r))

		// Every key llama.cpp reads, with the exact GGUF type it insists on.
		md := map[string]any{}
		for _, kv := range r.Metadata {
			md[kv.Key] = kv.Value
		}
		wantFileType := uint32(0)
		if typ == gguf.TensorF16 {
			wantFileType = 1
		}
		assert.Equal(t, "llama", md["general.architecture"])
		assert.Equal(t, wantFileType, md["general.file_type"])
		assert.Equal(t, uint32(2048), md["llama.context_length"])
		assert.Equal(t, uint32(256), md["llama.embedding_length"])
		assert.Equal(t, uint32(3), md["llama.block_count"])
		assert.Equal(t, uint32(512), md["llama.feed_forward_length"])
		assert.Equal(t, uint32(4), md["llama.attention.head_count"])
		assert.Equal(t, uint32(2), md["llama.attention.head_count_kv"])
		assert.Equal(t, uint32(64), md["llama.rope.dimension_count"])
		assert.Equal(t, float32(1e-5), md["llama.attention.layer_norm_rms_epsilon"])
		assert.Equal(t, float32(10000), md["llama.rope.freq_base"])
		assert.Equal(t, "llama", md["tokenizer.ggml.model"])
		assert.Equal(t, s.Vocab.Tokens, md["tokenizer.ggml.tokens"])
		assert.Equal(t, s.Vocab.Scores, md["tokenizer.ggml.scores"])
		assert.IsType(t, []int32{}, md["tokenizer.ggml.token_type"])
		assert.Equal(t, int32(6), md["tokenizer.ggml.token_type"].([]int32)[FirstByte])
		assert.Equal(t, uint32(1), md["tokenizer.ggml.bos_token_id"])
		assert.Equal(t, uint32(2), md["tokenizer.ggml.eos_token_id"])
		assert.Equal(t, uint32(0), md["tokenizer.ggml.unknown_token_id"])
		assert.Equal(t, true, md["tokenizer.ggml.add_bos_token"])
		assert.Equal(t, false, md["tokenizer.ggml.add_eos_token"])
		assert.Equal(t, ChatMLTemplate, md["tokenizer.chat_template"])

		for _, ti := range r.Tensors {
			want := typ
			if len(ti.Shape) == 1 {
				want = gguf.TensorF32
			}
			assert.Equal(t, want, ti.Type, ti.Name)
			vals, err := r.Float64s(ti.Name)
			require.NoError(t, err)
			// Uniform draws are never exactly zero: a zero means a gap in the
			// stream.
			zeros := 0
			for _, v := range vals {
				if v == 0 {
					zeros++
				}
			}
			require.Zero(t, zeros, ti.Name)
		}
	}
}

func TestRandomWeightStatistics(t *testing.T) {
	s := TinySpec(gguf.TensorF32)
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, WriteRandom(path, s))
	r := open(t, path)
	std := func(name string) (mean, sd float64) {
		vals, err := r.Float64s(name)
		require.NoError(t, err)
		for _, v := range vals {
			mean += v
		}
		mean /= float64(len(vals))
		for _, v := range vals {
			sd += (v - mean) * (v - mean)
		}
		return mean, math.Sqrt(sd / float64(len(vals)))
	}
	for name, want := range map[string][2]float64{
		"token_embd.weight":        {0, 1},
		"output.weight":            {0, 3.0 / 16},
		"blk.0.attn_q.weight":      {0, 1.5 / 16},
		"blk.1.attn_v.weight":      {0, 1.0 / 16},
		"blk.2.ffn_down.weight":    {0, 1 / math.Sqrt(512)},
		"blk.0.ffn_norm.weight":    {1, 0.2 / math.Sqrt(3)},
		"output_norm.weight":       {1, 0.2 / math.Sqrt(3)},
		"blk.2.attn_output.weight": {0, 1.0 / 16},
	} {
		mean, sd := std(name)
		assert.InDelta(t, want[0], mean, 0.15*want[1], name)
		assert.InDelta(t, want[1], sd, 0.15*want[1], name)
	}
	// Chunks of 65536 values come from separately seeded generators: the
	// second chunk must not repeat the first.
	emb, err := r.Float64s("token_embd.weight")
	require.NoError(t, err)
	assert.NotEqual(t, emb[:8], emb[65536:65536+8])
}

func TestWriteRandomDeterministic(t *testing.T) {
	dir := t.TempDir()
	s := TinySpec(gguf.TensorF16)
	s.NLayer = 1
	read := func(name string, s Spec) []byte {
		p := filepath.Join(dir, name)
		require.NoError(t, WriteRandom(p, s))
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		return b
	}
	a, b := read("a.gguf", s), read("b.gguf", s)
	assert.True(t, bytes.Equal(a, b))
	s.Seed++
	c := read("c.gguf", s)
	assert.Equal(t, len(a), len(c))
	assert.False(t, bytes.Equal(a, c))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 3, "no temporary files are left behind")
}

func TestTiedAndInvalidSpecs(t *testing.T) {
	s := TinySpec(gguf.TensorF32)
	s.Tied = true
	path := filepath.Join(t.TempDir(), "sub", "tied.gguf")
	require.NoError(t, WriteRandom(path, s))
	r := open(t, path)
	assert.Equal(t, wantShapes(256, 128, 512, uint64(s.Vocab.Size()), 3, true), shapes(r))

	bad := []func(*Spec){
		func(s *Spec) { s.Vocab = nil },
		func(s *Spec) { s.NHead = 3 },
		func(s *Spec) { s.NHeadKV = 3 },
		func(s *Spec) { s.NLayer = 0 },
		func(s *Spec) { s.WeightType = gguf.TensorQ8_0 },
		func(s *Spec) { s.NEmbd = 4; s.NHead = 4 }, // odd... head width 1
	}
	for i, mutate := range bad {
		s := TinySpec(gguf.TensorF32)
		mutate(&s)
		assert.Error(t, WriteRandom(filepath.Join(t.TempDir(), "x.gguf"), s), "case %d", i)
	}
}

func TestBenchSpecs(t *testing.T) {
	small, big := BenchSmallSpec(), Bench1BSpec()
	assert.Equal(t, 32000, small.Vocab.Size())
	assert.Equal(t, 128256, big.Vocab.Size())
	// Llama 3.2 1B has 1,235,814,400 parameters.
	assert.Equal(t, int64(1235814400), big.Params())
	assert.InDelta(t, 134e6, float64(small.Params()), 1e6)
	assert.Equal(t, 64, big.HeadDim())
	assert.Equal(t, 512, big.NEmbdKV())
}

func TestMarkov(t *testing.T) {
	v := TinyVocab(true)
	rows, err := RandomTransitions(v.Size(), 7, UNK, BOS)
	require.NoError(t, err)
	m, err := NewMarkov("markov", v, rows)
	require.NoError(t, err)
	assert.Equal(t, 896, m.Spec.NEmbd) // 856 tokens rounded up to 64s
	assert.Equal(t, 14, m.Spec.NHead)
	assert.InDelta(t, 1, m.Scale(), 1e-7)

	for _, prev := range []int32{0, 5, 300, int32(v.Size() - 1)} {
		lp := m.NextLogProbs(prev)
		require.Len(t, lp, v.Size())
		sum := 0.0
		for _, p := range rows[prev] {
			sum += p
		}
		total := 0.0
		for b, l := range lp {
			total += math.Exp(l)
			if rows[prev][b] > 1e-12 {
				// float16 rounding of the stored value: relative 2^-11.
				require.InDelta(t, math.Log(rows[prev][b]/sum), l, 0x1p-11*math.Abs(l)+1e-6)
			} else {
				require.Less(t, l, -29.0)
			}
		}
		assert.InDelta(t, 1, total, 1e-12)
	}
	assert.Nil(t, m.Logits(-1))
	assert.Nil(t, m.NextLogProbs(int32(v.Size())))

	path := filepath.Join(t.TempDir(), "markov.gguf")
	require.NoError(t, m.Write(path))
	r := open(t, path)
	emb, err := r.Float64s("token_embd.weight")
	require.NoError(t, err)
	bad := 0
	for tok := 0; tok < v.Size(); tok++ {
		for j, x := range emb[tok*896 : (tok+1)*896] {
			if (j == tok) != (x == 1) || (j != tok && x != 0) {
				bad++
			}
		}
	}
	assert.Zero(t, bad, "embeddings must be one-hot")

	_, err = NewMarkov("x", v, rows[:3])
	assert.Error(t, err)
	broken := append([][]float64(nil), rows...)
	broken[4] = make([]float64, v.Size())
	_, err = NewMarkov("x", v, broken)
	assert.Error(t, err, "zero row")
	broken[4] = append([]float64(nil), rows[5]...)
	broken[4][9] = math.NaN()
	_, err = NewMarkov("x", v, broken)
	assert.Error(t, err, "NaN")
	broken[4][9] = -0.1
	_, err = NewMarkov("x", v, broken)
	assert.Error(t, err, "negative")
	_, err = RandomTransitions(5, 1)
	assert.Error(t, err)
}

// corpusWordCounts counts, independently of the tokenizer, which word
// follows each word in the demo corpus (words split at spaces, trailing
// punctuation dropped, only within sentences).
func corpusWordCounts() map[string]map[string]int {
	counts := map[string]map[string]int{}
	for _, p := range demoParagraphs() {
		words := strings.Fields(p)
		for i := 0; i+1 < len(words); i++ {
			a, b := words[i], words[i+1]
			if strings.ContainsAny(a[len(a)-1:], ".,:;") {
				continue
			}
			b = strings.TrimRight(b, ".,:;")
			if counts[a] == nil {
				counts[a] = map[string]int{}
			}
			counts[a][b]++
		}
	}
	return counts
}

func greedy(d *Demo, prompt string, n int) []int32 {
	ids := d.Spec.Vocab.Tokenize(prompt, true)
	for range n {
		lp := d.NextLogProbs(ids[len(ids)-1])
		best := 0
		for j := range lp {
			if lp[j] > lp[best] {
				best = j
			}
		}
		ids = append(ids, int32(best))
	}
	return ids
}

func TestDemo(t *testing.T) {
	d := mustDemo(t)
	v := d.Spec.Vocab
	assert.Greater(t, len(strings.Fields(DemoCorpus)), 1000)
	assert.Less(t, len(d.LogProbs), 400, "a few hundred states")
	assert.Equal(t, len(d.LogProbs)+(64-len(d.LogProbs)%64)%64, d.Spec.NEmbd)

	// The greedy successor of each word is its most frequent follower in the
	// corpus, counted without the tokenizer.
	words := corpusWordCounts()
	for _, w := range []string{"model", "reads", "prompt", "returns", "new", "logits", "for", "every"} {
		var best string
		bestN, ties := 0, 0
		for b, n := range words[w] {
			switch {
			case n > bestN:
				best, bestN, ties = b, n, 1
			case n == bestN:
				ties++
			}
		}
		require.Equal(t, 1, ties, "%q has no unique most frequent follower", w)
		next := greedy(d, w, 1)
		assert.Equal(t, Space+best, v.Tokens[next[len(next)-1]], "after %q", w)
	}

	text := v.Detokenize(greedy(d, "The model", 15))
	assert.Equal(t, " The model reads a prompt and returns new logits for every token. The model reads a", text)

	// Sampling follows other paths.
	rng := rand.New(rand.NewPCG(1, 1))
	sampled := v.Tokenize("The model", true)
	for range 40 {
		lp := d.NextLogProbs(sampled[len(sampled)-1])
		u, acc := rng.Float64(), 0.0
		for j, l := range lp {
			acc += math.Exp(l)
			if u < acc {
				sampled = append(sampled, int32(j))
				break
			}
		}
	}
	sampledText := v.Detokenize(sampled)
	t.Logf("greedy:  %q", text)
	t.Logf("sampled: %q", sampledText)
	assert.NotEqual(t, text, sampledText[:min(len(sampledText), len(text))])
	assert.Regexp(t, regexp.MustCompile(`^ The model [A-Za-z]`), sampledText)

	// </s> follows "." once per paragraph.
	dot, _ := v.ID(".")
	periods := 0
	for _, n := range d.Counts[dot] {
		periods += n
	}
	wantEOS := (float64(len(demoParagraphs())) + DemoSmoothing) / (float64(periods) + DemoSmoothing*float64(countTargets(d)))
	assert.InDelta(t, math.Log(wantEOS), d.NextLogProbs(dot)[EOS], 2e-3)
	assert.Equal(t, len(demoParagraphs()), d.Counts[dot][EOS])

	// Prompts outside the corpus still have a distribution: the unigram row.
	unknown := v.Tokenize("zzz", false)
	assert.Equal(t, 0, d.StateOf[unknown[len(unknown)-1]])
}

func countTargets(d *Demo) int {
	seen := map[int32]bool{}
	for _, row := range d.Counts {
		for b := range row {
			seen[b] = true
		}
	}
	return len(seen)
}

func TestPrefixOracle(t *testing.T) {
	p := NewPrefix(5)
	v := p.Spec.Vocab
	ids := v.Tokenize("the model reads the model", true)
	logits, err := p.Logits(ids)
	require.NoError(t, err)
	require.Len(t, logits, len(ids))

	// The last logits depend on earlier tokens...
	other := append([]int32(nil), ids...)
	other[2] = ids[3]
	logits2, err := p.Logits(other)
	require.NoError(t, err)
	assert.Equal(t, logits[1], logits2[1])
	assert.NotEqual(t, logits[len(ids)-1], logits2[len(ids)-1])
	// ...but not on their order.
	perm := append([]int32(nil), ids...)
	perm[1], perm[3] = perm[3], perm[1]
	logits3, err := p.Logits(perm)
	require.NoError(t, err)
	for j := range logits[len(ids)-1] {
		assert.InDelta(t, logits[len(ids)-1][j], logits3[len(ids)-1][j], 1e-12)
	}

	// Repeating a token raises its logit.
	the, _ := v.ID("▁the")
	rep, err := p.Logits([]int32{BOS, the, the, the, the, the, the})
	require.NoError(t, err)
	assert.Greater(t, rep[6][the]-rep[1][the], 0.5)

	// Logits are O(1)..O(10) and not degenerate.
	mx, mn := math.Inf(-1), math.Inf(1)
	for _, l := range logits[len(ids)-1] {
		mx, mn = max(mx, l), min(mn, l)
	}
	assert.Greater(t, mx-mn, 4.0)
	assert.Less(t, mx-mn, 60.0)

	_, err = p.Logits([]int32{int32(v.Size())})
	assert.Error(t, err)
	require.NoError(t, p.Write(filepath.Join(t.TempDir(), "prefix.gguf")))
}

func TestLogSoftmax(t *testing.T) {
	got := LogSoftmax([]float64{0, math.Log(3), 1000})
	assert.InDelta(t, -1000, got[0], 1e-9)
	assert.InDelta(t, 0, got[2], 1e-12)
	got = LogSoftmax([]float64{math.Log(1), math.Log(3)})
	assert.InDelta(t, math.Log(0.25), got[0], 1e-15)
	assert.InDelta(t, math.Log(0.75), got[1], 1e-15)
}

func TestDemoCorpusVocabulary(t *testing.T) {
	// Every corpus word is a single token.
	d := mustDemo(t)
	var missing []string
	for _, p := range demoParagraphs() {
		for _, chunk := range strings.Fields(p) {
			w := leadingWord(chunk)
			if _, ok := d.Spec.Vocab.ID(Space + w); w != "" && !ok {
				missing = append(missing, w)
			}
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing)
	assert.Equal(t, "llama.cpp", leadingWord("llama.cpp,"))
	assert.Equal(t, "model", leadingWord("model."))
	assert.Equal(t, "", leadingWord("(x"))
}

func TestWriteIfStale(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	s := TinySpec(gguf.TensorF16)
	s.NLayer = 1
	m := Random{Spec: s}
	assert.False(t, UpToDate(path, m))
	wrote, err := WriteIfStale(path, m)
	require.NoError(t, err)
	assert.True(t, wrote)
	assert.True(t, UpToDate(path, m))
	wrote, err = WriteIfStale(path, m)
	require.NoError(t, err)
	assert.False(t, wrote, "an up-to-date file is kept")

	s.Seed++
	assert.False(t, UpToDate(path, Random{Spec: s}), "another seed is another file")
	wrote, err = WriteIfStale(path, Random{Spec: s})
	require.NoError(t, err)
	assert.True(t, wrote)

	// A truncated file is stale.
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, st.Size()-1000))
	assert.False(t, UpToDate(path, Random{Spec: s}))

	// Fingerprints tell the models apart.
	v := TinyVocab(true)
	rows, err := RandomTransitions(v.Size(), 1)
	require.NoError(t, err)
	m1, err := NewMarkov("m", v, rows)
	require.NoError(t, err)
	rows[3][4] += 0.5
	m2, err := NewMarkov("m", v, rows)
	require.NoError(t, err)
	prints := map[string]bool{}
	for _, x := range []Model{m1, m2, NewPrefix(1), NewPrefix(2), mustDemo(t), Random{Spec: TinySpec(gguf.TensorF32)}, Random{Spec: TinySpec(gguf.TensorF16)}} {
		prints[x.Fingerprint()] = true
	}
	assert.Len(t, prints, 7)
	assert.Equal(t, m1.Fingerprint(), m1.Fingerprint())
}

// TestMarkovStoredValuesAreHalfExact: the stored log-probabilities and the
// product with the normed one-hot activation survive float16/TF32 rounding.
func TestMarkovStoredValuesAreHalfExact(t *testing.T) {
	d := mustDemo(t)
	for _, row := range d.LogProbs {
		for _, l := range row {
			require.Equal(t, l, gguf.Float16ToFloat32(gguf.Float32ToFloat16(l)))
		}
	}
	// The normed activation at the state's dimension is Scale(), which
	// rounds to exactly 1 in float16.
	assert.Equal(t, float32(1), gguf.Float16ToFloat32(gguf.Float32ToFloat16(float32(d.Scale()))))
}
