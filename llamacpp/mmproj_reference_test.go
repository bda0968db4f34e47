//go:build !llamacpp_external

package llamacpp_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/require"
)

// referenceImage is a deterministic RGB image: a gradient with a bright
// square, so that patches differ.
func referenceImage(w, h int) []byte {
	rgb := make([]byte, 3*w*h)
	for y := range h {
		for x := range w {
			i := 3 * (y*w + x)
			rgb[i], rgb[i+1], rgb[i+2] = byte(7*x+3*y), byte(255-5*y), byte(11*(x^y))
			if x >= w/4 && x < w/2 && y >= h/4 && y < h/2 {
				rgb[i], rgb[i+1], rgb[i+2] = 250, 240, 230
			}
		}
	}
	return rgb
}

// encodeImage loads the projector beside tiny-f32 and encodes one image
// prompt's image chunk.
func encodeImage(t *testing.T, proj string, w, h int, rgb []byte) (emb []float32, width int) {
	t.Helper()
	m := loadModel(t, "tiny-f32")
	p, err := llamacpp.LoadProjector(proj, m, llamacpp.ProjectorParams{Threads: 2})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	img, err := llamacpp.ImageRGB(w, h, rgb)
	require.NoError(t, err)
	pr, err := p.Tokenize("look: "+p.Info().Marker+" done", []llamacpp.Media{img}, llamacpp.TokenizeOptions{})
	require.NoError(t, err)
	t.Cleanup(pr.Close)
	for i, c := range pr.Chunks {
		if c.Kind == llamacpp.ChunkImage {
			emb, err = pr.Encode(i)
			require.NoError(t, err)
			return emb, p.Info().Width
		}
	}
	t.Fatal("no image chunk")
	return nil, 0
}

// relDiff is the largest |got - want| relative to want's largest
// magnitude; it logs the mean |got - want| relative to the mean |want| too.
func relDiff(t *testing.T, got []float32, want [][]float64, width int) float64 {
	t.Helper()
	var sumD, sumW float64
	defer func() { t.Logf("mean |clip.cpp - reference| / mean |reference| = %.3g", sumD/sumW) }()
	require.Equal(t, len(want)*width, len(got), "embedding values")
	d, scale := 0.0, 0.0
	for i, row := range want {
		require.Equal(t, width, len(row))
		for j, v := range row {
			g := float64(got[i*width+j])
			require.False(t, math.IsNaN(g), "embedding %d,%d is NaN", i, j)
			d = max(d, math.Abs(g-v))
			sumD, sumW = sumD+math.Abs(g-v), sumW+math.Abs(v)
			scale = max(scale, math.Abs(v))
		}
	}
	return d / scale
}

// clip.cpp's embeddings of the self-made projectors agree with the float64
// references. clip.cpp chooses flash attention itself (the binding does not
// set it), which on the CPU rounds queries, keys and values to float16:
// that, not the reference, sets the tolerance, about twice the largest
// relative difference measured on the CPU (AMD EPYC): gemma3 6.2e-4
// (4.9e-4 resized from 50x37), qwen2vl 9.5e-4 (1.6e-3 resized from 50x37
// to 48x40, 30 tokens).
func TestProjectorEmbeddingsMatchReference(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec testmodel.VisionProjector
		w, h int
		tol  float64
	}{
		{"gemma3", testmodel.TinyGemma3Projector(), 32, 32, 1.5e-3},
		{"qwen2vl", testmodel.TinyQwen2VLProjector(), 32, 16, 2e-3},
		// sizes clip.cpp resizes: into 32x32 on black, and to 48x40
		{"gemma3-resized", testmodel.TinyGemma3Projector(), 50, 37, 1.5e-3},
		{"qwen2vl-resized", testmodel.TinyQwen2VLProjector(), 50, 37, 3e-3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.name+".mmproj.gguf")
			require.NoError(t, tc.spec.Write(path))
			ref, err := reference.LoadVisionProjector(path)
			require.NoError(t, err)
			rgb := referenceImage(tc.w, tc.h)
			want, err := ref.EmbedImage(rgb, tc.w, tc.h)
			require.NoError(t, err)
			got, width := encodeImage(t, path, tc.w, tc.h, rgb)
			require.Equal(t, ref.TextEmbd, width)
			d := relDiff(t, got, want, width)
			t.Logf("%s: %d embeddings x %d: largest |clip.cpp - reference| / largest |reference| = %.3g",
				tc.name, len(want), width, d)
			require.LessOrEqual(t, d, tc.tol)
		})
	}
}

// referenceSound is one second of a chirp and a tone at 16 kHz.
func referenceSound() []float32 {
	pcm := make([]float32, 16000)
	for i := range pcm {
		x := float64(i) / 16000
		pcm[i] = float32(0.4*math.Sin(2*math.Pi*(300+900*x)*x) + 0.1*math.Sin(2*math.Pi*2500*x))
	}
	return pcm
}

// The audio projector's embeddings of one second of sound agree with the
// float64 reference from the samples on: mtmd's log-mel (a float32 FFT),
// the Whisper encoder with ggml's float16 convolutions and flash
// attention, and qwen2a's pooling and projection. The error is ten times
// the images': flash attention on the CPU sums the values of its 1500
// positions in a float16 accumulator. Measured on the CPU (AMD EPYC):
// largest 6.7e-3 of the largest value, mean 4.8e-3 of the mean.
//
// Then the decoder's logits on the audio+text prompt (tiny-f32, the 750
// embeddings between text tokens), at every position: against the
// float64 decoder fed the same embeddings within the decoder's tolerance
// (measured 5.7e-5), and against the float64 chain from the samples
// within the encoder's float16 error carried through (measured 0.18, on
// logits of standard deviation about 3).
func TestAudioProjectorEmbeddingsMatchReference(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qwen2a.mmproj.gguf")
	require.NoError(t, testmodel.TinyQwen2AudioProjector().Write(path))
	ref, err := reference.LoadAudioProjector(path)
	require.NoError(t, err)
	pcm := referenceSound()
	chunks, err := reference.LogMel(pcm, ref.NMel)
	require.NoError(t, err)
	var want [][]float64
	for _, c := range chunks {
		e, err := ref.EmbedMel(c, len(c)/ref.NMel)
		require.NoError(t, err)
		want = append(want, e...)
	}

	m := loadModel(t, "tiny-f32")
	p, err := llamacpp.LoadProjector(path, m, llamacpp.ProjectorParams{Threads: 2})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	require.Equal(t, 16000, p.Info().SampleRate)
	a, err := llamacpp.AudioPCM(pcm, 16000)
	require.NoError(t, err)
	pr, err := p.Tokenize("hear "+p.Info().Marker+" and say what it was", []llamacpp.Media{a}, llamacpp.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	t.Cleanup(pr.Close)
	// mtmd makes one audio chunk of each 3000-frame mel chunk
	var got []float32
	nAudio := 0
	for i, c := range pr.Chunks {
		if c.Kind == llamacpp.ChunkAudio {
			e, err := pr.Encode(i)
			require.NoError(t, err)
			got = append(got, e...)
			nAudio++
		}
	}
	require.Equal(t, len(chunks), nAudio)
	d := relDiff(t, got, want, p.Info().Width)
	t.Logf("qwen2a: %d mel chunks, %d embeddings x %d: largest |clip.cpp - reference| / largest |reference| = %.3g",
		len(chunks), len(want), p.Info().Width, d)
	require.LessOrEqual(t, d, 1.5e-2)

	// The decoder on the audio+text prompt (causal, 1-D positions: qwen2a's
	// audio is not a non-causal run) against the float64 decoder fed the
	// same embeddings, and against the chain from the samples.
	require.Nil(t, pr.NonCausal())
	var same, chain []reference.Input
	k := 0
	for _, c := range pr.Chunks {
		if c.Kind == llamacpp.ChunkText {
			for _, tok := range c.Tokens {
				same, chain = append(same, reference.Input{Token: tok}), append(chain, reference.Input{Token: tok})
			}
			continue
		}
		width := p.Info().Width
		for range c.NTokens {
			e := make([]float64, width)
			for j, v := range got[k*width : (k+1)*width] {
				e[j] = float64(v)
			}
			same, chain = append(same, reference.Input{Token: 1, Embd: e}), append(chain, reference.Input{Token: 1, Embd: want[k]})
			k++
		}
	}
	require.Equal(t, len(want), k, "every audio embedding placed")
	require.Less(t, k+1, len(same), "text after the audio")
	dec := loadReference(t, "tiny-f32")
	wantSame, _, err := dec.NewSequence().EvalInputs(same)
	require.NoError(t, err)
	wantChain, _, err := dec.NewSequence().EvalInputs(chain)
	require.NoError(t, err)
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 1024, BatchSize: 1024})
	logits := decodeInputs(t, ctx, newBatch(t, 1024, 1), same)
	dSame, dChain := maxDiff(t, logits, wantSame), maxDiff(t, logits, wantChain)
	t.Logf("audio+text prompt, %d positions (%d audio embeddings), largest |llama.cpp - reference| logit: %.3g fed the same embeddings, "+
		"%.3g from the samples", len(same), k, dSame, dChain)
	require.LessOrEqual(t, dSame, llamatest.Tolerance(t, llamatest.TinyF32))
	require.LessOrEqual(t, dChain, 0.35)
}

// The tiny qwen2vl text model (M-RoPE, Q/K/V biases) agrees with the
// reference on text: llama.cpp gives text tokens the positions (p, p, p,
// 0), which the reference's EvalInputsAt is checked to reduce to.
func TestQwen2VLTextMatchesReference(t *testing.T) {
	m := loadModel(t, "tiny-qwen2vl")
	ref, err := reference.Load(modelPath(t, "tiny-qwen2vl"))
	require.NoError(t, err)
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, BatchSize: 128})
	b := newBatch(t, 128, 1)
	tokens := randomTokens(5, 80, m.Vocab().Size())
	in := make([]reference.Input, len(tokens))
	pos := make([][4]int, len(tokens))
	for i, tok := range tokens {
		in[i].Token, pos[i] = tok, [4]int{i, i, i, 0}
	}
	want, _, err := ref.NewSequence().EvalInputsAt(in, pos)
	require.NoError(t, err)
	got := append(decodeSeq(t, ctx, b, 0, 0, tokens[:50]), decodeSeq(t, ctx, b, 0, 50, tokens[50:])...)
	d := maxDiff(t, got, want)
	t.Logf("tiny-qwen2vl: largest |llama.cpp - reference| over %d positions: %.3g", len(tokens), d)
	require.LessOrEqual(t, d, llamatest.Tolerance(t, llamatest.TinyF32))
}

// A mixed text+image+text prompt end to end, decoded as llama.cpp's mtmd
// helper decodes it: the image's embeddings (Prompt.NonCausal's run) in one
// decode with causal attention off (Context.DecodeNonCausal), the text
// around it causally. Against the float64 decoder fed the same embeddings,
// with the image positions attending to each other both ways, every
// position agrees within the decoder's tolerance; the causal reference is
// far off (so the comparison can fail), and the same context decodes the
// prompt causally afterwards as the causal reference does (causal
// attention is back on). The whole chain (the projector's reference, then
// the decoder's) agrees within clip.cpp's float16 error. Measured on the
// CPU (AMD EPYC): see docs/measurements.md (projectors).
func TestMixedImagePromptLogitsMatchReference(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	dec := loadReference(t, "tiny-f32")
	path := filepath.Join(t.TempDir(), "gemma3.mmproj.gguf")
	require.NoError(t, testmodel.TinyGemma3Projector().Write(path))
	vis, err := reference.LoadVisionProjector(path)
	require.NoError(t, err)
	p, err := llamacpp.LoadProjector(path, m, llamacpp.ProjectorParams{Threads: 2})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	rgb := referenceImage(40, 30)
	img, err := llamacpp.ImageRGB(40, 30, rgb)
	require.NoError(t, err)
	pr, err := p.Tokenize("look at "+p.Info().Marker+" and say what it shows", []llamacpp.Media{img}, llamacpp.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	t.Cleanup(pr.Close)
	toks, embd, err := pr.Inputs(llamacpp.InputsOptions{Placeholder: 1})
	require.NoError(t, err)
	runs := pr.NonCausal()
	require.Len(t, runs, 1, "gemma3's image attends to itself both ways")
	refEmbd, err := vis.EmbedImage(rgb, 40, 30)
	require.NoError(t, err)

	got := make([]reference.Input, len(toks))
	want := make([]reference.Input, len(toks))
	k := 0
	for i, tok := range toks {
		got[i].Token, want[i].Token = tok, tok
		if embd[i] != nil {
			got[i].Embd = make([]float64, len(embd[i]))
			for j, v := range embd[i] {
				got[i].Embd[j] = float64(v)
			}
			want[i].Embd = refEmbd[k]
			k++
		}
	}
	require.Equal(t, len(refEmbd), k, "every image embedding placed")
	require.Equal(t, runs[0].Len(), k)
	require.Nil(t, embd[runs[0].Start-1])
	require.NotNil(t, embd[runs[0].Start])
	require.Less(t, runs[0].End+1, len(toks), "text after the image")
	// the reference: the text causally, the image's run non-causally or not
	eval := func(in []reference.Input, nonCausal bool) [][]float64 {
		seq := dec.NewSequence()
		before, _, err := seq.EvalInputs(in[:runs[0].Start])
		require.NoError(t, err)
		evalRun := seq.EvalInputs
		if nonCausal {
			evalRun = seq.EvalNonCausal
		}
		image, _, err := evalRun(in[runs[0].Start:runs[0].End])
		require.NoError(t, err)
		after, _, err := seq.EvalInputs(in[runs[0].End:])
		require.NoError(t, err)
		return append(append(before, image...), after...)
	}

	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 64})
	b := newBatch(t, 64, 1)
	nonCausal := decodeRuns(t, ctx, b, got, true)
	require.NoError(t, ctx.ClearCache())
	causal := decodeRuns(t, ctx, b, got, false)
	d := maxDiff(t, nonCausal, eval(got, true))
	dCausal := maxDiff(t, causal, eval(got, false))
	apart := maxDiff(t, nonCausal, eval(got, false))
	chain := maxDiff(t, nonCausal, eval(want, true))
	t.Logf("%d positions (%d of them image embeddings), largest |llama.cpp - reference| logit: "+
		"non-causal image %.3g, then causal %.3g; non-causal llama.cpp against the causal reference %.3g; "+
		"the chain from the image's pixels %.3g", len(toks), k, d, dCausal, apart, chain)
	tol := llamatest.Tolerance(t, llamatest.TinyF32)
	require.LessOrEqual(t, d, tol)
	require.LessOrEqual(t, dCausal, tol, "causal attention is back on after DecodeNonCausal")
	require.Greater(t, apart, 0.5, "non-causal and causal decoding differ (far over either device's tolerance)")
	require.LessOrEqual(t, chain, 2e-2)
}
