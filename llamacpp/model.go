package llamacpp

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	rcgo "runtime/cgo"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/llamaloop/llamaloop/cgo"
)

// ModelParams configure LoadModel. The zero value loads every weight into
// CPU memory through mmap.
type ModelParams struct {
	// GPULayers is the number of layers to offload to a GPU backend; -1
	// offloads all of them. Without a GPU backend it is ignored.
	GPULayers int
	// NoMmap reads the weights into memory instead of mapping the file.
	NoMmap bool
	// Mlock keeps the weights resident in RAM.
	Mlock bool
	// VocabOnly loads only the vocabulary and metadata; such a model cannot
	// create contexts.
	VocabOnly bool
	// CheckTensors validates tensor data while loading (slow).
	CheckTensors bool
	// AllowUnknownPreTokenizer accepts a BPE vocabulary whose
	// tokenizer.ggml.pre is missing or unknown to the pinned llama.cpp.
	// LoadModel refuses such a model by default because llama.cpp then splits
	// text with its "default" pre-tokenizer, so the model tokenizes text
	// differently from the tokenizer it was trained with. A llama.cpp after
	// the pin (the external engine's master) refuses an unknown one itself
	// and falls back only for a missing one: there the option accepts only
	// that.
	AllowUnknownPreTokenizer bool
	// Progress, when set, receives the loading progress in [0, 1]; returning
	// false cancels the load.
	Progress func(progress float32) bool
}

// Model is a loaded GGUF model. It is safe for concurrent use; contexts
// created from it are not.
type Model struct {
	mu       sync.Mutex
	c        cgo.Model
	path     string
	contexts int
	closing  bool
	// vocabOnly models have no weights and cannot create contexts
	vocabOnly bool
	// unsupported says why contexts of this model would misbehave in
	// llama.cpp (e.g. an encoder), empty when they are fine
	unsupported string
	ropeType    int
	// encoder: the model has an encoder (Context.Encode); decStart is its
	// decoder_start_token_id as llama.cpp read it (-1: none)
	encoder  bool
	decStart int32
	// live guards the C model against its free: Vocab calls hold it for
	// reading, free holds it for writing, so a Close waits for the
	// vocabulary calls in flight and later ones see freed
	live    sync.RWMutex
	freed   atomic.Bool
	cleanup runtime.Cleanup
	vocab   *Vocab
	info    ModelInfo
	// kv sizes a context's KV cache; kv.known is false where llamaloop
	// cannot bound it from below (recurrent state, sliding windows,
	// compressed attention) or where it may live on a GPU
	kv kvShape
	// native is the C memory the model accounts in NativeMemory
	native int64
	// warnings llama.cpp logged while loading the model
	warnings []string
}

// kvShape is what a context's KV cache costs per cell: per layer, the
// widths of a cached key and value.
type kvShape struct {
	known        bool
	layers       int
	kWidth       int // key_length × n_head_kv
	vWidth       int // value_length × n_head_kv
	heads, vocab int
}

// ModelInfo describes a loaded model. A vocabulary-only model has only Path,
// Architecture and VocabSize.
type ModelInfo struct {
	Path         string
	Architecture string // general.architecture, e.g. "llama"
	Description  string // llama.cpp's one-line description, e.g. "llama 1B Q8_0"
	Size         uint64 // bytes of weights
	Params       uint64 // number of parameters
	CtxTrain     int    // n_ctx_train
	Embd         int    // n_embd
	Layers       int    // n_layer
	Heads        int    // n_head
	HeadsKV      int    // n_head_kv
	VocabSize    int
}

func init() {
	cgo.SetProgressHandler(func(h uintptr, p float32) (ok bool) {
		// A panic must not unwind through llama.cpp's C++ frames: it
		// cancels the load instead.
		defer func() {
			if recover() != nil {
				ok = false
			}
		}()
		return rcgo.Handle(h).Value().(func(float32) bool)(p)
	})
	cgo.SetCaptureHandler(func(h uintptr, text string) {
		defer func() { _ = recover() }() // never unwind through C frames
		rcgo.Handle(h).Value().(*loadLog).add(text)
	})
}

// loadLog collects what llama.cpp logs at warning level or above while it
// loads a model.
type loadLog struct {
	mu   sync.Mutex
	text strings.Builder
}

func (l *loadLog) add(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.text.Len() < 1<<16 { // a corrupt vocabulary could warn per token
		l.text.WriteString(text)
	}
}

// lines splits the log into its non-empty lines.
func (l *loadLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.Lines(l.text.String()) {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// bidirectional are the architectures that llama.cpp's load_hparams makes
// non-causal without an attention.causal key and that llamaloop still
// gives a context (the diffusion ones it does not): their batches must fit
// one micro-batch.
var bidirectional = map[string]bool{"gemma-embedding": true}

// uncheckedForTests makes LoadModel pass a file it refuses to llama.cpp:
// only the test binary sets it, in a child process, to show that a crash
// kind still crashes without its check.
var uncheckedForTests bool

// LoadModel loads a GGUF model file. A missing, unreadable, non-GGUF or
// truncated file gives an error wrapping ErrLoad that names the problem, and
// so does a file with metadata llama.cpp would crash on (LoadModel reads the
// header itself first, in milliseconds), naming the key or tensor.
func LoadModel(path string, p ModelParams) (*Model, error) {
	initialize()
	if err := validateModel(path, p, true); err != nil && !uncheckedForTests {
		return nil, err
	}
	mp := cgo.DefaultModelParams()
	mp.NGPULayers = int32(p.GPULayers)
	if p.GPULayers < 0 {
		mp.NGPULayers = 999
	}
	mp.UseMmap = !p.NoMmap
	mp.UseMlock = p.Mlock
	mp.VocabOnly = p.VocabOnly
	mp.CheckTensors = p.CheckTensors
	var handle uintptr
	if p.Progress != nil {
		h := rcgo.NewHandle(p.Progress)
		defer h.Delete()
		handle = uintptr(h)
	}
	var logged loadLog
	capture := rcgo.NewHandle(&logged)
	defer capture.Delete()
	takeLastError()
	c := cgo.ModelLoadFromFile(path, mp, handle, uintptr(capture))
	if c.Nil() {
		detail := takeLastError()
		if detail == "" {
			detail = "llama.cpp refused the file"
		}
		return nil, fmt.Errorf("%w %s: %s", ErrLoad, path, detail)
	}
	m := &Model{c: c, path: path, vocabOnly: p.VocabOnly, warnings: logged.lines()}
	m.vocab = newVocab(m, c.Vocab())
	m.info = ModelInfo{Path: path, VocabSize: m.vocab.n}
	m.info.Architecture, _ = c.MetaValStr("general.architecture")
	if !p.VocabOnly {
		// llama.cpp asserts on per-layer queries of a vocabulary-only model.
		m.info.Description, m.info.Size, m.info.Params = c.Desc(), c.Size(), c.NParams()
		m.info.CtxTrain, m.info.Embd, m.info.Layers = c.NCtxTrain(), c.NEmbd(), c.NLayer()
		m.info.Heads, m.info.HeadsKV = c.NHead(), c.NHeadKV()
		m.ropeType = c.RopeType()
		m.kv = readKVShape(c, m.info, p.GPULayers)
		causal, _ := c.MetaValStr(m.info.Architecture + ".attention.causal")
		switch reason := m.readEncoder(); {
		case reason != "":
			m.unsupported = reason
		case c.IsDiffusion() || causal == "false":
			m.unsupported = "non-causal models are not supported (llamaloop generates with causal models)"
		}
	}
	// A cleanup, not a finalizer: the model and its vocabulary point at each
	// other, and finalizers never run on cycles.
	m.native = int64(m.info.Size)
	nativeAlloc(m.native)
	m.cleanup = runtime.AddCleanup(m, func(r modelResources) {
		r.c.Free()
		nativeFree(r.native)
	}, modelResources{c, m.native})
	return m, nil
}

// modelResources is what a forgotten Model's cleanup frees.
type modelResources struct {
	c      cgo.Model
	native int64
}

// checkGGUF gives clear errors for the common mistakes (a folder, a file of
// another kind) before the GGUF reader parses the header.
func checkGGUF(f io.Reader, st os.FileInfo, path string) error {
	if st.IsDir() {
		return fmt.Errorf("%w %s: is a directory", ErrLoad, path)
	}
	var head [8]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return fmt.Errorf("%w %s: not a GGUF file (%d bytes)", ErrLoad, path, st.Size())
	}
	if !bytes.Equal(head[:4], []byte("GGUF")) {
		return fmt.Errorf("%w %s: not a GGUF file (magic %q)", ErrLoad, path, head[:4])
	}
	return nil
}

// Warnings are the warnings (and errors) that llama.cpp logged while it
// loaded the model, one line each, in order, e.g. "load: missing or
// unrecognized pre-tokenizer type, using: 'default'" for a model accepted
// with AllowUnknownPreTokenizer. They are kept whatever SetLogger says.
func (m *Model) Warnings() []string { return slices.Clone(m.warnings) }

// Info describes the model.
func (m *Model) Info() ModelInfo { return m.info }

// Vocab is the model's vocabulary; it lives as long as the model.
func (m *Model) Vocab() *Vocab { return m.vocab }

// Metadata returns every GGUF key/value llama.cpp exposes as a string
// (arrays are not included).
func (m *Model) Metadata() (map[string]string, error) {
	if err := m.acquire(); err != nil {
		return nil, err
	}
	defer m.release()
	n := m.c.MetaCount()
	out := make(map[string]string, n)
	for i := range n {
		k, ok1 := m.c.MetaKeyByIndex(i)
		v, ok2 := m.c.MetaValStrByIndex(i)
		if ok1 && ok2 {
			out[k] = v
		}
	}
	return out, nil
}

// MetadataValue returns one GGUF value as a string.
func (m *Model) MetadataValue(key string) (string, bool) {
	// A key with a NUL would reach llama.cpp cut short, as another key.
	if strings.IndexByte(key, 0) >= 0 || m.acquire() != nil {
		return "", false
	}
	defer m.release()
	return m.c.MetaValStr(key)
}

// MetadataInt returns one integer GGUF value.
func (m *Model) MetadataInt(key string) (int64, bool) {
	s, ok := m.MetadataValue(key)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// ChatTemplate returns the model's chat template (tokenizer.chat_template),
// or the named variant; ok is false when the model has none.
func (m *Model) ChatTemplate(name string) (string, bool) {
	if strings.IndexByte(name, 0) >= 0 || m.acquire() != nil {
		return "", false
	}
	defer m.release()
	return m.c.ChatTemplate(name)
}

// Close frees the model once every context created from it is closed. It is
// idempotent.
func (m *Model) Close() error {
	m.mu.Lock()
	m.closing = true
	free := m.contexts == 0
	m.mu.Unlock()
	if free {
		m.free()
	}
	return nil
}

// cannotGenerate says why the model cannot get a context, or "".
func (m *Model) cannotGenerate() string { return m.unsupported }

// canShift reports whether llama.cpp can shift this model's positions
// (multi-section RoPE asserts in seq_add and seq_div).
func (m *Model) canShift() bool { return m.ropeType < 0 || m.ropeType&8 == 0 }

func (m *Model) free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.c.Nil() {
		m.live.Lock()
		m.freed.Store(true)
		m.live.Unlock()
		m.c.Free()
		m.c = cgo.Model{}
		m.cleanup.Stop()
		nativeFree(m.native)
	}
}

// acquire guards a C call against a concurrent Close.
func (m *Model) acquire() error {
	m.mu.Lock()
	if m.c.Nil() || m.closing {
		m.mu.Unlock()
		return fmt.Errorf("model %s: %w", m.path, ErrClosed)
	}
	return nil
}

func (m *Model) release() { m.mu.Unlock() }

// attach and detach count the contexts that keep the model alive.
func (m *Model) attach() error {
	if err := m.acquire(); err != nil {
		return err
	}
	m.contexts++
	m.release()
	return nil
}

func (m *Model) detach() {
	m.mu.Lock()
	m.contexts--
	free := m.contexts == 0 && m.closing
	m.mu.Unlock()
	if free {
		m.free()
	}
}

// FileType is a GGUF weight encoding for Quantize.
type FileType int

// File types accepted by Quantize.
const (
	F32  FileType = FileType(cgo.FtypeF32)
	F16  FileType = FileType(cgo.FtypeF16)
	Q8_0 FileType = FileType(cgo.FtypeQ8_0)
	Q4_0 FileType = FileType(cgo.FtypeQ4_0)
	// Q4_K_M is llama.cpp's usual 4-bit K-quant mix: q4_K for most weights,
	// q6_K for half of the attention value and feed-forward down weights.
	Q4_K_M FileType = FileType(cgo.FtypeQ4KM)
)

// Quantize converts the GGUF model at in to out with llama.cpp's own
// quantizer (llama_model_quantize), using threads threads (0: all cores).
func Quantize(in, out string, ft FileType, threads int) error {
	initialize()
	if err := validateModel(in, ModelParams{}, false); err != nil {
		return err
	}
	if strings.IndexByte(out, 0) >= 0 {
		return invalid("quantize output path %q contains a NUL byte", out)
	}
	if si, err := os.Stat(in); err == nil {
		if so, err := os.Stat(out); err == nil && os.SameFile(si, so) {
			return invalid("quantize %s onto itself", in)
		}
	}
	switch ft {
	case F32, F16, Q8_0, Q4_0, Q4_K_M:
	default:
		return invalid("file type %d", ft)
	}
	takeLastError()
	if rc := cgo.Quantize(in, out, int(ft), threads); rc != 0 {
		return fmt.Errorf("llamacpp: quantize %s: %s", in, takeLastError())
	}
	return nil
}
