package llamabackend_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// llamaSetup writes a model, loads it in llama.cpp (unified KV cache, f32
// cells, no flash attention: the settings under which llama.cpp agrees with
// the reference to about 1e-5) and in the float64 reference.
func llamaSetup(t *testing.T, name string, slots int) (*llamabackend.Backend, *refbackend.Backend, *llamacpp.Model) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".gguf")
	switch name {
	case "prefix":
		require.NoError(t, testmodel.NewPrefix(3).Write(path))
	case "tiny":
		require.NoError(t, testmodel.WriteRandom(path, testmodel.TinySpec(gguf.TensorF32)))
	}
	m, err := llamacpp.LoadModel(path, llamatest.ModelParams(t, llamacpp.ModelParams{}))
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: 2048, Sequences: slots, UnifiedKV: true, Threads: 1,
		TypeK: llamacpp.KVF32, TypeV: llamacpp.KVF32, FlashAttention: llamacpp.FlashAttentionOff})
	require.NoError(t, err)
	t.Cleanup(func() { ctx.Close() })
	lb, err := llamabackend.New(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	ref, err := reference.Load(path)
	require.NoError(t, err)
	return lb, refbackend.New(ref, m.Vocab().Size(), slots), m
}

func llamaBeamConfig(beams, maxNew int, eos []int32) *genconfig.Config {
	cfg := genconfig.Default()
	cfg.NumBeams = beams
	cfg.NumReturnSequences = beams
	cfg.MaxNewTokens = &maxNew
	cfg.EOSTokenID = eos
	return cfg
}

// teacherForced sums log_softmax(logits)[token] over the generated tokens,
// evaluating prompt+tokens in one llama.cpp decode of a fresh sequence.
func teacherForced(t *testing.T, b *llamabackend.Backend, prompt, tokens []int32) float64 {
	t.Helper()
	ctx := b.Context()
	batch, err := llamacpp.NewBatch(len(prompt)+len(tokens), 1)
	require.NoError(t, err)
	defer batch.Close()
	seq := append(append([]int32{}, prompt...), tokens...)
	for i, tok := range seq {
		_, err := batch.Add(tok, int32(i), 0, i >= len(prompt)-1)
		require.NoError(t, err)
	}
	require.NoError(t, ctx.Decode(context.Background(), batch))
	sum := 0.0
	for i, tok := range tokens {
		row, err := ctx.Logits(len(prompt) - 1 + i)
		require.NoError(t, err)
		sum += logSoftmaxAt(row, tok)
	}
	require.NoError(t, ctx.SeqRemove(0, -1, -1))
	return sum
}

// logSoftmaxAt is log_softmax(row)[tok] in float64.
func logSoftmaxAt(row []float32, tok int32) float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = math.Max(mx, float64(v))
	}
	z := 0.0
	for _, v := range row {
		z += math.Exp(float64(v) - mx)
	}
	return float64(row[tok]) - mx - math.Log(z)
}

// llamaBeamProblems runs a search on llama.cpp and returns the problems
// found against the reference search and teacher forcing (none for a
// correct search).
func llamaBeamProblems(t *testing.T, lb *llamabackend.Backend, rb *refbackend.Backend, prompts [][]int32, opts beam.Options) []string {
	t.Helper()
	return problemsVia(t, lb, lb, rb, prompts, opts)
}

// problemsVia is llamaBeamProblems with the search running on via, a
// backend that wraps lb.
func problemsVia(t *testing.T, via backend.Backend, lb *llamabackend.Backend, rb *refbackend.Backend, prompts [][]int32, opts beam.Options) []string {
	t.Helper()
	got, err := beam.Search(context.Background(), via, prompts, opts)
	require.NoError(t, err)
	want, err := beam.Search(context.Background(), rb, prompts, opts)
	require.NoError(t, err)
	var problems []string
	for s := range lb.Slots() {
		p, err := lb.Context().SeqPosMax(int32(s))
		require.NoError(t, err)
		if p != -1 {
			problems = append(problems, fmt.Sprintf("sequence %d still holds cells up to position %d", s, p))
		}
	}
	for i := range prompts {
		if len(got.Hypotheses[i]) != len(want.Hypotheses[i]) {
			problems = append(problems, fmt.Sprintf("prompt %d: %d hypotheses, reference %d", i, len(got.Hypotheses[i]), len(want.Hypotheses[i])))
			continue
		}
		for j, h := range got.Hypotheses[i] {
			w := want.Hypotheses[i][j]
			if fmt.Sprint(h.Tokens) != fmt.Sprint(w.Tokens) {
				problems = append(problems, fmt.Sprintf("prompt %d hypothesis %d: %v, reference %v", i, j, h.Tokens, w.Tokens))
			}
			if math.Abs(h.LogProb-w.LogProb) > llamatest.Tolerance(t, llamatest.BeamLogProb) {
				problems = append(problems, fmt.Sprintf("prompt %d hypothesis %d: log-prob %.6f, reference %.6f", i, j, h.LogProb, w.LogProb))
			}
			if tf := teacherForced(t, lb, prompts[i], h.Tokens); math.Abs(h.LogProb-tf) > llamatest.Tolerance(t, llamatest.BeamLogProb) {
				problems = append(problems, fmt.Sprintf("prompt %d hypothesis %d: log-prob %.6f, teacher-forced %.6f", i, j, h.LogProb, tf))
			}
		}
	}
	return problems
}

// Beam search through llama.cpp sequence copies gives the hypotheses of the
// same search over the float64 reference; every hypothesis's log-probability
// equals a fresh teacher-forced evaluation; no cells are left behind.
func TestLlamaBeamMatchesReference(t *testing.T) {
	for _, name := range []string{"prefix", "tiny"} {
		for _, rule := range []beam.Rule{beam.Transformers, beam.Narrowing} {
			t.Run(name+"/"+rule.String(), func(t *testing.T) {
				lb, rb, m := llamaSetup(t, name, 8)
				v := m.Vocab()
				p1, err := v.Tokenize("The model said", true, false)
				require.NoError(t, err)
				p2, err := v.Tokenize("We want to go", true, false)
				require.NoError(t, err)
				opts := beam.Options{Rule: rule, Config: llamaBeamConfig(4, 6, v.EOGTokens())}
				problems := llamaBeamProblems(t, lb, rb, [][]int32{p1, p2}, opts)
				assert.Empty(t, problems)
			})
		}
	}
}

// dropCopies is a deliberately broken backend: Copy does nothing, so a
// child that needs its parent's history copied into a fresh sequence gets an
// empty one, and llama.cpp scores a history the search never chose.
type dropCopies struct{ *llamabackend.Backend }

func (dropCopies) Copy(dst, src int) error { return nil }

// A search whose sequence copies are lost is caught by the same checks: the
// backend then scores histories the search never chose.
func TestLlamaBrokenReorderDetected(t *testing.T) {
	lb, rb, m := llamaSetup(t, "prefix", 4)
	p, err := m.Vocab().Tokenize("The model said", true, false)
	require.NoError(t, err)
	opts := beam.Options{Config: llamaBeamConfig(4, 6, m.Vocab().EOGTokens())}
	require.Empty(t, llamaBeamProblems(t, lb, rb, [][]int32{p}, opts))
	problems := problemsVia(t, dropCopies{lb}, lb, rb, [][]int32{p}, opts)
	t.Logf("broken reorder: %d problems, e.g. %v", len(problems), problems[:min(len(problems), 2)])
	assert.NotEmpty(t, problems)
}

// Too few sequences for the beams is a clear error, and the context stays
// usable.
func TestLlamaBeamTooFewSequences(t *testing.T) {
	lb, rb, m := llamaSetup(t, "prefix", 2)
	p, err := m.Vocab().Tokenize("The model", true, false)
	require.NoError(t, err)
	_, err = beam.Search(context.Background(), lb, [][]int32{p}, beam.Options{Config: llamaBeamConfig(4, 4, []int32{})})
	require.ErrorIs(t, err, beam.ErrTooFewSlots)
	assert.Empty(t, llamaBeamProblems(t, lb, rb, [][]int32{p}, beam.Options{Config: llamaBeamConfig(2, 4, []int32{})}))
}
