// Package llamaloop runs GGUF models with llama.cpp from Go, for the common
// cases in a few lines: open a model, generate or stream text, chat, search
// with beams, constrain the output to a JSON Schema or a GBNF grammar, and
// compute embeddings.
//
//	m, err := llamaloop.Open("model.gguf", llamaloop.Options{})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer m.Close()
//	for text, err := range m.Stream(ctx, "Once upon a time", llamaloop.GenerateOptions{MaxNewTokens: 64}) {
//		if err != nil {
//			log.Fatal(err)
//		}
//		fmt.Print(text)
//	}
//
// Decoding follows Hugging Face transformers' generate(), configured by a
// [genconfig.Config] or a model's generation_config.json
// (GenerateOptions.Config, GenerateOptions.ConfigFile): greedy unless the
// config samples, 20 new tokens unless it says otherwise.
//
// The package is a thin layer over the project's packages, and hides
// nothing they offer: [Model.Llama], [Model.Context], [Model.Backend],
// [Model.Generator] and [Model.Tokenizer] return the objects it drives, for
// what the options here do not cover (batches of requests, log
// probabilities, Mirostat, speculative decoding, an Engine for concurrent
// requests). Packages llamacpp (models, contexts, the KV cache),
// generation (the decoding loop), beam, grammar, genconfig and logits are
// the way to full control.
//
// Building needs cgo and llama.cpp's include paths: run
// `eval "$(make -s -C path/to/llamaloop env)"` before go build, go test or
// go run (see the module's README).
package llamaloop

import (
	"errors"
	"fmt"
	"sync"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/grammar"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
)

// DefaultContextSize is the context size (KV cells) Open uses when
// Options.Context.ContextSize is 0, or the model's training length when
// that is smaller.
const DefaultContextSize = 4096

// ErrBusy reports a call on a Model while another call of the same Model
// runs (a Model runs one call at a time), for instance a call made inside
// the loop of a Stream.
var ErrBusy = errors.New("llamaloop: the model is busy with another call (a Model runs one call at a time: finish or break out of a Stream's loop first, or open another Model)")

// Message is one message of a chat: a role ("system", "user",
// "assistant") and its content.
type Message = backend.Message

// Options configure Open.
type Options struct {
	// Model configures the loading of the weights (GPU layers, mmap).
	Model llamacpp.ModelParams
	// Context configures the context that generation and chat decode in:
	// ContextSize (default DefaultContextSize, at most the model's training
	// length), Threads, Sequences, the KV cache type, flash attention.
	// Embeddings opens an embeddings context instead, for Embed; such a
	// Model does not generate. Beam search makes a context of its own per
	// call, with these threads, cache type and flash attention.
	Context llamacpp.ContextParams
	// ChatTemplate replaces the model's chat template for Chat: a
	// template's text or the name of one that llama.cpp knows ("chatml",
	// "llama3", "mistral-v7", ...).
	ChatTemplate string
}

// Model is a loaded model with its context. A Model runs one call at a
// time (another call meanwhile returns ErrBusy); Close frees it.
type Model struct {
	mu     sync.Mutex
	closed bool
	opts   Options
	model  *llamacpp.Model
	ctx    *llamacpp.Context
	lb     *llamabackend.Backend // nil for an embeddings context
	gen    *generation.Generator
	tok    llamabackend.Tokenizer
	batch  *llamacpp.Batch // Embed's batch, made on first use

	vocabOnce sync.Once
	vocab     *grammar.Vocabulary // the grammar vocabulary, made on first use
	vocabErr  error
}

// Open loads the GGUF model at path and makes its context.
func Open(path string, o Options) (*Model, error) {
	model, err := llamacpp.LoadModel(path, o.Model)
	if err != nil {
		return nil, fmt.Errorf("llamaloop: %w", err)
	}
	m := &Model{opts: o, model: model, tok: llamabackend.Tokenizer{Vocab: model.Vocab(), Template: o.ChatTemplate}}
	if err := m.open(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// open makes the model's context and, unless it is an embeddings context,
// its backend and generator.
func (m *Model) open() error {
	p := m.opts.Context
	if p.ContextSize == 0 {
		p.ContextSize = DefaultContextSize
		if t := m.model.Info().CtxTrain; t > 0 {
			p.ContextSize = min(p.ContextSize, t)
		}
	}
	if m.model.HasEncoder() && p.Sequences > 1 {
		p.UnifiedKV = true // llama.cpp's t5 decoder has one KV stream
	}
	ctx, err := m.model.NewContext(p)
	if err != nil {
		return fmt.Errorf("llamaloop: context (Options.Context): %w", err)
	}
	m.ctx = ctx
	if p.Embeddings {
		return nil
	}
	var b backend.Backend
	if b, m.lb, err = newBackend(m.model, ctx); err != nil {
		return fmt.Errorf("llamaloop: %w", err)
	}
	m.gen = generation.NewGenerator(b, m.tok)
	return nil
}

// newBackend makes the llama.cpp backend of ctx: what the decoding loop
// and beam search get (an EncoderDecoder for a model with an encoder), and
// the Backend under it.
func newBackend(model *llamacpp.Model, ctx *llamacpp.Context) (backend.Backend, *llamabackend.Backend, error) {
	if !model.HasEncoder() {
		lb, err := llamabackend.New(ctx)
		return lb, lb, err
	}
	e, err := llamabackend.NewEncoderDecoder(ctx)
	if err != nil {
		return nil, nil, err
	}
	return e, e.Backend, nil
}

// Close frees the model, its context and its buffers. It is idempotent.
// While another call of the Model runs (inside a Stream's loop, for
// instance) it frees nothing and returns ErrBusy.
func (m *Model) Close() error {
	if !m.mu.TryLock() {
		return ErrBusy
	}
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	if m.lb != nil {
		errs = append(errs, m.lb.Close())
	}
	if m.batch != nil {
		errs = append(errs, m.batch.Close())
	}
	if m.ctx != nil {
		errs = append(errs, m.ctx.Close())
	}
	if m.model != nil {
		errs = append(errs, m.model.Close())
	}
	return errors.Join(errs...)
}

// Llama returns the llama.cpp model: its vocabulary (Llama().Vocab()),
// metadata, chat template and description.
func (m *Model) Llama() *llamacpp.Model { return m.model }

// Context returns the llama.cpp context that generation, chat and
// embeddings run in.
func (m *Model) Context() *llamacpp.Context { return m.ctx }

// Backend returns the backend.Backend over Context that Generator decodes
// with (nil for a Model opened with Options.Context.Embeddings); package
// beam searches on such a backend.
func (m *Model) Backend() *llamabackend.Backend { return m.lb }

// Generator returns the decoding loop that Generate, Stream and Chat run
// (nil for a Model opened with Options.Context.Embeddings): give it
// several generation.Request at once for a batch, or ask for log
// probabilities, Mirostat or speculative decoding.
func (m *Model) Generator() *generation.Generator { return m.gen }

// Tokenizer returns the model's tokenizer, with Options.ChatTemplate.
func (m *Model) Tokenizer() llamabackend.Tokenizer { return m.tok }

// lock takes the Model for one call, or returns ErrBusy.
func (m *Model) lock() error {
	if !m.mu.TryLock() {
		return ErrBusy
	}
	if m.closed {
		m.mu.Unlock()
		return errors.New("llamaloop: the model is closed")
	}
	return nil
}

// generator returns the Generator, or an error saying why this Model has
// none.
func (m *Model) generator() (*generation.Generator, error) {
	if m.gen == nil {
		return nil, errors.New("llamaloop: the model was opened for embeddings (Options.Context.Embeddings): open it again without them to generate")
	}
	return m.gen, nil
}
