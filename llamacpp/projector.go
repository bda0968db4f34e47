package llamacpp

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/cgo"
)

// A Projector is llama.cpp's multimodal library (mtmd) loaded from a
// projector GGUF (an "mmproj" file: a vision and/or audio encoder and the
// projector into the text model's input embeddings) beside a Model. It
// splits a prompt holding media markers into text and media chunks
// (Tokenize) and encodes a media chunk to input embeddings (Encode). It is
// safe for concurrent use; encodes run one at a time.
type Projector struct {
	mu    sync.Mutex
	c     cgo.Mtmd
	model *Model
	path  string
	info  ProjectorInfo

	cleanup runtime.Cleanup
}

// ProjectorInfo describes a loaded projector.
type ProjectorInfo struct {
	Path       string
	Vision     bool // takes images
	Audio      bool // takes audio
	SampleRate int  // of the PCM audio it takes (Hz); 0 without audio
	// MRoPE: the text model wants four position planes per embedding
	// (Qwen2-VL family); see Chunk.Positions.
	MRoPE bool
	// NonCausal: llama.cpp's helper decodes a medium's embeddings with
	// causal attention off (Gemma 3); see Prompt.NonCausal.
	NonCausal bool
	Width     int    // of an embedding: the text model's input width
	Marker    string // the media marker of prompts
}

// ProjectorParams configure LoadProjector.
type ProjectorParams struct {
	// Threads of the encoder; 0 means the number of CPUs.
	Threads int
	// GPU runs the encoder on a GPU backend when one is compiled in.
	GPU bool
	// MediaMarker is the text standing for a medium in prompts; ""
	// means DefaultMediaMarker.
	MediaMarker string
}

// DefaultMediaMarker is llama.cpp's media marker (mtmd_default_marker).
const DefaultMediaMarker = "<__media__>"

// ErrProjector wraps every refusal of a projector file.
var ErrProjector = errors.New("llamacpp: cannot load projector")

// LoadProjector loads the projector GGUF at path for model m. The file is
// checked first (validateProjector: a readable GGUF of architecture clip,
// its projector type, the encoders' hyperparameters and tensors) so that a
// malformed file gives an error wrapping ErrProjector, not a crash in clip.
// The model must stay open until the projector is closed (the projector
// keeps it alive as a context does).
func LoadProjector(path string, m *Model, p ProjectorParams) (*Projector, error) {
	initialize()
	mtmdLogOnce.Do(cgo.MtmdLogInstall)
	if m == nil {
		return nil, invalid("LoadProjector: nil model")
	}
	if !cgo.MtmdAvailable {
		return nil, fmt.Errorf("%w %s: this llamaloop is built against an installed llama.cpp (%s), which carries no multimodal library (libmtmd); projectors need the default engine", ErrProjector, path, cgo.Engine)
	}
	if m.vocabOnly {
		return nil, invalid("LoadProjector: model %s is loaded for its vocabulary only", m.path)
	}
	if p.Threads < 0 || p.Threads > 4096 {
		return nil, invalid("projector threads %d outside [0, 4096]", p.Threads)
	}
	marker := p.MediaMarker
	if marker == "" {
		marker = DefaultMediaMarker
	}
	if strings.IndexByte(marker, 0) >= 0 || len(marker) > 256 {
		return nil, invalid("media marker %q: a NUL byte or over 256 bytes", marker)
	}
	if err := validateProjector(path); err != nil {
		return nil, err
	}
	if err := m.attach(); err != nil {
		return nil, err
	}
	threads := p.Threads
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	if err := m.acquire(); err != nil {
		m.detach()
		return nil, err
	}
	c := cgo.MtmdInitFromFile(path, m.c, cgo.MtmdParams{UseGPU: p.GPU, NThreads: int32(threads), MediaMarker: marker})
	width := m.c.NEmbdInp()
	m.release()
	if c.Nil() {
		m.detach()
		return nil, fmt.Errorf("%w %s: llama.cpp's clip refused the file (its log says why)", ErrProjector, path)
	}
	pr := &Projector{c: c, model: m, path: path}
	pr.info = ProjectorInfo{Path: path, Vision: c.SupportVision(), Audio: c.SupportAudio(),
		MRoPE: c.UseMRoPE(), NonCausal: c.UseNonCausal(), Width: width, Marker: marker}
	if pr.info.Audio {
		pr.info.SampleRate = c.AudioBitrate()
	}
	pr.cleanup = runtime.AddCleanup(pr, func(r projectorResources) {
		r.c.Free()
		r.m.detach()
	}, projectorResources{c, m})
	return pr, nil
}

// mtmdLogOnce routes clip's and mtmd's own logger to llamaloop's (SetLogger).
var mtmdLogOnce sync.Once

type projectorResources struct {
	c cgo.Mtmd
	m *Model
}

// Info describes the projector.
func (p *Projector) Info() ProjectorInfo { return p.info }

// Close frees the projector; Prompts tokenized by it stay valid for
// reading but no longer encode. It is idempotent.
func (p *Projector) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c.Nil() {
		return nil
	}
	p.cleanup.Stop()
	p.c.Free()
	p.c = cgo.Mtmd{}
	p.model.detach()
	return nil
}

// MediaKind is what a Media holds.
type MediaKind int

// Media kinds.
const (
	MediaImage MediaKind = iota + 1
	MediaAudio
)

func (k MediaKind) String() string {
	switch k {
	case MediaImage:
		return "image"
	case MediaAudio:
		return "audio"
	}
	return fmt.Sprintf("MediaKind(%d)", int(k))
}

// Media is an image or a sound for Tokenize: make it with ImageRGB,
// DecodeImage, AudioPCM or DecodeWAV.
type Media struct {
	Kind          MediaKind
	Width, Height int       // of an image
	RGB           []byte    // Width*Height*3 bytes, row-major, no padding
	PCM           []float32 // mono samples in [-1, 1] at the projector's rate
	SampleRate    int       // of PCM (Hz)
	// ID names the medium in the chunk (Chunk.ID), e.g. a hash of its
	// bytes for a prefix cache; "" means none.
	ID string
}

// Limits on media (each named in its error).
const (
	// MaxImagePixels bounds an image's width × height (64 Mpixel, 192 MiB of RGB).
	MaxImagePixels = 64 << 20
	// MaxAudioSamples bounds a sound's samples (one hour at 16 kHz).
	MaxAudioSamples = 3600 * 16000
)

// ImageRGB is an image of width × height from rgb (3 bytes a pixel,
// row-major), not copied.
func ImageRGB(width, height int, rgb []byte) (Media, error) {
	if width <= 0 || height <= 0 {
		return Media{}, invalid("image of %d×%d pixels", width, height)
	}
	if width > MaxImagePixels/height {
		return Media{}, invalid("image of %d×%d pixels is over MaxImagePixels (%d)", width, height, MaxImagePixels)
	}
	if len(rgb) != width*height*3 {
		return Media{}, invalid("image of %d×%d pixels with %d bytes of RGB, want %d", width, height, len(rgb), width*height*3)
	}
	return Media{Kind: MediaImage, Width: width, Height: height, RGB: rgb}, nil
}

// AudioPCM is a sound of mono float32 samples at sampleRate Hz, not copied.
func AudioPCM(samples []float32, sampleRate int) (Media, error) {
	if len(samples) == 0 {
		return Media{}, invalid("empty audio")
	}
	if len(samples) > MaxAudioSamples {
		return Media{}, invalid("audio of %d samples is over MaxAudioSamples (%d)", len(samples), MaxAudioSamples)
	}
	if sampleRate <= 0 {
		return Media{}, invalid("audio sample rate %d", sampleRate)
	}
	return Media{Kind: MediaAudio, PCM: samples, SampleRate: sampleRate}, nil
}

// ChunkKind is what a Chunk holds.
type ChunkKind int

// Chunk kinds.
const (
	ChunkText ChunkKind = iota
	ChunkImage
	ChunkAudio
)

// A Chunk is a run of a tokenized prompt: text tokens, or a medium that
// Encode turns into NTokens input embeddings.
type Chunk struct {
	Kind   ChunkKind
	Tokens []int32 // of a text chunk
	// NTokens is the number of tokens (text) or embeddings (media).
	NTokens int
	// NPos is the number of positions the chunk takes: NTokens, except
	// for an M-RoPE image (its grid's larger side).
	NPos int
	// ID is the medium's Media.ID.
	ID string
	// GridX, GridY are an M-RoPE image's output grid (GridX*GridY ==
	// NTokens); 0 otherwise.
	GridX, GridY int
}

// Positions are the positions of the chunk's NTokens entries starting at
// start: one plane of NTokens for most models; with mrope four planes of
// NTokens each, laid out plane after plane as llama_batch.pos takes them
// (temporal, height, width, unused 0): an image keeps the temporal position
// start and walks its grid (row y, column x) in the next two, other chunks
// advance all three together.
func (c Chunk) Positions(start int32, mrope bool) []int32 {
	n := c.NTokens
	if !mrope {
		pos := make([]int32, n)
		for i := range pos {
			pos[i] = start + int32(i)
		}
		return pos
	}
	pos := make([]int32, 4*n)
	t, h, w := pos[:n], pos[n:2*n], pos[2*n:3*n]
	if c.Kind == ChunkImage && c.GridX > 0 && c.GridX*c.GridY == n {
		for y := range c.GridY {
			for x := range c.GridX {
				i := y*c.GridX + x
				t[i], h[i], w[i] = start, start+int32(y), start+int32(x)
			}
		}
		return pos
	}
	for i := range n {
		t[i], h[i], w[i] = start+int32(i), start+int32(i), start+int32(i)
	}
	return pos
}

// A Prompt is a tokenized prompt: its chunks in order. Close frees it.
type Prompt struct {
	Chunks []Chunk

	p  *Projector
	mu sync.Mutex
	c  cgo.Chunks

	cleanup runtime.Cleanup
}

// Close frees the prompt's C chunks; it is idempotent.
func (pr *Prompt) Close() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !pr.c.Nil() {
		pr.cleanup.Stop()
		pr.c.Free()
		pr.c = cgo.Chunks{}
	}
}

// TokenizeOptions are mtmd_input_text's flags.
type TokenizeOptions struct {
	AddSpecial   bool // add the model's BOS (and EOS) as its vocabulary says
	ParseSpecial bool // parse special tokens' text as those tokens
}

// Tokenize splits text at the projector's media markers and tokenizes it:
// the i-th marker stands for media[i] (a marker is appended per medium the
// text does not mark). Images need a projector with vision, sounds one
// with audio at its sample rate; what does not fit is refused.
func (p *Projector) Tokenize(text string, media []Media, o TokenizeOptions) (*Prompt, error) {
	for i, m := range media {
		switch m.Kind {
		case MediaImage:
			if !p.info.Vision {
				return nil, invalid("media[%d] is an image; projector %s has no vision encoder", i, p.path)
			}
			if _, err := ImageRGB(m.Width, m.Height, m.RGB); err != nil {
				return nil, fmt.Errorf("media[%d]: %w", i, err)
			}
		case MediaAudio:
			if !p.info.Audio {
				return nil, invalid("media[%d] is audio; projector %s has no audio encoder", i, p.path)
			}
			if _, err := AudioPCM(m.PCM, m.SampleRate); err != nil {
				return nil, fmt.Errorf("media[%d]: %w", i, err)
			}
			if m.SampleRate != p.info.SampleRate {
				return nil, invalid("media[%d]: audio at %d Hz; the projector takes %d Hz (resample it first)", i, m.SampleRate, p.info.SampleRate)
			}
		default:
			return nil, invalid("media[%d] of kind %v", i, m.Kind)
		}
	}
	if missing := len(media) - countMarkers(text, p.info.Marker); missing > 0 {
		for range missing {
			text += p.info.Marker
		}
	} else if missing < 0 {
		return nil, invalid("prompt has %d media markers %q for %d media", len(media)-missing, p.info.Marker, len(media))
	}
	if len(text) > maxTokenizeBytes {
		return nil, invalid("prompt of %d bytes is over %d", len(text), maxTokenizeBytes)
	}
	if i := strings.IndexByte(text, 0); i >= 0 {
		// mtmd takes a C string: the text would end there.
		return nil, invalid("prompt holds a NUL byte at %d", i)
	}
	for i, m := range media {
		if strings.IndexByte(m.ID, 0) >= 0 {
			return nil, invalid("media[%d]: ID holds a NUL byte", i)
		}
	}
	bitmaps := make([]cgo.Bitmap, 0, len(media))
	defer func() {
		for _, b := range bitmaps {
			b.Free()
		}
	}()
	for i, m := range media {
		var b cgo.Bitmap
		if m.Kind == MediaImage {
			b = cgo.BitmapInit(uint32(m.Width), uint32(m.Height), m.RGB)
		} else {
			b = cgo.BitmapInitFromAudio(m.PCM)
		}
		if b.Nil() {
			return nil, fmt.Errorf("%w: media[%d]: allocating the bitmap failed", ErrNoMemory, i)
		}
		bitmaps = append(bitmaps, b)
		if m.ID != "" {
			b.SetID(m.ID)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c.Nil() {
		return nil, fmt.Errorf("projector %s: %w", p.path, ErrClosed)
	}
	if err := p.model.acquire(); err != nil {
		return nil, err
	}
	out := cgo.ChunksInit()
	rc := p.c.Tokenize(out, text, o.AddSpecial, o.ParseSpecial, bitmaps)
	p.model.release()
	if rc != 0 {
		out.Free()
		if rc == 1 {
			return nil, invalid("the prompt's media markers do not match its %d media", len(media))
		}
		return nil, invalid("llama.cpp's mtmd could not preprocess the media (mtmd_tokenize returned %d)", rc)
	}
	pr := &Prompt{p: p, c: out}
	for i := range out.Size() {
		ch := out.Get(i)
		c := Chunk{NTokens: ch.NTokens(), NPos: ch.NPos(), ID: ch.ID()}
		switch ch.Type() {
		case cgo.ChunkText:
			c.Kind = ChunkText
			c.Tokens = ch.TextTokens(nil)
			c.ID = ""
		case cgo.ChunkImage:
			c.Kind = ChunkImage
			if p.info.MRoPE {
				c.GridX, c.GridY = ch.ImageGrid()
			}
		case cgo.ChunkAudio:
			c.Kind = ChunkAudio
		}
		pr.Chunks = append(pr.Chunks, c)
	}
	pr.cleanup = runtime.AddCleanup(pr, func(c cgo.Chunks) { c.Free() }, out)
	return pr, nil
}

// maxTokenizeBytes bounds a prompt's text (as Vocab.Tokenize does).
const maxTokenizeBytes = 64 << 20

func countMarkers(text, marker string) int {
	n := 0
	for i := 0; i+len(marker) <= len(text); {
		if text[i:i+len(marker)] == marker {
			n++
			i += len(marker)
		} else {
			i++
		}
	}
	return n
}

// Encode runs the encoder and projector on the prompt's media chunk i and
// returns its NTokens embeddings, each of Info().Width floats, in one
// slice (row t at [t*Width:(t+1)*Width]).
func (pr *Prompt) Encode(i int) ([]float32, error) {
	if i < 0 || i >= len(pr.Chunks) {
		return nil, invalid("chunk %d of %d", i, len(pr.Chunks))
	}
	if pr.Chunks[i].Kind == ChunkText {
		return nil, invalid("chunk %d is text: only media chunks encode", i)
	}
	p := pr.p
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.c.Nil() {
		return nil, fmt.Errorf("prompt: %w", ErrClosed)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c.Nil() {
		return nil, fmt.Errorf("projector %s: %w", p.path, ErrClosed)
	}
	n := pr.Chunks[i].NTokens * p.info.Width
	if err := checkMemory(uint64(4*n), fmt.Sprintf("embeddings of chunk %d (%d × %d)", i, pr.Chunks[i].NTokens, p.info.Width), ""); err != nil {
		return nil, err
	}
	if rc := p.c.EncodeChunk(pr.c.Get(i)); rc != 0 {
		return nil, fmt.Errorf("%w: encoding chunk %d failed (mtmd_encode_chunk returned %d)", ErrDecodeFailed, i, rc)
	}
	out := p.c.OutputEmbd(n)
	if out == nil {
		return nil, fmt.Errorf("%w: encoding chunk %d gave no embeddings", ErrDecodeFailed, i)
	}
	return append([]float32(nil), out...), nil
}

// ErrMRoPE refuses an image of an M-RoPE projector whose grid does not
// hold its embeddings (GridX × GridY != NTokens): Positions cannot place
// them as llama.cpp's helper would. None of the pinned llama.cpp's M-RoPE
// projectors (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4V) makes one.
var ErrMRoPE = errors.New("llamacpp: an M-RoPE image whose grid does not hold its embeddings")

// InputsOptions configure Prompt.Inputs.
type InputsOptions struct {
	// Placeholder is the token id standing for each embedding in the
	// token sequence (what processors see: transformers' image token id).
	Placeholder int32
}

// Inputs encodes the prompt's media and lays the prompt out as
// generation.Request takes it: a token per position (text tokens, and the
// placeholder for each embedding) and, per position, nil or the embedding
// that replaces the token. A projector with M-RoPE also needs Positions
// (generation.Request.PromptPositions), and a non-causal projector's media
// (Info().NonCausal, Gemma 3) their runs, NonCausal, as
// Request.PromptNonCausal.
func (pr *Prompt) Inputs(o InputsOptions) (tokens []int32, embd [][]float32, err error) {
	info := pr.p.info
	hasMedia := pr.hasMedia()
	if vs := pr.p.model.Vocab().Size(); o.Placeholder < 0 || int(o.Placeholder) >= vs {
		return nil, nil, invalid("placeholder token %d outside the vocabulary [0, %d)", o.Placeholder, vs)
	}
	for i, c := range pr.Chunks {
		if c.Kind == ChunkText {
			tokens = append(tokens, c.Tokens...)
			embd = append(embd, make([][]float32, len(c.Tokens))...)
			continue
		}
		flat, err := pr.Encode(i)
		if err != nil {
			return nil, nil, err
		}
		for t := range c.NTokens {
			tokens = append(tokens, o.Placeholder)
			embd = append(embd, flat[t*info.Width:(t+1)*info.Width:(t+1)*info.Width])
		}
	}
	if !hasMedia {
		embd = nil
	}
	return tokens, embd, nil
}

func (pr *Prompt) hasMedia() bool {
	for _, c := range pr.Chunks {
		if c.Kind != ChunkText {
			return true
		}
	}
	return false
}

// Positions are the positions of the entries of Inputs for a projector
// with M-RoPE (generation.Request.PromptPositions): a chunk starts at the
// position after the one before it, its start plus its NPos, and its
// entries are at Chunk.Positions (an image at one temporal position
// walking its grid; text and audio at one position in every plane), as
// llama.cpp's mtmd helper decodes them. They are nil, the entries'
// indices, for a projector without M-RoPE or a prompt without media. An
// image whose grid does not hold its embeddings is ErrMRoPE.
func (pr *Prompt) Positions() ([]backend.Pos, error) {
	if !pr.p.info.MRoPE || !pr.hasMedia() {
		return nil, nil
	}
	var out []backend.Pos
	start := int32(0)
	for i, c := range pr.Chunks {
		if c.Kind == ChunkImage && (c.GridX <= 0 || c.GridX*c.GridY != c.NTokens) {
			return nil, fmt.Errorf("%w: chunk %d: %d embeddings on a grid of %d×%d (projector %s)", ErrMRoPE, i, c.NTokens, c.GridX, c.GridY, pr.p.info.Path)
		}
		n := c.NTokens
		planes := c.Positions(start, true)
		for j := range n {
			out = append(out, backend.Pos{T: planes[j], H: planes[n+j], W: planes[2*n+j]})
		}
		start += int32(c.NPos)
	}
	return out, nil
}

// NonCausal are the runs of Inputs' positions that the prompt's media take
// when the projector's text model reads them non-causally (Info().NonCausal:
// Gemma 3, whose media llama.cpp's mtmd helper decodes with causal
// attention off), for generation.Request.PromptNonCausal; nil for other
// projectors and for prompts without media.
func (pr *Prompt) NonCausal() []backend.Span {
	if !pr.p.info.NonCausal {
		return nil
	}
	var runs []backend.Span
	pos := 0
	for _, c := range pr.Chunks {
		if c.Kind == ChunkText {
			pos += len(c.Tokens)
			continue
		}
		if c.NTokens > 0 {
			runs = append(runs, backend.Span{Start: pos, End: pos + c.NTokens})
		}
		pos += c.NTokens
	}
	return runs
}
