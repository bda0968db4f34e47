//go:build !llamacpp_external

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/clitest"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// imageURL is a data URL of a 32x32 PNG (the tiny projector's size) whose
// pixels depend on seed.
func imageURL(t *testing.T, seed byte) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 32, 32))
	for y := range 32 {
		for x := range 32 {
			img.Set(x, y, color.RGBA{byte(8*x) + seed, byte(8 * y), byte(4*(x+y)) ^ seed, 255})
		}
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}

// An image in a chat message goes through llamaserve's projector into the
// model: the tiny model with the self-made gemma3 projector (16 image
// embeddings) answers with its prompt 16 tokens and more longer than the
// text alone; the same image twice gives the same log-probabilities, the
// second time from the prefix cache (only its last token evaluated), and
// another image others, reusing only the text before it (the embeddings
// reach the decoder, and the cache tells the images apart).
// Gemma 3's images attend to themselves both ways, in one micro-batch: with
// --ubatch below an image's 16 embeddings the request is refused, naming
// n_ubatch.
func TestServeImage(t *testing.T) {
	dir := t.TempDir()
	model, proj := filepath.Join(dir, "tiny.gguf"), filepath.Join(dir, "tiny-gemma3.mmproj.gguf")
	require.NoError(t, testmodel.Random{Spec: testmodel.TinySpec(gguf.TensorF32)}.Write(model))
	require.NoError(t, testmodel.TinyGemma3Projector().Write(proj))
	start := func(args ...string) *server {
		return startProcess(t, append([]string{"-m", model, "--addr", "127.0.0.1:0", "--threads", "1", "--parallel", "1", "--ctx", "256",
			"--mmproj", proj, "--chat-template", testmodel.ChatMLTemplate}, args...))
	}
	s := start()

	type reply struct {
		Choices []struct {
			Logprobs struct {
				Content []struct {
					Logprob float64 `json:"logprob"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	ask := func(content string) (int, reply, string) {
		body := `{"max_tokens":2,"temperature":0,"logprobs":true,"messages":[{"role":"user","content":` + content + `}]}`
		resp, err := http.Post(s.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var r reply
		if resp.StatusCode == http.StatusOK {
			require.NoError(t, json.Unmarshal(data, &r), "%s", data)
		}
		return resp.StatusCode, r, string(data)
	}
	parts := func(url string) string {
		return `[{"type":"text","text":"What is this? "},{"type":"image_url","image_url":{"url":"` + url + `"}}]`
	}
	saved := func() float64 { return s.metrics(t)["llamaserve_prefix_cache_tokens_saved_total"] }
	code, text, body := ask(`"What is this? "`)
	require.Equal(t, http.StatusOK, code, body)
	code, a, body := ask(parts(imageURL(t, 0)))
	require.Equal(t, http.StatusOK, code, body)
	before := saved()
	code, again, body := ask(parts(imageURL(t, 0)))
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, float64(a.Usage.PromptTokens-1), saved()-before, "the same image: all but the last token reused")
	before = saved()
	code, b, body := ask(parts(imageURL(t, 97)))
	require.Equal(t, http.StatusOK, code, body)
	savedB := saved() - before
	assert.Positive(t, savedB, "the text before the image")
	assert.Less(t, savedB, float64(a.Usage.PromptTokens-16), "another image is not reused")

	assert.GreaterOrEqual(t, a.Usage.PromptTokens, text.Usage.PromptTokens+16)
	require.NotEmpty(t, a.Choices)
	require.NotEmpty(t, a.Choices[0].Logprobs.Content)
	sameLogprobs(t, a.Choices[0].Logprobs.Content, again.Choices[0].Logprobs.Content)
	assert.Greater(t, math.Abs(a.Choices[0].Logprobs.Content[0].Logprob-b.Choices[0].Logprobs.Content[0].Logprob), 1e-3)

	s = start("--ubatch", "8")
	code, _, body = ask(parts(imageURL(t, 0)))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "n_ubatch")
}

// An M-RoPE projector (Qwen2-VL's merger) beside its qwen2vl text model:
// a 32x32 image adds its 16 embeddings (a 4x4 grid taking 4 positions) to
// the prompt, and another image gives other log-probabilities. Its
// positions are checked against the float64 reference in llamabackend.
func TestServeImageMRoPE(t *testing.T) {
	dir := t.TempDir()
	model, proj := filepath.Join(dir, "qwen2vl.gguf"), filepath.Join(dir, "qwen2vl.mmproj.gguf")
	require.NoError(t, testmodel.TinyQwen2VLText().Write(model))
	require.NoError(t, testmodel.TinyQwen2VLProjector().Write(proj))
	s := startProcess(t, []string{"-m", model, "--addr", "127.0.0.1:0", "--threads", "1", "--parallel", "1", "--ctx", "256",
		"--mmproj", proj, "--chat-template", testmodel.ChatMLTemplate})
	type reply struct {
		Choices []struct {
			Logprobs struct {
				Content []struct {
					Logprob float64 `json:"logprob"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	ask := func(content string) reply {
		body := `{"max_tokens":2,"temperature":0,"logprobs":true,"messages":[{"role":"user","content":` + content + `}]}`
		resp, err := http.Post(s.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
		var r reply
		require.NoError(t, json.Unmarshal(data, &r), "%s", data)
		require.NotEmpty(t, r.Choices)
		require.NotEmpty(t, r.Choices[0].Logprobs.Content)
		return r
	}
	parts := func(url string) string {
		return `[{"type":"text","text":"What is this? "},{"type":"image_url","image_url":{"url":"` + url + `"}}]`
	}
	text := ask(`"What is this? "`)
	a, b := ask(parts(imageURL(t, 0))), ask(parts(imageURL(t, 97)))
	assert.GreaterOrEqual(t, a.Usage.PromptTokens, text.Usage.PromptTokens+16)
	assert.NotEqual(t, a.Choices[0].Logprobs.Content[0].Logprob, b.Choices[0].Logprobs.Content[0].Logprob)
}

// sameLogprobs checks the log-probabilities of a reply against those of the
// same request served again from the prefix cache: its last prompt token
// was then evaluated alone, so llama.cpp's kernels sum in another order
// (f16 cache: 3e-5 seen).
func sameLogprobs(t *testing.T, want, got []tokenLogprob) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		assert.InDelta(t, want[i].Logprob, got[i].Logprob, 1e-4, "token %d", i)
	}
}

// tokenLogprob is an entry of a chat reply's logprobs.content.
type tokenLogprob = struct {
	Logprob float64 `json:"logprob"`
}

// --mmproj's refusals on the command line: the flags it does not combine
// with, the media limits at 0, and a projector file
// that is not one (an error, exit status 1).
func TestMediaCommandLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--mmproj", "p.gguf", "--batch-invariant"}, "--mmproj with --batch-invariant: the batch-invariant decode takes no input embeddings"},
		{[]string{"--mmproj", "p.gguf", "--assistant-model", "d.gguf"}, "--mmproj with --assistant-model: the draft model cannot read the embeddings of images and sounds"},
		{[]string{"--max-media", "0"}, "--max-media 0: must be at least 1"},
		{[]string{"--max-media-bytes", "0"}, "--max-media-bytes 0: must be at least 1"},
		{[]string{"--max-media-pixels", "0"}, "--max-media-pixels 0: must be at least 1"},
	} {
		res := clitest.Run(t, bin, "", append([]string{"-m", demoModel}, c.args...)...)
		assert.Equal(t, 2, res.Code, c.args)
		assert.Contains(t, res.Stderr, c.msg)
	}
	res := clitest.Run(t, bin, "", "-m", demoModel, "--threads", "1", "--addr", "127.0.0.1:0", "--mmproj", demoModel)
	assert.Equal(t, 1, res.Code)
	assert.Contains(t, res.Stderr, "projector")
}

// wavOf is a WAV file of 0.5 s of a sine of freq Hz, 16-bit mono at 16 kHz
// (the Whisper-style projector's rate).
func wavOf(freq float64) []byte {
	const rate, n = 16000, 8000
	var b bytes.Buffer
	w := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(uint32(36 + 2*n))
	b.WriteString("WAVEfmt ")
	w(uint32(16))
	w(uint16(1))
	w(uint16(1))
	w(uint32(rate))
	w(uint32(2 * rate))
	w(uint16(2))
	w(uint16(16))
	b.WriteString("data")
	w(uint32(2 * n))
	for i := range n {
		w(int16(8000 * math.Sin(2*math.Pi*freq*float64(i)/rate)))
	}
	return b.Bytes()
}

// An input_audio part goes through the self-made Qwen2-Audio projector
// (Whisper-style encoder) into the tiny model: the prompt grows by the
// clip's 750 embeddings (a 30-second chunk), the same clip gives the same
// log-probabilities, the second time from the prefix cache, and another
// clip others; an image to an audio-only projector is refused.
func TestServeAudio(t *testing.T) {
	dir := t.TempDir()
	model, proj := filepath.Join(dir, "tiny.gguf"), filepath.Join(dir, "tiny-qwen2a.mmproj.gguf")
	require.NoError(t, testmodel.Random{Spec: testmodel.TinySpec(gguf.TensorF32)}.Write(model))
	require.NoError(t, testmodel.TinyQwen2AudioProjector().Write(proj))
	s := startProcess(t, []string{"-m", model, "--addr", "127.0.0.1:0", "--threads", "1", "--parallel", "1", "--ctx", "1024",
		"--mmproj", proj, "--chat-template", testmodel.ChatMLTemplate, "--max-body", "4000000"})
	type reply struct {
		Choices []struct {
			Logprobs struct {
				Content []struct {
					Logprob float64 `json:"logprob"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	ask := func(content string) (int, reply, string) {
		body := `{"max_tokens":2,"temperature":0,"logprobs":true,"messages":[{"role":"user","content":` + content + `}]}`
		resp, err := http.Post(s.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var r reply
		if resp.StatusCode == http.StatusOK {
			require.NoError(t, json.Unmarshal(data, &r), "%s", data)
		}
		return resp.StatusCode, r, string(data)
	}
	parts := func(freq float64) string {
		return `[{"type":"text","text":"Hear: "},{"type":"input_audio","input_audio":{"data":"` + base64.StdEncoding.EncodeToString(wavOf(freq)) + `","format":"wav"}}]`
	}
	code, text, body := ask(`"Hear: "`)
	require.Equal(t, http.StatusOK, code, body)
	code, a, body := ask(parts(440))
	require.Equal(t, http.StatusOK, code, body)
	saved := func() float64 { return s.metrics(t)["llamaserve_prefix_cache_tokens_saved_total"] }
	before := saved()
	code, again, body := ask(parts(440))
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, float64(a.Usage.PromptTokens-1), saved()-before, "the same clip: all but the last token reused")
	before = saved()
	code, b, body := ask(parts(1760))
	require.Equal(t, http.StatusOK, code, body)
	assert.Less(t, saved()-before, float64(a.Usage.PromptTokens-750), "another clip is not reused")

	// A clip is padded to Whisper's 30-second chunk: 750 embeddings.
	assert.GreaterOrEqual(t, a.Usage.PromptTokens, text.Usage.PromptTokens+750)
	require.NotEmpty(t, a.Choices)
	require.NotEmpty(t, a.Choices[0].Logprobs.Content)
	sameLogprobs(t, a.Choices[0].Logprobs.Content, again.Choices[0].Logprobs.Content)
	assert.Greater(t, math.Abs(a.Choices[0].Logprobs.Content[0].Logprob-b.Choices[0].Logprobs.Content[0].Logprob), 1e-3)
	t.Logf("prompt tokens: text %d, with 0.5 s of audio %d", text.Usage.PromptTokens, a.Usage.PromptTokens)

	code, _, body = ask(`[{"type":"image_url","image_url":{"url":"` + imageURL(t, 0) + `"}}]`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "this model's projector (--mmproj) takes no images")
}
