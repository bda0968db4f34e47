//go:build !llamacpp_external

package llamabackend_test

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mropePrompt is a mixed prompt of the tiny qwen2vl model: text, a 40×24
// image through the self-made qwen2vl_merger projector (patches of 4,
// merged 2×2: a grid of 5 columns and 3 rows, 15 embeddings taking 5
// positions), more text.
type mropePrompt struct {
	m            *llamacpp.Model
	ref          *reference.Model
	vis          *reference.VisionProjector
	rgb          []byte
	pr           *llamacpp.Prompt
	toks         []int32
	embd         [][]float32
	pos          []backend.Pos
	n0, nx, ny   int // text tokens before the image; the image's grid
	nImg, nAfter int // embeddings; text tokens after the image
}

const mropeW, mropeH = 40, 24

func newMRoPEPrompt(t *testing.T) *mropePrompt {
	t.Helper()
	m := llamaModel(t, "tiny-qwen2vl")
	path, _ := llamaModels.Load("tiny-qwen2vl")
	ref, err := reference.Load(path.(string))
	require.NoError(t, err)
	require.Equal(t, [4]int{8, 12, 12, 0}, ref.RopeSections)
	mmproj := filepath.Join(t.TempDir(), "tiny-qwen2vl.mmproj.gguf")
	spec := testmodel.TinyQwen2VLProjector()
	require.NoError(t, spec.Write(mmproj))
	vis, err := reference.LoadVisionProjector(mmproj)
	require.NoError(t, err)
	p, err := llamacpp.LoadProjector(mmproj, m, llamacpp.ProjectorParams{Threads: 1})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	require.True(t, p.Info().MRoPE)

	rgb := make([]byte, 3*mropeW*mropeH)
	for y := range mropeH {
		for x := range mropeW {
			i := 3 * (y*mropeW + x)
			rgb[i], rgb[i+1], rgb[i+2] = byte(7*x+3*y), byte(255-5*y), byte(11*(x^y))
			if x >= 10 && x < 22 && y >= 4 && y < 12 {
				rgb[i], rgb[i+1], rgb[i+2] = 250, 240, 230
			}
		}
	}
	img, err := llamacpp.ImageRGB(mropeW, mropeH, rgb)
	require.NoError(t, err)
	pr, err := p.Tokenize("look at "+p.Info().Marker+" and say what it shows", []llamacpp.Media{img}, llamacpp.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	t.Cleanup(pr.Close)
	require.Len(t, pr.Chunks, 3)
	c := pr.Chunks[1]
	// The grid follows from the image and the projector alone.
	nx, ny := mropeW/(2*spec.PatchSize), mropeH/(2*spec.PatchSize)
	require.Equal(t, [4]int{nx, ny, nx * ny, nx}, [4]int{c.GridX, c.GridY, c.NTokens, c.NPos}, "mtmd's grid, embeddings and positions of the image")

	toks, embd, err := pr.Inputs(llamacpp.InputsOptions{Placeholder: 1})
	require.NoError(t, err)
	pos, err := pr.Positions()
	require.NoError(t, err)
	require.Len(t, pos, len(toks))
	return &mropePrompt{m: m, ref: ref, vis: vis, rgb: rgb, pr: pr, toks: toks, embd: embd, pos: pos,
		n0: len(pr.Chunks[0].Tokens), nx: nx, ny: ny, nImg: nx * ny, nAfter: len(pr.Chunks[2].Tokens)}
}

// refPositions are the prompt's M-RoPE positions worked out from its
// layout as Qwen2-VL places an image (independently of Prompt.Positions
// and the backends): text at (p, p, p); the image at one temporal position
// t = n0 with row y and column x at (t, t+y, t+x); the text after it from
// t + max(nx, ny) on; then extra generated tokens.
func (mp *mropePrompt) refPositions(extra int) [][4]int {
	var pos [][4]int
	for i := range mp.n0 {
		pos = append(pos, [4]int{i, i, i, 0})
	}
	t := mp.n0
	for y := range mp.ny {
		for x := range mp.nx {
			pos = append(pos, [4]int{t, t + y, t + x, 0})
		}
	}
	for i := range mp.nAfter + extra {
		p := t + max(mp.nx, mp.ny) + i
		pos = append(pos, [4]int{p, p, p, 0})
	}
	return pos
}

// The logits of a mixed text+image+text prompt of the tiny qwen2vl model
// through the llama.cpp backend (EvalAll of the text and image with their
// M-RoPE positions, then of the text after it and a token, which continue
// after the image's largest position)
// against the float64 reference model with M-RoPE at the positions
// refPositions works out, fed clip.cpp's embeddings (tiny-f32's
// tolerance), and against the float64 chain, the qwen2vl_merger
// reference's embeddings decoded by it. Measured on the CPU (2-vCPU AMD
// EPYC), 59 positions: 8.3e-6 and 2.8e-2 (clip.cpp's float16 attention,
// as in TestMixedImagePromptLogitsMatchReference); the reference at plain
// positions 0, 1, 2, ... is 10 away, so the positions are what is checked.
func TestMRoPEImagePromptLogitsMatchReference(t *testing.T) {
	mp := newMRoPEPrompt(t)
	refEmbd, err := mp.vis.EmbedImage(mp.rgb, mropeW, mropeH)
	require.NoError(t, err)
	require.Len(t, refEmbd, mp.nImg)
	const next = int32(7) // a token after the prompt
	want := make([]reference.Input, 0, len(mp.toks)+1)
	for i, tok := range mp.toks {
		in := reference.Input{Token: tok}
		if mp.embd[i] != nil {
			in.Embd = refEmbd[i-mp.n0]
		}
		want = append(want, in)
	}
	want = append(want, reference.Input{Token: next})
	wantLogits, _, err := mp.ref.NewSequence().EvalInputsAt(want, mp.refPositions(1))
	require.NoError(t, err)

	_, lb := llamaGenerator(t, mp.m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 16})
	require.True(t, lb.MRoPE())
	room := lb.Room(0)
	ctx := context.Background()
	// Batches of 16: the image's 15 embeddings split over two decodes. The
	// text after the image comes without positions: the backend continues
	// after the image's largest.
	got := make([][]float32, 0, len(mp.toks)+1)
	k := mp.n0 + mp.nImg
	for _, f := range []backend.Feed{
		{Slot: 0, Tokens: mp.toks[:k], Embd: mp.embd[:k], Pos: mp.pos[:k]},
		{Slot: 0, Tokens: mp.toks[k:]},
	} {
		require.NoError(t, lb.EvalAll(ctx, []backend.Feed{f}))
		for j := range f.Tokens {
			got = append(got, append([]float32(nil), lb.LogitsAt(0, j)...))
		}
	}
	require.NoError(t, lb.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: []int32{next}}}))
	got = append(got, append([]float32(nil), lb.Logits(0)...))
	assert.Equal(t, len(mp.toks)+1, lb.Len(0))
	assert.Equal(t, room-len(mp.toks)-1, lb.Room(0), "room counts cells, one per embedding, not positions")

	// The decoder alone: the reference fed clip.cpp's embeddings.
	same := slices.Clone(want)
	for i, e := range mp.embd {
		if e != nil {
			same[i].Embd = make([]float64, len(e))
			for k, v := range e {
				same[i].Embd[k] = float64(v)
			}
		}
	}
	sameLogits, _, err := mp.ref.NewSequence().EvalInputsAt(same, mp.refPositions(1))
	require.NoError(t, err)
	dDec := maxAbsDiff(t, got, sameLogits)
	t.Logf("%d positions (%d image embeddings on a %d×%d grid): largest |llama.cpp - reference decoder| logit %.3g, fed clip.cpp's embeddings",
		len(got), mp.nImg, mp.nx, mp.ny, dDec)
	require.LessOrEqual(t, dDec, llamatest.Tolerance(t, llamatest.TinyF32))

	// The chain: clip.cpp's float16 attention carried through the decoder.
	d := maxAbsDiff(t, got, wantLogits)
	t.Logf("largest |llama.cpp - float64 chain| logit %.3g", d)
	require.LessOrEqual(t, d, 6e-2)

	// The check sees positions: the reference at plain positions is far.
	plain, _, err := mp.ref.NewSequence().EvalInputs(want)
	require.NoError(t, err)
	dPlain := maxAbsDiff(t, got[mp.n0:], plain[mp.n0:])
	t.Logf("against the reference at positions 0, 1, 2, ...: %.3g", dPlain)
	require.Greater(t, dPlain, 10*d)
}

func maxAbsDiff(t *testing.T, got [][]float32, want [][]float64) float64 {
	t.Helper()
	require.Equal(t, len(want), len(got))
	d := 0.0
	for i := range got {
		require.Len(t, got[i], len(want[i]))
		for j, g := range got[i] {
			require.False(t, math.IsNaN(float64(g)))
			d = max(d, math.Abs(float64(g)-want[i][j]))
		}
	}
	return d
}

// Greedy generation on the mixed prompt through the one loop: llama.cpp's
// tokens equal the float64 reference model's (its argmax at each step),
// fed the same clip.cpp embeddings at the same positions, the generated
// tokens continuing after the image's shifted positions; a text-only
// request is batched beside it. The prompt without positions is refused
// by generation, and a cut inside the image by the backend.
func TestGenerateWithMRoPEImage(t *testing.T) {
	mp := newMRoPEPrompt(t)
	gen, lb := llamaGenerator(t, mp.m, llamacpp.ContextParams{ContextSize: 512, Sequences: 2, BatchSize: 16})
	rb := refbackend.New(mp.ref, mp.m.Vocab().Size(), 2)
	refGen := generation.NewGenerator(rb, llamabackend.Tokenizer{Vocab: mp.m.Vocab()})
	cfg := greedyConfig(8)
	reqs := []generation.Request{
		{Prompt: mp.toks, PromptEmbeddings: mp.embd, PromptPositions: mp.pos, Config: cfg},
		{Prompt: mp.toks, Config: cfg},
	}
	got, err := gen.Generate(context.Background(), reqs)
	require.NoError(t, err)
	want, err := refGen.Generate(context.Background(), reqs)
	require.NoError(t, err)
	require.NotEmpty(t, want[0].Tokens)
	t.Logf("greedy tokens with the image: %v", got[0].Tokens)
	require.Equal(t, want[0].Tokens, got[0].Tokens)
	require.Equal(t, want[1].Tokens, got[1].Tokens)
	require.NotEqual(t, got[1].Tokens, got[0].Tokens, "the image changes the reply")

	// The reference's argmax at the first step, from the float64 model
	// directly at refPositions' positions.
	in := make([]reference.Input, len(mp.toks))
	for i, tok := range mp.toks {
		in[i].Token = tok
		if e := mp.embd[i]; e != nil {
			in[i].Embd = make([]float64, len(e))
			for k, v := range e {
				in[i].Embd[k] = float64(v)
			}
		}
	}
	logits, _, err := mp.ref.NewSequence().EvalInputsAt(in, mp.refPositions(0))
	require.NoError(t, err)
	last := logits[len(logits)-1]
	best := 0
	for i, v := range last {
		if v > last[best] {
			best = i
		}
	}
	assert.Equal(t, int32(best), got[0].Tokens[0])

	_, err = gen.Generate(context.Background(), []generation.Request{{Prompt: mp.toks, PromptEmbeddings: mp.embd, Config: cfg}})
	require.ErrorIs(t, err, backend.ErrBadPosition)
	require.ErrorContains(t, err, "need PromptPositions")

	// A history is cut before or after the image, not inside it.
	ctx := context.Background()
	require.NoError(t, lb.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: mp.toks, Embd: mp.embd, Pos: mp.pos}}))
	err = lb.Truncate(0, mp.n0+3)
	require.ErrorIs(t, err, backend.ErrBadPosition)
	require.NoError(t, lb.Truncate(0, mp.n0+mp.nImg+1))
	require.NoError(t, lb.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: mp.toks[mp.n0+mp.nImg+1:]}}))
	again := append([]float32(nil), lb.Logits(0)...)
	require.NoError(t, lb.Clear(0))
	require.NoError(t, lb.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: mp.toks, Embd: mp.embd, Pos: mp.pos}}))
	assert.InDeltaSlice(t, lb.Logits(0), again, 1e-3, "the text after a cut continues at its shifted positions")
}

// The backend refuses, before any decode, positions it cannot honour: for
// a model without M-RoPE, in a batch-invariant context, out of order; and
// an M-RoPE model's embeddings without positions.
func TestPositionsRefusedByBackend(t *testing.T) {
	ctx := context.Background()
	qwen := llamaModel(t, "tiny-qwen2vl")
	e := make([]float32, qwen.InputEmbeddingSize())
	text := []backend.Pos{backend.TextPos(0), backend.TextPos(1)}
	for name, tc := range map[string]struct {
		m    *llamacpp.Model
		p    llamacpp.ContextParams
		feed backend.Feed
		want string
	}{
		"no mrope":  {llamaModel(t, "tiny"), llamacpp.ContextParams{}, backend.Feed{Tokens: []int32{5, 6}, Pos: text}, "one position per input"},
		"invariant": {qwen, llamacpp.ContextParams{BatchInvariant: true}, backend.Feed{Tokens: []int32{5, 6}, Pos: text}, "batch-invariant"},
		"order":     {qwen, llamacpp.ContextParams{}, backend.Feed{Tokens: []int32{5, 6}, Pos: []backend.Pos{backend.TextPos(1), backend.TextPos(0)}}, "before the history's next position 2"},
		"planes":    {qwen, llamacpp.ContextParams{}, backend.Feed{Tokens: []int32{5, 6}, Pos: []backend.Pos{backend.TextPos(0), {T: 1, H: 2, W: 1}}}, "a token takes one position in every plane"},
		"count":     {qwen, llamacpp.ContextParams{}, backend.Feed{Tokens: []int32{5, 6}, Pos: text[:1]}, "1 positions for 2 tokens"},
		"no pos":    {qwen, llamacpp.ContextParams{}, backend.Feed{Tokens: []int32{5, 6}, Embd: [][]float32{nil, e}}, "the embedding at 1 has no position"},
	} {
		tc.p.ContextSize, tc.p.BatchSize = 64, 16
		_, lb := llamaGenerator(t, tc.m, tc.p)
		err := lb.Eval(ctx, []backend.Feed{tc.feed})
		assert.ErrorIs(t, err, backend.ErrBadPosition, name)
		assert.ErrorContains(t, err, tc.want, name)
		assert.Zero(t, lb.Len(0), name)
	}
}
