package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif"  // image.DecodeConfig reads GIF,
	_ "image/jpeg" // JPEG
	_ "image/png"  // and PNG
	"net/http"
	"slices"
	"strings"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/chat"
	"github.com/llamaloop/llamaloop/internal/quote"
)

// Images and audio in chat messages: every API's media parts become
// OpenAI's (image_url with a data URL, input_audio), read here into Media,
// with MediaMarker written in the message's text where the part was. The
// chat template renders the text with the markers; a MediaPrompter (the
// projector, llamaserve --mmproj) turns the rendered prompt and the media
// into the engine's request. The marker is the content's own: the
// projector writes the model's image or audio tokens around the
// embeddings (as llama-server does), so the template is given text, never
// {"type":"image"} parts.

// MediaMarker stands in the rendered prompt where a media item goes: the
// default marker of llama.cpp's mtmd.
const MediaMarker = "<__media__>"

// MediaKind is what a media item is.
type MediaKind string

// The kinds of media.
const (
	MediaImage MediaKind = "image"
	MediaAudio MediaKind = "audio"
)

// Media is a media item of a request, as the client sent it (decoded from
// base64, not decoded further).
type Media struct {
	Kind MediaKind
	// Format is the file's format: "png", "jpeg" or "gif" for an image, "wav"
	// for audio.
	Format string
	// Data holds the file's bytes.
	Data []byte
	// Width and Height are an image's, read from its header (image.DecodeConfig).
	Width, Height int
}

// MediaPrompter makes the engine's request from a rendered chat prompt
// holding MediaMarker once per media item, in order, and the items. The
// whole prompt is tokenized with its control tokens read as tokens: the
// server refuses message texts that hold a control token's text unless the
// request sets parse_special.
type MediaPrompter interface {
	MediaPrompt(ctx context.Context, prompt string, media []Media) (generation.Request, error)
	// TakesAudio and TakesImages say what the projector reads.
	TakesImages() bool
	TakesAudio() bool
}

// Defaults of the media limits (Limits).
const (
	DefaultMaxMedia       = 8
	DefaultMaxMediaBytes  = 10 << 20
	DefaultMaxMediaPixels = 4096 * 4096
)

// mediaReader reads the media parts of a request's messages, in order,
// within the limits.
type mediaReader struct {
	limits Limits
	media  MediaPrompter // nil: no projector (the model reads text only)
	items  []Media
}

// tooMuchMedia is the error of a request over a media limit; its code names
// the limit.
func tooMuchMedia(param, code, format string, args ...any) *requestError {
	return &requestError{status: http.StatusBadRequest, param: param, code: code, msg: fmt.Sprintf(format, args...)}
}

// add checks a media item of kind at param before its data is decoded.
func (r *mediaReader) add(param string, kind MediaKind) error {
	switch {
	case r.media == nil:
		return badRequest(param, "%s: an %s part: this model reads text only (llamaserve serves images and audio with a projector, --mmproj)", param, kind)
	case kind == MediaImage && !r.media.TakesImages():
		return badRequest(param, "%s: an image part: this model's projector (--mmproj) takes no images", param)
	case kind == MediaAudio && !r.media.TakesAudio():
		return badRequest(param, "%s: an input_audio part: this model's projector (--mmproj) takes no audio", param)
	case len(r.items) >= r.limits.MaxMedia:
		return tooMuchMedia(param, "too_many_media", "%s: more than the %d images and audio clips a request may have (llamaserve --max-media)", param, r.limits.MaxMedia)
	}
	return nil
}

// decode decodes base64 data of at most MaxMediaBytes once decoded.
func (r *mediaReader) decode(param, data string) ([]byte, error) {
	if n := base64.StdEncoding.DecodedLen(len(data)); n > r.limits.MaxMediaBytes+2 {
		return nil, tooMuchMedia(param, "media_too_large", "%s: about %d bytes, more than the %d a media item may have (llamaserve --max-media-bytes)", param, n, r.limits.MaxMediaBytes)
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, badRequest(param, "%s: the data is not base64: %v", param, err)
	}
	if len(b) > r.limits.MaxMediaBytes {
		return nil, tooMuchMedia(param, "media_too_large", "%s: %d bytes, more than the %d a media item may have (llamaserve --max-media-bytes)", param, len(b), r.limits.MaxMediaBytes)
	}
	return b, nil
}

// imageURL reads an image part's URL: a data URL of a PNG, JPEG or GIF
// image (its first frame is what a projector sees), whose format is read
// from its header.
func (r *mediaReader) imageURL(param, url string) error {
	if err := r.add(param, MediaImage); err != nil {
		return err
	}
	head, data, ok := strings.Cut(url, ",")
	if !ok || !strings.HasPrefix(head, "data:") {
		scheme, _, _ := strings.Cut(url, ":")
		if len(scheme) > 16 {
			scheme = scheme[:16]
		}
		return badRequest(param, "%s: a URL of scheme %s: this server fetches nothing; send the image in a data URL (data:image/png;base64,...)", param, quote.String(scheme))
	}
	mime, params, _ := strings.Cut(strings.TrimPrefix(head, "data:"), ";")
	if !strings.HasSuffix(";"+params, ";base64") {
		return badRequest(param, "%s: a data URL without ;base64: only base64 data is read", param)
	}
	switch strings.ToLower(mime) {
	case "image/png", "image/jpeg", "image/jpg", "image/gif":
	default:
		return badRequest(param, "%s: an image of type %s: only image/png, image/jpeg and image/gif are read", param, quote.String(mime))
	}
	b, err := r.decode(param, data)
	if err != nil {
		return err
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err == nil && format != "png" && format != "jpeg" && format != "gif" {
		err = fmt.Errorf("a %s image", format)
	}
	if err != nil {
		return badRequest(param, "%s: not a PNG, JPEG or GIF image: %v", param, err)
	}
	if cfg.Width < 1 || cfg.Height < 1 || int64(cfg.Width)*int64(cfg.Height) > int64(r.limits.MaxMediaPixels) {
		return tooMuchMedia(param, "image_too_large", "%s: a %dx%d image, more than the %d pixels an image may have (llamaserve --max-media-pixels)", param, cfg.Width, cfg.Height, r.limits.MaxMediaPixels)
	}
	r.items = append(r.items, Media{Kind: MediaImage, Format: format, Data: b, Width: cfg.Width, Height: cfg.Height})
	return nil
}

// audio reads an input_audio part's data and format (WAV only).
func (r *mediaReader) audio(param, data, format string) error {
	if err := r.add(param, MediaAudio); err != nil {
		return err
	}
	if format != "wav" {
		return badRequest(param, "%s: audio of format %s: only wav is read", param, quote.String(format))
	}
	b, err := r.decode(param, data)
	if err != nil {
		return err
	}
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return badRequest(param, "%s: not a WAV file (RIFF WAVE)", param)
	}
	r.items = append(r.items, Media{Kind: MediaAudio, Format: "wav", Data: b})
	return nil
}

// contentPart is a part of a chat message's content.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	InputAudio *struct {
		Data   string `json:"data"`
		Format string `json:"format"`
	} `json:"input_audio"`
}

// messageText reads a message's content: a string, or an array of parts
// of type "text" whose texts are joined, "image_url" and "input_audio",
// which are read into r and stand as MediaMarker in the text. field names
// the content in errors.
func (r *mediaReader) messageText(raw json.RawMessage, field string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(field, "%s: content must be a string or an array of content parts", field)
	}
	var b strings.Builder
	for j, p := range parts {
		param := fmt.Sprintf("%s[%d]", field, j)
		switch p.Type {
		case "text":
			b.WriteString(p.Text)
			continue
		case "image_url":
			if p.ImageURL == nil {
				return "", badRequest(param+".image_url", "%s: image_url is required", param)
			}
			if err := r.imageURL(param+".image_url.url", p.ImageURL.URL); err != nil {
				return "", err
			}
		case "input_audio":
			if p.InputAudio == nil {
				return "", badRequest(param+".input_audio", "%s: input_audio is required", param)
			}
			if err := r.audio(param+".input_audio", p.InputAudio.Data, p.InputAudio.Format); err != nil {
				return "", err
			}
		default:
			return "", badRequest(param+".type", "%s: content part of type %s: only text, image_url and input_audio are read", param, quote.String(p.Type))
		}
		b.WriteString(MediaMarker)
	}
	return b.String(), nil
}

// renderMediaChat renders msgs, whose texts hold a MediaMarker per item of
// media, with the Jinja template, and has the MediaPrompter make the
// request of the rendered text. The prompter reads control tokens
// throughout the text, so, unless parseSpecial, a text of the client that
// holds a control token's text is refused. It returns the rendered text's
// tail, as renderChatWith.
func (p *params) renderMediaChat(ctx context.Context, msgs []chatMessage, media []Media, tools []byte, parseSpecial bool, opt chat.RenderOptions) (generation.Request, string, error) {
	render, contents, fields := p.chatTexts(ctx, msgs, tools, opt)
	if !parseSpecial {
		for i, c := range contents {
			if c == "" {
				continue
			}
			plain, err := p.tok.Tokenize(c, false, false)
			if err != nil {
				return generation.Request{}, "", badRequest(fields[i], "%s cannot be tokenized: %v", fields[i], err)
			}
			special, err := p.tok.Tokenize(c, false, true)
			if err != nil {
				return generation.Request{}, "", badRequest(fields[i], "%s cannot be tokenized: %v", fields[i], err)
			}
			if !slices.Equal(plain, special) {
				return generation.Request{}, "", badRequest(fields[i], "%s holds the text of a control token, which a prompt with images or audio cannot keep as text (remove it, or set parse_special to read it as the token)", fields[i])
			}
		}
	}
	text, err := render(contents)
	if err != nil {
		return generation.Request{}, "", err
	}
	if n := strings.Count(text, MediaMarker); n != len(media) {
		return generation.Request{}, "", badRequest("messages", "the chat prompt holds the media marker %s %d times for %d images and audio clips (a message's text may not hold it, and the chat template must keep every user message)", MediaMarker, n, len(media))
	}
	req, err := p.media.MediaPrompt(ctx, text, media)
	if err != nil {
		return generation.Request{}, "", badRequest("messages", "the images and audio cannot be read: %v", err)
	}
	return req, text[max(0, len(text)-promptTail):], nil
}

// ollamaImageContent writes an Ollama message's text and images (base64
// strings, as its api.ImageData marshals) as OpenAI content parts, the
// images first, as Ollama puts them before the text; an image's type is
// read from its first bytes (Ollama sends none).
func ollamaImageContent(text string, images []json.RawMessage) (json.RawMessage, error) {
	parts := make([]map[string]any, 0, len(images)+1)
	for j, raw := range images {
		var data string
		if err := json.Unmarshal(raw, &data); err != nil {
			return nil, fmt.Errorf("images[%d]: must be a base64 string", j)
		}
		mime := "application/octet-stream"
		switch {
		case strings.HasPrefix(data, "iVBORw0KGgo"):
			mime = "image/png"
		case strings.HasPrefix(data, "/9j/"):
			mime = "image/jpeg"
		case strings.HasPrefix(data, "R0lGOD"):
			mime = "image/gif"
		}
		parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]string{"url": "data:" + mime + ";base64," + data}})
	}
	parts = append(parts, map[string]any{"type": "text", "text": text})
	return json.Marshal(parts)
}
