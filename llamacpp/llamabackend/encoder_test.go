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
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/stretchr/testify/require"
)

// t5Setup loads the tiny T5 in llama.cpp (unified KV cache of slots
// sequences, f32 cells, no flash attention) and in the float64 reference.
func t5Setup(t *testing.T, slots int) (*llamabackend.EncoderDecoder, *refbackend.T5, *llamacpp.Model) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t5.gguf")
	require.NoError(t, testmodel.TinyT5().Write(path))
	m, err := llamacpp.LoadModel(path, llamatest.ModelParams(t, llamacpp.ModelParams{}))
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: 1024, BatchSize: 256, Sequences: slots, UnifiedKV: true, Threads: 1,
		TypeK: llamacpp.KVF32, TypeV: llamacpp.KVF32, FlashAttention: llamacpp.FlashAttentionOff})
	require.NoError(t, err)
	t.Cleanup(func() { ctx.Close() })
	lb, err := llamabackend.NewEncoderDecoder(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	ref, err := reference.LoadT5(path)
	require.NoError(t, err)
	return lb, refbackend.NewT5(ref, slots), m
}

// t5Inputs are encoder inputs of several lengths, beyond the encoder's
// exact relative-position buckets (8 each way).
func t5Inputs(m *llamacpp.Model) [][]int32 {
	var ins [][]int32
	for i, n := range []int{3, 12, 25, 7, 18} {
		ins = append(ins, append(llamaTokens(i+1, n, m.Vocab().Size()), testmodel.EOS))
	}
	return ins
}

// llamaTokens draws n ordinary tokens deterministically.
func llamaTokens(seed, n, vocab int) []int32 {
	out := make([]int32, n)
	x := uint64(seed)*0x9E3779B97F4A7C15 + 1
	for i := range out {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		out[i] = int32(int(testmodel.FirstByte) + 256 + int(x%uint64(vocab-int(testmodel.FirstByte)-256)))
	}
	return out
}

// compareRuns checks that two generations gave the same tokens, with
// log-probabilities within tol, and returns the largest difference.
func compareRuns(t *testing.T, got, want []generation.Result, tol float64) float64 {
	t.Helper()
	d := 0.0
	for i := range want {
		require.Equal(t, want[i].Tokens, got[i].Tokens, "request %d", i)
		require.Equal(t, want[i].Finish, got[i].Finish, "request %d", i)
		for j := range want[i].Logprobs {
			d = math.Max(d, math.Abs(float64(got[i].Logprobs[j]-want[i].Logprobs[j])))
		}
	}
	require.LessOrEqual(t, d, tol)
	return d
}

// Greedy and seeded sampling, five requests through three slots (so that
// requests join while others generate and the encoder runs again), give on
// llama.cpp the tokens they give on the float64 reference, with
// log-probabilities within the T5 bound; the encoder processors see the
// encoder input on both.
func TestT5GenerationMatchesReference(t *testing.T) {
	lb, rb, m := t5Setup(t, 3)
	ins := t5Inputs(m)
	greedy := genconfig.Default()
	n := 12
	greedy.MaxNewTokens = &n
	greedy.EOSTokenID = []int32{testmodel.EOS}
	sample := greedy.Clone()
	sample.DoSample, sample.TopK = true, 0
	enc := greedy.Clone()
	enc.EncoderRepetitionPenalty = 1.5
	enc.EncoderNoRepeatNGramSize = 2
	for _, tc := range []struct {
		name string
		cfg  *genconfig.Config
	}{{"greedy", greedy}, {"sample", sample}, {"encoder-processors", enc}} {
		t.Run(tc.name, func(t *testing.T) {
			reqs := make([]generation.Request, len(ins))
			for i, in := range ins {
				reqs[i] = generation.Request{Prompt: in, Config: tc.cfg, Seed: uint64(10 + i), Logprobs: true}
			}
			want, err := generation.NewGenerator(rb, nil).Generate(context.Background(), reqs)
			require.NoError(t, err)
			before := lb.EncodeCalls()
			got, err := generation.NewGenerator(lb, nil).Generate(context.Background(), reqs)
			require.NoError(t, err)
			d := compareRuns(t, got, want, llamatest.Tolerance(t, llamatest.T5))
			t.Logf("%s: %d requests, largest |logprob llama.cpp - reference| %.3g, %d llama_encode calls",
				tc.name, len(reqs), d, lb.EncodeCalls()-before)
			// One encode per admission round at most.
			require.LessOrEqual(t, lb.EncodeCalls()-before, len(reqs))
		})
	}
}

// The Engine, requests joining a running batch, gives the tokens of the
// reference too.
func TestT5EngineMatchesReference(t *testing.T) {
	lb, rb, m := t5Setup(t, 2)
	cfg := genconfig.Default()
	n := 8
	cfg.MaxNewTokens = &n
	cfg.DoSample = true
	ins := t5Inputs(m)
	reqs := make([]generation.Request, len(ins))
	for i, in := range ins {
		reqs[i] = generation.Request{Prompt: in, Config: cfg, Seed: uint64(i), Logprobs: true}
	}
	want, err := generation.NewGenerator(rb, nil).Generate(context.Background(), reqs)
	require.NoError(t, err)
	e, err := generation.NewEngine(lb, nil, generation.EngineOptions{})
	require.NoError(t, err)
	defer e.Close()
	var tasks []*generation.Task
	for _, r := range reqs {
		task, err := e.Submit(context.Background(), r)
		require.NoError(t, err)
		tasks = append(tasks, task)
	}
	got := make([]generation.Result, len(tasks))
	for i, task := range tasks {
		got[i] = task.Result()
		require.NoError(t, got[i].Err)
	}
	compareRuns(t, got, want, llamatest.Tolerance(t, llamatest.T5))
}

// Beam search (Transformers rule, 3 beams, two prompts at once in six
// sequences) finds on llama.cpp the hypotheses it finds on the reference:
// the same tokens, log-probabilities within the beam bound. The beams of a
// prompt share the encoder output of one llama_encode (with every beam's
// sequence listed) and follow each other by llama_memory_seq_cp, which in
// the pinned llama.cpp copies the decoder's self-attention cells only: the
// cross-attention reads the context's one encoder output through each
// sequence id the encode listed, so no copy ever encodes again.
func TestT5BeamMatchesReference(t *testing.T) {
	lb, rb, m := t5Setup(t, 6)
	cfg := llamaBeamConfig(3, 10, []int32{testmodel.EOS})
	ins := t5Inputs(m)
	want, err := beam.Search(context.Background(), rb, ins, beam.Options{Config: cfg})
	require.NoError(t, err)
	got, err := beam.Search(context.Background(), lb, ins, beam.Options{Config: cfg})
	require.NoError(t, err)
	require.Positive(t, got.Stats.Copies)
	require.Equal(t, len(ins), got.Stats.Encodes)
	// Two groups: each admission encodes the live inputs once; copies never do.
	require.Equal(t, len(ins), lb.EncodeCalls())
	tol := llamatest.Tolerance(t, llamatest.BeamLogProb)
	d := 0.0
	for p := range ins {
		require.Len(t, got.Hypotheses[p], len(want.Hypotheses[p]))
		for h, w := range want.Hypotheses[p] {
			g := got.Hypotheses[p][h]
			require.Equal(t, w.Tokens, g.Tokens, fmt.Sprintf("prompt %d hypothesis %d", p, h))
			d = math.Max(d, math.Abs(g.LogProb-w.LogProb))
		}
	}
	t.Logf("beam: largest |log-probability llama.cpp - reference| %.3g over %d prompts x 3 hypotheses", d, len(ins))
	require.LessOrEqual(t, d, tol)
}

func TestT5BackendErrors(t *testing.T) {
	lb, _, m := t5Setup(t, 2)
	err := lb.Eval(context.Background(), []backend.Feed{{Slot: 0, Tokens: []int32{0}}})
	require.ErrorIs(t, err, backend.ErrNoEncoderOutput)
	require.ErrorIs(t, lb.Encode(context.Background(), []backend.EncoderFeed{{Slots: []int{0}, Tokens: []int32{-1}}}), backend.ErrTokenOutOfRange)
	require.ErrorContains(t, lb.Encode(context.Background(), []backend.EncoderFeed{{Slots: []int{0, 0}, Tokens: []int32{5}}}), "slot 0 twice")
	// Encoder inputs beyond one micro-batch: a clear error, and the slot
	// stays without encoder output.
	long := llamaTokens(1, 300, m.Vocab().Size())
	err = lb.Encode(context.Background(), []backend.EncoderFeed{{Slots: []int{1}, Tokens: long}})
	require.ErrorContains(t, err, "exceeds the micro-batch size 256")
	require.ErrorIs(t, lb.Eval(context.Background(), []backend.Feed{{Slot: 1, Tokens: []int32{0}}}), backend.ErrNoEncoderOutput)
	// After Encode the slot evaluates; Clear drops its encoder output.
	require.NoError(t, lb.Encode(context.Background(), []backend.EncoderFeed{{Slots: []int{0}, Tokens: long[:10]}}))
	require.NoError(t, lb.Eval(context.Background(), []backend.Feed{{Slot: 0, Tokens: []int32{0}}}))
	require.ErrorContains(t, lb.Encode(context.Background(), []backend.EncoderFeed{{Slots: []int{0}, Tokens: long[:3]}}), "holds 1 tokens")
	require.NoError(t, lb.Clear(0))
	require.ErrorIs(t, lb.Eval(context.Background(), []backend.Feed{{Slot: 0, Tokens: []int32{0}}}), backend.ErrNoEncoderOutput)

	// The constructors refuse the other kind of model.
	_, err = llamabackend.New(lb.Context())
	require.ErrorContains(t, err, "use NewEncoderDecoder")
	tiny := llamaModel(t, "tiny")
	ctx, err := tiny.NewContext(llamacpp.ContextParams{ContextSize: 256, Threads: 1})
	require.NoError(t, err)
	defer ctx.Close()
	_, err = llamabackend.NewEncoderDecoder(ctx)
	require.ErrorContains(t, err, "use New")

	// A request without encoder input.
	_, err = generation.NewGenerator(lb, nil).Generate(context.Background(), []generation.Request{{}})
	require.ErrorIs(t, err, generation.ErrNoEncoderInput)
}

// A slot keeps its encoder output when another request's input is encoded
// later (the backend encodes both again) and a Copy onto a slot encoded
// with another input hands over the source's: after each operation, done
// alike on llama.cpp and on the reference, the logits agree.
func TestT5EncoderFollowsSlots(t *testing.T) {
	lb, rb, m := t5Setup(t, 3)
	ins := t5Inputs(m)
	tol := llamatest.Tolerance(t, llamatest.T5)
	start := lb.DecoderStart()
	worst := 0.0
	both := func(op func(b backend.Backend) error) {
		require.NoError(t, op(lb))
		require.NoError(t, op(rb))
	}
	eval := func(feeds ...backend.Feed) {
		both(func(b backend.Backend) error { return b.Eval(context.Background(), feeds) })
		for i := range feeds {
			for j, v := range rb.Logits(i) {
				worst = math.Max(worst, math.Abs(float64(lb.Logits(i)[j]-v)))
			}
		}
	}
	encode := func(feeds ...backend.EncoderFeed) {
		both(func(b backend.Backend) error { return b.(backend.Encoder).Encode(context.Background(), feeds) })
	}
	encode(backend.EncoderFeed{Slots: []int{0}, Tokens: ins[1]})
	eval(backend.Feed{Slot: 0, Tokens: []int32{start, 400, 401}})
	calls := lb.EncodeCalls()
	encode(backend.EncoderFeed{Slots: []int{1}, Tokens: ins[2]}, backend.EncoderFeed{Slots: []int{2}, Tokens: ins[3]})
	eval(backend.Feed{Slot: 0, Tokens: []int32{402}}, backend.Feed{Slot: 1, Tokens: []int32{start, 500}}, backend.Feed{Slot: 2, Tokens: []int32{start}})
	require.Equal(t, calls+1, lb.EncodeCalls(), "slot 0's input is encoded again with the new ones, in one call")
	// Slot 2 takes slot 0's history and encoder input.
	both(func(b backend.Backend) error { return b.Copy(2, 0) })
	eval(backend.Feed{Slot: 2, Tokens: []int32{403}}, backend.Feed{Slot: 0, Tokens: []int32{404}})
	require.Equal(t, calls+2, lb.EncodeCalls(), "the copy needs one encode")
	eval(backend.Feed{Slot: 2, Tokens: []int32{405}}, backend.Feed{Slot: 1, Tokens: []int32{501}})
	require.Equal(t, calls+2, lb.EncodeCalls(), "and no more")
	t.Logf("largest |llama.cpp - reference| over the operations: %.3g", worst)
	require.LessOrEqual(t, worst, tol)
}

// A decoder step of an encoder-decoder allocates nothing once the encoder
// output serves its slots: the encoder check is a loop over the feeds.
func TestT5StepAllocatesNothing(t *testing.T) {
	lb, _, m := t5Setup(t, 2)
	ins := t5Inputs(m)
	require.NoError(t, lb.Encode(context.Background(), []backend.EncoderFeed{{Slots: []int{0}, Tokens: ins[1]}, {Slots: []int{1}, Tokens: ins[2]}}))
	start := lb.DecoderStart()
	feeds := []backend.Feed{{Slot: 0, Tokens: []int32{start}}, {Slot: 1, Tokens: []int32{start}}}
	ctx := context.Background()
	require.NoError(t, lb.Eval(ctx, feeds))
	tok := []int32{400}
	feeds[0].Tokens, feeds[1].Tokens = tok, tok
	calls := lb.EncodeCalls()
	allocs := testing.AllocsPerRun(20, func() {
		if err := lb.Eval(ctx, feeds); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
	require.Equal(t, calls, lb.EncodeCalls())
}
