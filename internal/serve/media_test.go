package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakePrompter records what the server gives the projector and makes the
// request of the prompt's text, each marker written as "image".
type fakePrompter struct {
	mu  sync.Mutex
	tok interface {
		Tokenize(string, bool, bool) ([]int32, error)
	}
	prompts []string
	media   [][]Media
	audio   bool
}

func (f *fakePrompter) MediaPrompt(_ context.Context, prompt string, media []Media) (generation.Request, error) {
	f.mu.Lock()
	f.prompts, f.media = append(f.prompts, prompt), append(f.media, media)
	f.mu.Unlock()
	toks, err := f.tok.Tokenize(strings.ReplaceAll(prompt, MediaMarker, " image "), false, true)
	return generation.Request{Prompt: toks}, err
}

func (f *fakePrompter) TakesImages() bool { return true }
func (f *fakePrompter) TakesAudio() bool  { return f.audio }

// pngOf is a w×h PNG file.
func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))))
	return b.Bytes()
}

// wavFile is the header of an empty 16 kHz mono 16-bit WAV file.
var wavFile = []byte("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80\x3e\x00\x00\x00\x7d\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00")

func dataURL(mime string, data []byte) string {
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data)
}

func mediaHarness(t *testing.T, cfg Config) (*harness, *fakePrompter) {
	t.Helper()
	tmpl, err := NewChatTemplate(testmodel.ChatMLTemplate, "", "")
	require.NoError(t, err)
	cfg.ChatTemplate = tmpl
	f := &fakePrompter{audio: true}
	if cfg.Media == nil {
		cfg.Media = f
	}
	h := newHarness(t, 1, cfg, nil)
	f.tok = h.tok
	h.model.SetScript(h.tok.Says("A grey square."))
	return h, f
}

// The media parts of each API reach the projector in their order, with a
// marker in the rendered prompt where each part was, and their bytes as
// sent.
func TestMediaReachTheProjectorInOrder(t *testing.T) {
	h, f := mediaHarness(t, Config{})
	img, img2 := pngOf(t, 3, 2), pngOf(t, 5, 7)
	parts, err := json.Marshal([]any{
		map[string]any{"type": "text", "text": "Look: "},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL("image/png", img)}},
		map[string]any{"type": "text", "text": " and hear "},
		map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": base64.StdEncoding.EncodeToString(wavFile), "format": "wav"}},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL("image/png", img2)}},
	})
	require.NoError(t, err)
	resp := post(t, h.ts.URL+"/v1/chat/completions", `{"max_tokens":5,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":`+string(parts)+`}]}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Len(t, f.prompts, 1)
	assert.Equal(t, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nLook: <__media__> and hear <__media__><__media__><|im_end|>\n<|im_start|>assistant\n", f.prompts[0])
	assert.Equal(t, []Media{
		{Kind: MediaImage, Format: "png", Data: img, Width: 3, Height: 2},
		{Kind: MediaAudio, Format: "wav", Data: wavFile},
		{Kind: MediaImage, Format: "png", Data: img2, Width: 5, Height: 7},
	}, f.media[0])

	// The Responses API's input_image and input_audio.
	resp = post(t, h.ts.URL+"/v1/responses", `{"max_output_tokens":5,"input":[{"role":"user","content":[{"type":"input_text","text":"What is "},{"type":"input_image","image_url":"`+dataURL("image/png", img)+`"},{"type":"input_audio","input_audio":{"data":"`+base64.StdEncoding.EncodeToString(wavFile)+`","format":"wav"}}]}]}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Len(t, f.prompts, 2)
	assert.Equal(t, "<|im_start|>user\nWhat is <__media__><__media__><|im_end|>\n<|im_start|>assistant\n", f.prompts[1])
	assert.Equal(t, []Media{{Kind: MediaImage, Format: "png", Data: img, Width: 3, Height: 2}, {Kind: MediaAudio, Format: "wav", Data: wavFile}}, f.media[1])

	// Anthropic's image blocks, between texts joined by newlines.
	resp = post(t, h.ts.URL+"/v1/messages", `{"model":"demo","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"This:"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+base64.StdEncoding.EncodeToString(img2)+`"}},{"type":"text","text":"What?"}]}]}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Len(t, f.prompts, 3)
	assert.Equal(t, "<|im_start|>user\nThis:\n<__media__>\nWhat?<|im_end|>\n<|im_start|>assistant\n", f.prompts[2])
	assert.Equal(t, []Media{{Kind: MediaImage, Format: "png", Data: img2, Width: 5, Height: 7}}, f.media[2])

	// Ollama's images, on a chat message and on generate's prompt: before
	// the text, as Ollama places them.
	b64, b64two := base64.StdEncoding.EncodeToString(img), base64.StdEncoding.EncodeToString(img2)
	resp = post(t, h.ts.URL+"/api/chat", `{"model":"demo","stream":false,"options":{"num_predict":5},"messages":[{"role":"user","content":"Which?","images":["`+b64+`","`+b64two+`"]}]}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Len(t, f.prompts, 4)
	assert.Equal(t, "<|im_start|>user\n<__media__><__media__>Which?<|im_end|>\n<|im_start|>assistant\n", f.prompts[3])
	assert.Equal(t, []Media{{Kind: MediaImage, Format: "png", Data: img, Width: 3, Height: 2}, {Kind: MediaImage, Format: "png", Data: img2, Width: 5, Height: 7}}, f.media[3])
	resp = post(t, h.ts.URL+"/api/generate", `{"model":"demo","stream":false,"options":{"num_predict":5},"prompt":"Which?","images":["`+b64two+`"]}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Len(t, f.prompts, 5)
	assert.Equal(t, "<|im_start|>user\n<__media__>Which?<|im_end|>\n<|im_start|>assistant\n", f.prompts[4])
	resp = post(t, h.ts.URL+"/api/generate", `{"model":"demo","raw":true,"prompt":"Which?","images":["`+b64two+`"]}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(body), "raw mode does not support images")
	assert.Len(t, f.prompts, 5)
}

// Each refusal is a 400 naming what is refused and, for a limit, the
// limit and its flag; nothing reaches the projector.
func TestMediaRefusals(t *testing.T) {
	img := pngOf(t, 3, 2)
	user := func(parts ...string) string {
		return `{"max_tokens":5,"messages":[{"role":"user","content":[` + strings.Join(parts, ",") + `]}]}`
	}
	image := func(url string) string { return `{"type":"image_url","image_url":{"url":"` + url + `"}}` }
	audio := func(format string) string {
		return `{"type":"input_audio","input_audio":{"data":"` + base64.StdEncoding.EncodeToString(wavFile) + `","format":"` + format + `"}}`
	}
	for _, c := range []struct {
		name, body, param, code, msg string
		cfg                          Config
	}{
		{name: "remote URL", body: user(image("https://example.com/cat.png")), param: "messages[0].content[0].image_url.url",
			msg: `a URL of scheme "https": this server fetches nothing; send the image in a data URL`},
		{name: "webp", body: user(image(dataURL("image/webp", img))), param: "messages[0].content[0].image_url.url",
			msg: `an image of type "image/webp": only image/png, image/jpeg and image/gif are read`},
		{name: "not base64", body: user(image("data:image/png,abc")), param: "messages[0].content[0].image_url.url", msg: "without ;base64"},
		{name: "bad base64", body: user(image("data:image/png;base64,@@@@")), param: "messages[0].content[0].image_url.url", msg: "the data is not base64"},
		{name: "not an image", body: user(image(dataURL("image/png", []byte("not an image at all")))), param: "messages[0].content[0].image_url.url", msg: "not a PNG, JPEG or GIF image"},
		{name: "mp3", body: user(audio("mp3")), param: "messages[0].content[0].input_audio", msg: `audio of format "mp3": only wav is read`},
		{name: "not wav", body: user(`{"type":"input_audio","input_audio":{"data":"` + base64.StdEncoding.EncodeToString(img) + `","format":"wav"}}`),
			param: "messages[0].content[0].input_audio", msg: "not a WAV file"},
		{name: "too many", cfg: Config{Limits: Limits{MaxMedia: 1}}, body: user(image(dataURL("image/png", img)), audio("wav")),
			param: "messages[0].content[1].input_audio", code: "too_many_media", msg: "more than the 1 images and audio clips a request may have (llamaserve --max-media)"},
		{name: "too many bytes", cfg: Config{Limits: Limits{MaxMediaBytes: 40}}, body: user(image(dataURL("image/png", img))),
			param: "messages[0].content[0].image_url.url", code: "media_too_large", msg: "more than the 40 a media item may have (llamaserve --max-media-bytes)"},
		{name: "too many pixels", cfg: Config{Limits: Limits{MaxMediaPixels: 5}}, body: user(image(dataURL("image/png", img))),
			param: "messages[0].content[0].image_url.url", code: "image_too_large", msg: "a 3x2 image, more than the 5 pixels an image may have (llamaserve --max-media-pixels)"},
		{name: "no audio", cfg: Config{Media: &fakePrompter{}}, body: user(audio("wav")), param: "messages[0].content[0].input_audio",
			msg: "this model's projector (--mmproj) takes no audio"},
		{name: "assistant", body: `{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[` + image(dataURL("image/png", img)) + `]}]}`,
			param: "messages[1].content", msg: "images and audio belong to user messages, not assistant"},
		{name: "marker in text", body: user(`{"type":"text","text":"`+MediaMarker+`"}`, image(dataURL("image/png", img))),
			param: "messages", msg: "the chat prompt holds the media marker <__media__> 2 times for 1 images and audio clips"},
		{name: "unknown part", body: user(`{"type":"file","file":{}}`), param: "messages[0].content[0].type",
			msg: `content part of type "file": only text, image_url and input_audio are read`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, f := mediaHarness(t, c.cfg)
			resp := post(t, h.ts.URL+"/v1/chat/completions", c.body)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			e := errorOf(t, resp)
			assert.Contains(t, e.Error.Message, c.msg)
			require.NotNil(t, e.Error.Param)
			assert.Equal(t, c.param, *e.Error.Param)
			if c.code != "" {
				require.NotNil(t, e.Error.Code)
				assert.Equal(t, c.code, *e.Error.Code)
			}
			assert.Empty(t, f.prompts)
		})
	}
}

// Without a projector, or without a Jinja template, media are refused,
// naming the flag; the other APIs' refusals of what they cannot carry.
func TestMediaNeedProjectorAndTemplate(t *testing.T) {
	img := pngOf(t, 3, 2)
	body := `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + dataURL("image/png", img) + `"}}]}]}`
	ts, _ := newServer(t, 1, Config{})
	resp := post(t, ts.URL+"/v1/chat/completions", body)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, errorOf(t, resp).Error.Message, "an image part: this model reads text only (llamaserve serves images and audio with a projector, --mmproj)")

	f := &fakePrompter{}
	ts, _ = newServer(t, 1, Config{Media: f})
	resp = post(t, ts.URL+"/v1/chat/completions", body)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, errorOf(t, resp).Error.Message, "images and audio need a Jinja chat template")

	h, f := mediaHarness(t, Config{})
	resp = post(t, h.ts.URL+"/v1/messages", `{"model":"demo","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]}]}`)
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(text), "an image by URL: this server fetches nothing")

	resp = post(t, h.ts.URL+"/v1/responses", `{"input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}]}`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, errorOf(t, resp).Error.Message, "an input_image by file_id: this server stores no files")
	assert.Empty(t, f.prompts)
}

// Ollama's images (base64 strings) become image parts before the message's
// text, their type read from their first bytes; what is not PNG, JPEG or GIF
// is refused by the part's reader.
func TestOllamaImageContent(t *testing.T) {
	png64 := base64.StdEncoding.EncodeToString(pngOf(t, 3, 2))
	jpeg64 := "/9j/4AAQ"
	content, err := ollamaImageContent("Hi", []json.RawMessage{json.RawMessage(`"` + png64 + `"`), json.RawMessage(`"` + jpeg64 + `"`), json.RawMessage(`"UklGR"`)})
	require.NoError(t, err)
	assert.JSONEq(t, `[{"type":"image_url","image_url":{"url":"data:image/png;base64,`+png64+`"}},
		{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,`+jpeg64+`"}},
		{"type":"image_url","image_url":{"url":"data:application/octet-stream;base64,UklGR"}},
		{"type":"text","text":"Hi"}]`, string(content))
	_, err = ollamaImageContent("Hi", []json.RawMessage{json.RawMessage(`3`)})
	assert.EqualError(t, err, "images[0]: must be a base64 string")

	r := &mediaReader{limits: Limits{}.withDefaults(), media: &fakePrompter{}}
	content, err = ollamaImageContent("Hi", []json.RawMessage{json.RawMessage(`"` + png64 + `"`)})
	require.NoError(t, err)
	text, err := r.messageText(content, "messages[0].content")
	require.NoError(t, err)
	assert.Equal(t, MediaMarker+"Hi", text)
	require.Len(t, r.items, 1)
	assert.Equal(t, 3, r.items[0].Width)
	content, err = ollamaImageContent("Hi", []json.RawMessage{json.RawMessage(`"UklGR"`)})
	require.NoError(t, err)
	_, err = r.messageText(content, "messages[0].content")
	assert.ErrorContains(t, err, `an image of type "application/octet-stream": only image/png, image/jpeg and image/gif are read`)
}

// The projector reads control tokens throughout the prompt, so in a
// request with media a message's text holding a control token's text
// (the demo's </s>) is refused unless parse_special reads it as the token;
// without media it stays text as before.
func TestMediaControlTokenText(t *testing.T) {
	h, f := mediaHarness(t, Config{})
	image := `{"type":"image_url","image_url":{"url":"` + dataURL("image/png", pngOf(t, 3, 2)) + `"}}`
	body := func(extra string) string {
		return `{"max_tokens":3,"messages":[{"role":"user","content":[{"type":"text","text":"a </s> b"},` + image + `]}]` + extra + `}`
	}
	resp := post(t, h.ts.URL+"/v1/chat/completions", body(""))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	e := errorOf(t, resp)
	assert.Contains(t, e.Error.Message, "messages[0].content holds the text of a control token, which a prompt with images or audio cannot keep as text")
	assert.Empty(t, f.prompts)

	resp = post(t, h.ts.URL+"/v1/chat/completions", body(`,"parse_special":true`))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, f.prompts, 1)
	assert.Contains(t, f.prompts[0], "a </s> b<__media__>")

	resp = post(t, h.ts.URL+"/v1/chat/completions", `{"max_tokens":3,"messages":[{"role":"user","content":"a </s> b"}]}`)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
