//go:build llamacpp_external

package cgo

// An installed llama.cpp (make LLAMA_CPP=DIR) carries no multimodal
// library: cmake --install of llama.cpp installs libllama and ggml, not
// tools/mtmd. So with the external engine there is no projector: the types
// of mtmd.go exist, MtmdAvailable is false, and llamacpp.LoadProjector
// refuses before anything here is called. Every function answers as the C
// library does for a NULL context.

// MtmdAvailable reports whether llama.cpp's multimodal library is linked.
const MtmdAvailable = false

// Mtmd stands for an mtmd_context pointer; it is always NULL here.
type Mtmd struct{}

// Nil reports whether m is NULL: always.
func (m Mtmd) Nil() bool { return true }

// MtmdParams are the fields of mtmd_context_params that llamaloop sets.
type MtmdParams struct {
	UseGPU      bool
	NThreads    int32
	MediaMarker string
	Warmup      bool
}

// MtmdDefaultMarker is mtmd's default media marker.
func MtmdDefaultMarker() string { return "<__media__>" }

// MtmdLogInstall does nothing: there is no library to log.
func MtmdLogInstall() {}

// MtmdInitFromFile returns NULL: there is no library to load the file.
func MtmdInitFromFile(path string, model Model, p MtmdParams) Mtmd { return Mtmd{} }

// Free does nothing (NULL).
func (m Mtmd) Free() {}

// UseNonCausal is false (NULL).
func (m Mtmd) UseNonCausal() bool { return false }

// UseMRoPE is false (NULL).
func (m Mtmd) UseMRoPE() bool { return false }

// SupportVision is false (NULL).
func (m Mtmd) SupportVision() bool { return false }

// SupportAudio is false (NULL).
func (m Mtmd) SupportAudio() bool { return false }

// AudioBitrate is -1 (NULL).
func (m Mtmd) AudioBitrate() int { return -1 }

// Bitmap stands for an mtmd_bitmap pointer; always NULL here.
type Bitmap struct{}

// Nil reports whether b is NULL: always.
func (b Bitmap) Nil() bool { return true }

// BitmapInit returns NULL.
func BitmapInit(nx, ny uint32, rgb []byte) Bitmap { return Bitmap{} }

// BitmapInitFromAudio returns NULL.
func BitmapInitFromAudio(samples []float32) Bitmap { return Bitmap{} }

// SetID does nothing (NULL).
func (b Bitmap) SetID(id string) {}

// Free does nothing (NULL).
func (b Bitmap) Free() {}

// Chunks stands for an mtmd_input_chunks pointer; always NULL here.
type Chunks struct{}

// Nil reports whether c is NULL: always.
func (c Chunks) Nil() bool { return true }

// ChunksInit returns NULL.
func ChunksInit() Chunks { return Chunks{} }

// Free does nothing (NULL).
func (c Chunks) Free() {}

// Size is 0 (NULL).
func (c Chunks) Size() int { return 0 }

// Chunk stands for an mtmd_input_chunk pointer; always NULL here.
type Chunk struct{}

// Get returns NULL.
func (c Chunks) Get(i int) Chunk { return Chunk{} }

// Chunk types (enum mtmd_input_chunk_type).
const (
	ChunkText = iota
	ChunkImage
	ChunkAudio
)

// Type is ChunkText (NULL).
func (ch Chunk) Type() int { return ChunkText }

// TextTokens returns dst (NULL).
func (ch Chunk) TextTokens(dst []int32) []int32 { return dst }

// NTokens is 0 (NULL).
func (ch Chunk) NTokens() int { return 0 }

// NPos is 0 (NULL).
func (ch Chunk) NPos() int { return 0 }

// ID is "" (NULL).
func (ch Chunk) ID() string { return "" }

// ImageGrid is 0, 0 (NULL).
func (ch Chunk) ImageGrid() (nx, ny int) { return 0, 0 }

// Tokenize fails (-1): there is no library.
func (m Mtmd) Tokenize(out Chunks, text string, addSpecial, parseSpecial bool, bitmaps []Bitmap) int32 {
	return -1
}

// EncodeChunk fails (-1): there is no library.
func (m Mtmd) EncodeChunk(ch Chunk) int32 { return -1 }

// OutputEmbd is nil (NULL).
func (m Mtmd) OutputEmbd(n int) []float32 { return nil }
