//go:build !llamacpp_external

package llamabackend_test

import (
	"context"
	"math"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refLogProb is the float64 reference model's log-probability of tokens
// after the mixed prompt, fed clip.cpp's embeddings, every input at the
// position refPositions works out by hand: the sum of log_softmax of the
// logits at each step, evaluated once over the prompt and tokens.
func (mp *mropePrompt) refLogProb(t *testing.T, tokens []int32) float64 {
	t.Helper()
	in := make([]reference.Input, 0, len(mp.toks)+len(tokens))
	for i, tok := range mp.toks {
		x := reference.Input{Token: tok}
		if e := mp.embd[i]; e != nil {
			x.Embd = make([]float64, len(e))
			for k, v := range e {
				x.Embd[k] = float64(v)
			}
		}
		in = append(in, x)
	}
	for _, tok := range tokens[:len(tokens)-1] {
		in = append(in, reference.Input{Token: tok})
	}
	logits, _, err := mp.ref.NewSequence().EvalInputsAt(in, mp.refPositions(len(tokens)-1))
	require.NoError(t, err)
	sum := 0.0
	for i, tok := range tokens {
		row := logits[len(mp.toks)-1+i]
		m := math.Inf(-1)
		for _, v := range row {
			m = max(m, v)
		}
		z := 0.0
		for _, v := range row {
			z += math.Exp(v - m)
		}
		sum += row[tok] - m - math.Log(z)
	}
	return sum
}

// Beam search on the mixed text + M-RoPE image + text prompt of the tiny
// qwen2vl model, beside the same prompt's text alone (its placeholders
// without the image) in the same search: on llama.cpp, 3 beams give the
// float64 reference backend's hypotheses, and each hypothesis's
// log-probability is the float64 reference model's at the positions
// worked out by hand (refPositions), so the tokens generated after the
// image, on beams reordered by Copy, continue after its largest position.
// (Without Copy's positions in llamabackend, a copied beam's tokens go at
// its length, and this fails: checked by hand.) With one beam the search
// gives greedy generation's tokens. An M-RoPE prompt's embeddings without
// positions, and positions that do not fit, are refused.
func TestMRoPEBeamSearch(t *testing.T) {
	mp := newMRoPEPrompt(t)
	const beams, slots = 3, 6
	_, lb := llamaGenerator(t, mp.m, llamacpp.ContextParams{ContextSize: 1024, Sequences: slots, UnifiedKV: true, BatchSize: 16})
	rb := refbackend.New(mp.ref, mp.m.Vocab().Size(), slots)
	eog := mp.m.Vocab().EOGTokens()
	ctx := context.Background()
	prompts := [][]int32{mp.toks, mp.toks}
	opts := beam.Options{Config: llamaBeamConfig(beams, 6, eog),
		PromptEmbeddings: [][][]float32{mp.embd, nil}, PromptPositions: [][]backend.Pos{mp.pos, nil}}
	got, err := beam.Search(ctx, lb, prompts, opts)
	require.NoError(t, err)
	want, err := beam.Search(ctx, rb, prompts, opts)
	require.NoError(t, err)
	tol := llamatest.Tolerance(t, llamatest.BeamLogProb)
	for i := range prompts {
		require.Len(t, got.Hypotheses[i], beams)
		require.Len(t, want.Hypotheses[i], beams)
		for j, h := range got.Hypotheses[i] {
			w := want.Hypotheses[i][j]
			assert.Equal(t, w.Tokens, h.Tokens, "prompt %d, hypothesis %d", i, j)
			assert.InDelta(t, w.LogProb, h.LogProb, tol, "prompt %d, hypothesis %d", i, j)
		}
	}
	assert.Positive(t, got.Stats.Copies, "beams were reordered")
	worst := 0.0
	for j, h := range got.Hypotheses[0] {
		d := math.Abs(h.LogProb - mp.refLogProb(t, h.Tokens))
		worst = max(worst, d)
		assert.LessOrEqual(t, d, tol, "hypothesis %d %v", j, h.Tokens)
	}
	t.Logf("with the image: %v; largest |llama.cpp - float64 reference at M-RoPE positions| log-probability %.3g", got.Hypotheses[0][0].Tokens, worst)
	assert.NotEqual(t, got.Hypotheses[1][0].Tokens, got.Hypotheses[0][0].Tokens, "the image changes the search")
	for s := range lb.Slots() {
		assert.Zero(t, lb.Len(s), "slot %d", s)
	}

	greedy, err := beam.Search(ctx, lb, prompts[:1], beam.Options{Config: llamaBeamConfig(1, 8, eog),
		PromptEmbeddings: [][][]float32{mp.embd}, PromptPositions: [][]backend.Pos{mp.pos}})
	require.NoError(t, err)
	gen := generation.NewGenerator(lb, llamabackend.Tokenizer{Vocab: mp.m.Vocab()})
	res, err := gen.Generate(ctx, []generation.Request{{Prompt: mp.toks, PromptEmbeddings: mp.embd, PromptPositions: mp.pos, Config: greedyConfig(8)}})
	require.NoError(t, err)
	assert.Equal(t, res[0].Tokens, greedy.Hypotheses[0][0].Tokens)

	for name, tc := range map[string]struct {
		opts beam.Options
		want string
	}{
		"no positions": {beam.Options{PromptEmbeddings: [][][]float32{mp.embd}}, "need PromptPositions"},
		"count":        {beam.Options{PromptEmbeddings: [][][]float32{mp.embd}, PromptPositions: [][]backend.Pos{mp.pos[:3]}}, "3 PromptPositions entries for"},
		"prompts":      {beam.Options{PromptPositions: [][]backend.Pos{mp.pos, mp.pos}}, "PromptPositions for 1 prompts, 2 given"},
		"text planes":  {beam.Options{PromptPositions: [][]backend.Pos{mp.pos}}, "a token takes one position in every plane"},
	} {
		tc.opts.Config = llamaBeamConfig(2, 4, eog)
		_, err := beam.Search(ctx, lb, prompts[:1], tc.opts)
		assert.ErrorIs(t, err, beam.ErrInvalid, name)
		assert.ErrorIs(t, err, backend.ErrBadPosition, name)
		assert.ErrorContains(t, err, tc.want, name)
	}
	_, tiny := llamaGenerator(t, llamaModel(t, "tiny"), llamacpp.ContextParams{ContextSize: 64, Sequences: 2})
	_, err = beam.Search(ctx, tiny, [][]int32{{5, 6}}, beam.Options{Config: llamaBeamConfig(2, 4, nil),
		PromptPositions: [][]backend.Pos{{backend.TextPos(0), backend.TextPos(1)}}})
	assert.ErrorIs(t, err, backend.ErrBadPosition)
	assert.ErrorContains(t, err, "no M-RoPE")
}

// Prompt lookup on the M-RoPE prompt, alone and over the prefix cache (a
// second round reusing the image), gives plain greedy decoding's tokens:
// the candidates are text fed after the prompt's last token at the
// positions that continue the image's, some accepted; rejected ones are
// cut from the slot, whose next position goes back with them. (Candidates
// two positions further on fail here: checked by hand.)
func TestMRoPEPromptLookup(t *testing.T) {
	mp := newMRoPEPrompt(t)
	plain, _ := llamaGenerator(t, mp.m, llamacpp.ContextParams{ContextSize: 512, Sequences: 1, BatchSize: 16})
	// A repetition "penalty" below 1 favours the tokens seen, so that the
	// random model repeats itself and some candidates are accepted.
	cfg := greedyConfig(24)
	cfg.RepetitionPenalty = 0.2
	req := generation.Request{Prompt: mp.toks, PromptEmbeddings: mp.embd, PromptPositions: mp.pos, Config: cfg}
	want, err := plain.Generate(context.Background(), []generation.Request{req})
	require.NoError(t, err)

	cfg = cfg.Clone()
	k := 3
	cfg.PromptLookupNumTokens = &k
	req.Config = cfg
	alone, _ := llamaGenerator(t, mp.m, llamacpp.ContextParams{ContextSize: 512, Sequences: 1, BatchSize: 16})
	got, err := alone.Generate(context.Background(), []generation.Request{req})
	require.NoError(t, err)
	assert.Equal(t, want[0].Tokens, got[0].Tokens)
	t.Logf("tokens %v; speculation %+v", got[0].Tokens, got[0].Speculation)
	assert.Positive(t, got[0].Speculation.Accepted, "candidates were accepted")
	assert.Less(t, got[0].Speculation.Accepted, got[0].Speculation.Drafted, "and some rejected")

	cached, pc, _ := cachedGenerator(t, mp.m, llamacpp.ContextParams{ContextSize: 1024, Sequences: 2, BatchSize: 16}, 1)
	for round := range 2 {
		got, err := cached.Generate(context.Background(), []generation.Request{req})
		require.NoError(t, err)
		assert.Equal(t, want[0].Tokens, got[0].Tokens, "round %d over the prefix cache", round)
	}
	assert.Positive(t, pc.Stats().TokensSaved, "the second round reused the image")
}
