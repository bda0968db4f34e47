//go:build !llamacpp_external

package llamacpp_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gemma3Projector writes the tiny gemma3 mmproj (for tiny-f32) and returns
// its path.
func gemma3Projector(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny-gemma3.mmproj.gguf")
	require.NoError(t, testmodel.TinyGemma3Projector().Write(path))
	return path
}

// testRGB is a deterministic w×h RGB image with every channel varying.
func testRGB(w, h int) []byte {
	rgb := make([]byte, 0, w*h*3)
	for y := range h {
		for x := range w {
			rgb = append(rgb, byte(x*7+y*3), byte(255-x*5), byte(y*11+x))
		}
	}
	return rgb
}

func loadProjector(t *testing.T, path string, m *llamacpp.Model) *llamacpp.Projector {
	t.Helper()
	p, err := llamacpp.LoadProjector(path, m, llamacpp.ProjectorParams{Threads: 1})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// A prompt with an image through the tiny gemma3 projector: its chunks, the
// image embeddings through llama.cpp's
// clip, against the float64 reference of the same file.
func TestProjectorPrompt(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	path := gemma3Projector(t)
	p := loadProjector(t, path, m)
	info := p.Info()
	assert.True(t, info.Vision)
	assert.False(t, info.Audio)
	assert.False(t, info.MRoPE)
	assert.True(t, info.NonCausal, "gemma3 images are decoded non-causally")
	assert.Equal(t, m.InputEmbeddingSize(), info.Width)

	spec := testmodel.TinyGemma3Projector()
	rgb := testRGB(spec.ImageSize, spec.ImageSize)
	img, err := llamacpp.ImageRGB(spec.ImageSize, spec.ImageSize, rgb)
	require.NoError(t, err)
	img.ID = "img-1"
	pr, err := p.Tokenize("a <__media__> b", []llamacpp.Media{img}, llamacpp.TokenizeOptions{})
	require.NoError(t, err)
	defer pr.Close()
	require.Len(t, pr.Chunks, 3)
	assert.Equal(t, llamacpp.ChunkText, pr.Chunks[0].Kind)
	assert.Equal(t, llamacpp.ChunkImage, pr.Chunks[1].Kind)
	assert.Equal(t, llamacpp.ChunkText, pr.Chunks[2].Kind)
	assert.Equal(t, spec.NTokens(), pr.Chunks[1].NTokens)
	assert.Equal(t, spec.NTokens(), pr.Chunks[1].NPos)
	assert.Equal(t, "img-1", pr.Chunks[1].ID)

	got, err := pr.Encode(1)
	require.NoError(t, err)
	ref, err := reference.LoadVisionProjector(path)
	require.NoError(t, err)
	want, err := ref.EmbedImage(rgb, spec.ImageSize, spec.ImageSize)
	require.NoError(t, err)
	require.Len(t, got, len(want)*info.Width)
	maxErr := 0.0
	for i, row := range want {
		for j, w := range row {
			maxErr = max(maxErr, math.Abs(float64(got[i*info.Width+j])-w))
		}
	}
	t.Logf("max |clip - float64 reference| over %d×%d embeddings: %.3g", len(want), info.Width, maxErr)
	// 1.8e-3 measured (outputs of standard deviation near 1): clip's flash
	// attention rounds Q, K and V to f16 (cgo/mtmd.go).
	assert.Less(t, maxErr, 5e-3)

	_, err = pr.Encode(0)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument, "a text chunk does not encode")

	// Positions: none without M-RoPE; with it, an image needs its grid.
	pos, err := pr.Positions()
	require.NoError(t, err)
	assert.Nil(t, pos, "without M-RoPE the positions are the indices")
	_, err = llamacpp.WithMRoPE(pr).Positions()
	assert.ErrorIs(t, err, llamacpp.ErrMRoPE)
	assert.ErrorContains(t, err, "embeddings on a grid of 0×0")

	// Inputs: gemma3's image is a non-causal run.
	toks, embd, err := pr.Inputs(llamacpp.InputsOptions{Placeholder: 1})
	require.NoError(t, err)
	n0, n2 := len(pr.Chunks[0].Tokens), len(pr.Chunks[2].Tokens)
	assert.Equal(t, []backend.Span{{Start: n0, End: n0 + spec.NTokens()}}, pr.NonCausal())
	require.Len(t, toks, n0+spec.NTokens()+n2)
	require.Len(t, embd, len(toks))
	assert.Equal(t, pr.Chunks[0].Tokens, toks[:n0])
	assert.Equal(t, pr.Chunks[2].Tokens, toks[n0+spec.NTokens():])
	assert.Nil(t, embd[0])
	assert.Equal(t, got[:info.Width], embd[n0])
	assert.Equal(t, int32(1), toks[n0])
}

func TestProjectorRefusals(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	dir := t.TempDir()
	good := gemma3Projector(t)
	data, err := os.ReadFile(good)
	require.NoError(t, err)
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, b, 0o644))
		return path
	}
	for name, c := range map[string]struct {
		path, msg string
	}{
		"missing":    {filepath.Join(dir, "none.gguf"), "no such file"},
		"garbage":    {write("garbage", bytes.Repeat([]byte("not gguf"), 100)), "not a GGUF file"},
		"truncated":  {write("truncated", data[:len(data)/2]), ""},
		"header":     {write("header", data[:200]), ""},
		"text model": {modelPath(t, "tiny-f32"), `general.architecture is llama, want "clip"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := llamacpp.LoadProjector(c.path, m, llamacpp.ProjectorParams{Threads: 1})
			require.ErrorIs(t, err, llamacpp.ErrProjector)
			assert.ErrorContains(t, err, c.msg)
		})
	}

	p := loadProjector(t, good, m)
	pcm, err := llamacpp.AudioPCM(make([]float32, 1600), 16000)
	require.NoError(t, err)
	_, err = p.Tokenize("x", []llamacpp.Media{pcm}, llamacpp.TokenizeOptions{})
	assert.ErrorContains(t, err, "no audio encoder")
	img, err := llamacpp.ImageRGB(2, 2, make([]byte, 12))
	require.NoError(t, err)
	_, err = p.Tokenize("<__media__><__media__>", []llamacpp.Media{img}, llamacpp.TokenizeOptions{})
	assert.ErrorContains(t, err, "2 media markers")
	_, err = p.Tokenize("a\x00b", nil, llamacpp.TokenizeOptions{})
	assert.ErrorContains(t, err, "NUL byte at 1")
	_, err = llamacpp.ImageRGB(1<<14, 1<<14, nil)
	assert.ErrorContains(t, err, "MaxImagePixels")
	_, err = llamacpp.ImageRGB(2, 2, make([]byte, 11))
	assert.ErrorContains(t, err, "want 12")

	// An appended marker: no marker in the text, one image.
	pr, err := p.Tokenize("hello", []llamacpp.Media{img}, llamacpp.TokenizeOptions{})
	require.NoError(t, err)
	kinds := []llamacpp.ChunkKind{}
	for _, c := range pr.Chunks {
		kinds = append(kinds, c.Kind)
	}
	assert.Contains(t, kinds, llamacpp.ChunkImage)
	assert.Equal(t, llamacpp.ChunkText, kinds[0], "the text before the appended marker")
	pr.Close()
	pr.Close()

	require.NoError(t, p.Close())
	_, err = p.Tokenize("x", nil, llamacpp.TokenizeOptions{})
	assert.ErrorIs(t, err, llamacpp.ErrClosed)
}

// M-RoPE's four planes, laid out as llama.cpp's helper lays them (values
// worked by hand): an image keeps the temporal position and walks its grid.
func TestChunkPositions(t *testing.T) {
	img := llamacpp.Chunk{Kind: llamacpp.ChunkImage, NTokens: 6, GridX: 3, GridY: 2}
	assert.Equal(t, []int32{
		10, 10, 10, 10, 10, 10, // temporal
		10, 10, 10, 11, 11, 11, // row
		10, 11, 12, 10, 11, 12, // column
		0, 0, 0, 0, 0, 0,
	}, img.Positions(10, true))
	assert.Equal(t, []int32{10, 11, 12, 13, 14, 15}, img.Positions(10, false))
	audio := llamacpp.Chunk{Kind: llamacpp.ChunkAudio, NTokens: 2}
	assert.Equal(t, []int32{5, 6, 5, 6, 5, 6, 0, 0}, audio.Positions(5, true))
}

// A prompt's M-RoPE positions (values worked by hand): text at one
// position in every plane, an image of 3 columns and 2 rows at temporal
// position 2 walking its grid, and the text after it at 2 + max(3, 2).
func TestPromptPositions(t *testing.T) {
	pr := llamacpp.PromptOf([]llamacpp.Chunk{
		{Kind: llamacpp.ChunkText, Tokens: []int32{7, 8}, NTokens: 2, NPos: 2},
		{Kind: llamacpp.ChunkImage, NTokens: 6, NPos: 3, GridX: 3, GridY: 2},
		{Kind: llamacpp.ChunkText, Tokens: []int32{9}, NTokens: 1, NPos: 1},
	}, llamacpp.ProjectorInfo{MRoPE: true})
	pos, err := pr.Positions()
	require.NoError(t, err)
	want := []backend.Pos{
		{T: 0, H: 0, W: 0}, {T: 1, H: 1, W: 1},
		{T: 2, H: 2, W: 2}, {T: 2, H: 2, W: 3}, {T: 2, H: 2, W: 4},
		{T: 2, H: 3, W: 2}, {T: 2, H: 3, W: 3}, {T: 2, H: 3, W: 4},
		{T: 5, H: 5, W: 5},
	}
	assert.Equal(t, want, pos)
	embd := make([][]float32, len(pos))
	for i := 2; i < 8; i++ {
		embd[i] = []float32{1}
	}
	next, err := backend.CheckPositions(pos, embd, 0)
	require.NoError(t, err, "a layout the backends take")
	assert.Equal(t, int32(6), next)
}

func TestDecodeImage(t *testing.T) {
	src := image.NewNRGBA(image.Rect(0, 0, 3, 2))
	src.Set(0, 0, color.NRGBA{255, 0, 0, 255})
	src.Set(2, 1, color.NRGBA{10, 20, 30, 255})
	src.Set(1, 0, color.NRGBA{200, 100, 50, 128}) // alpha dropped, colour kept
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, src))
	m, err := llamacpp.DecodeImage(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, 3, m.Width)
	assert.Equal(t, 2, m.Height)
	assert.Equal(t, []byte{255, 0, 0}, m.RGB[0:3])
	assert.Equal(t, []byte{200, 100, 50}, m.RGB[3:6])
	assert.Equal(t, []byte{10, 20, 30}, m.RGB[15:18])

	// The same PNG claiming 65536×65536 pixels in its header is refused
	// before its pixels are read.
	b := bytes.Clone(buf.Bytes())
	binary.BigEndian.PutUint32(b[16:], 1<<16)
	binary.BigEndian.PutUint32(b[20:], 1<<16)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	_, err = llamacpp.DecodeImage(bytes.NewReader(b))
	assert.ErrorContains(t, err, "MaxImagePixels")
	_, err = llamacpp.DecodeImage(bytes.NewReader([]byte("GIF89a garbage")))
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
}

// wav builds a RIFF WAVE file.
func wav(format, channels uint16, rate uint32, bits uint16, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(4+8+16+8+len(data)))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), format, channels, rate, rate * uint32(channels*bits/8), channels * bits / 8, bits} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("LIST")
	binary.Write(&b, binary.LittleEndian, uint32(3))
	b.Write([]byte{1, 2, 3, 0}) // odd chunk, padded
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, uint32(len(data)))
	b.Write(data)
	return b.Bytes()
}

func TestDecodeWAV(t *testing.T) {
	var d bytes.Buffer
	// stereo 16-bit frames: (16384, -16384) -> 0, (32767, 32767) -> 32767/32768
	binary.Write(&d, binary.LittleEndian, []int16{16384, -16384, 32767, 32767, -32768, 0})
	m, err := llamacpp.DecodeWAV(bytes.NewReader(wav(1, 2, 16000, 16, d.Bytes())))
	require.NoError(t, err)
	assert.Equal(t, 16000, m.SampleRate)
	assert.Equal(t, []float32{0, 32767.0 / 32768, -0.5}, m.PCM)

	d.Reset()
	binary.Write(&d, binary.LittleEndian, []float32{0.25, -1})
	m, err = llamacpp.DecodeWAV(bytes.NewReader(wav(3, 1, 8000, 32, d.Bytes())))
	require.NoError(t, err)
	assert.Equal(t, []float32{0.25, -1}, m.PCM)
	assert.Equal(t, 8000, m.SampleRate)

	for name, c := range map[string]struct {
		b   []byte
		msg string
	}{
		"not riff":  {[]byte("RIFX0000WAVE"), "not a RIFF WAVE"},
		"8-bit":     {wav(1, 1, 16000, 8, []byte{1, 2}), "16-bit PCM and 32-bit float"},
		"6 chans":   {wav(1, 6, 16000, 16, make([]byte, 12)), "6 channels"},
		"truncated": {wav(1, 1, 16000, 16, make([]byte, 8))[:60], "truncated"},
		"nan":       {wav(3, 1, 16000, 32, []byte{0, 0, 0xc0, 0x7f}), "NaN"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := llamacpp.DecodeWAV(bytes.NewReader(c.b))
			require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
			assert.ErrorContains(t, err, c.msg)
		})
	}
}

// A prompt with a sound through the tiny qwen2a projector: one audio chunk
// whose embeddings are finite and of the text model's width; the wrong
// sample rate is refused.
func TestProjectorAudio(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	path := filepath.Join(t.TempDir(), "qwen2a.mmproj.gguf")
	require.NoError(t, testmodel.TinyQwen2AudioProjector().Write(path))
	p := loadProjector(t, path, m)
	info := p.Info()
	require.True(t, info.Audio)
	require.False(t, info.Vision)
	require.Equal(t, 16000, info.SampleRate)
	pcm := make([]float32, info.SampleRate/2)
	for i := range pcm {
		pcm[i] = float32(0.5 * math.Sin(2*math.Pi*440*float64(i)/float64(info.SampleRate)))
	}
	snd, err := llamacpp.AudioPCM(pcm, info.SampleRate)
	require.NoError(t, err)
	pr, err := p.Tokenize("hear "+info.Marker+" this", []llamacpp.Media{snd}, llamacpp.TokenizeOptions{})
	require.NoError(t, err)
	defer pr.Close()
	var audio []llamacpp.Chunk
	for _, c := range pr.Chunks {
		if c.Kind == llamacpp.ChunkAudio {
			audio = append(audio, c)
		}
	}
	require.Len(t, audio, 1)
	// Inputs encodes it (one encode: Whisper's 30-second window is slow).
	toks, embd, err := pr.Inputs(llamacpp.InputsOptions{Placeholder: 1})
	require.NoError(t, err, "qwen2a is causal and 1-D")
	require.Nil(t, pr.NonCausal())
	require.Len(t, embd, len(toks))
	rows := 0
	for _, e := range embd {
		if e == nil {
			continue
		}
		rows++
		require.Len(t, e, info.Width)
		for _, v := range e {
			require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0))
		}
	}
	require.Equal(t, audio[0].NTokens, rows)
	t.Logf("half a second of audio: %d embeddings (Whisper's 30 s window)", rows)

	wrong, err := llamacpp.AudioPCM(pcm, 8000)
	require.NoError(t, err)
	_, err = p.Tokenize("x", []llamacpp.Media{wrong}, llamacpp.TokenizeOptions{})
	require.ErrorContains(t, err, "8000 Hz; the projector takes 16000 Hz")
	img, err := llamacpp.ImageRGB(2, 2, make([]byte, 12))
	require.NoError(t, err)
	_, err = p.Tokenize("x", []llamacpp.Media{img}, llamacpp.TokenizeOptions{})
	require.ErrorContains(t, err, "no vision encoder")
}
