// Package nativesampler wraps llama.cpp's own samplers (greedy, its usual
// chat chain, Mirostat v1 and v2) over logits rows that the caller provides.
//
// llamaloop chooses every token in Go; this package exists only so that
// benchmarks (llamabench, and the side-by-side benchmarks here) can put
// llama.cpp's samplers beside ours on the same rows. That is why it is
// internal: nothing in the public API depends on it, and its settings are
// the few those benchmarks need.
package nativesampler

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/llamaloop/llamaloop/cgo"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// initialize has llamacpp set up llama.cpp (its log routing and backends)
// before the first sampler exists, as llamacpp does before its own first C
// call; SystemInfo is its cheapest entry point that does so.
var initialize = sync.OnceFunc(func() { _ = llamacpp.SystemInfo() })

// invalid wraps llamacpp.ErrInvalidArgument, so that callers test one
// sentinel whichever package refused the argument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{llamacpp.ErrInvalidArgument}, args...)...)
}

// Sampler is one of llama.cpp's own sampler chains, applied to logits rows
// that the caller provides. It is not safe for concurrent use.
type Sampler struct {
	s       cgo.Sampler
	scratch unsafe.Pointer // llama_token_data[width], reused per row
	width   int
}

// ChainParams are the settings of llama.cpp's typical chat chain:
// penalties over the last PenaltyLastN tokens (skipped when 0), top-k, top-p,
// temperature, then a seeded draw.
type ChainParams struct {
	PenaltyLastN  int
	RepeatPenalty float32
	TopK          int
	TopP          float32
	Temperature   float32
	Seed          uint32
}

// NewChain builds llama.cpp's sampler chain for rows of width tokens.
func NewChain(width int, p ChainParams) (*Sampler, error) {
	initialize()
	if width < 1 {
		return nil, invalid("width %d", width)
	}
	return newSampler(cgo.SamplerChain(width, p.PenaltyLastN, p.RepeatPenalty, p.TopK, p.TopP, p.Temperature, p.Seed), width), nil
}

// NewGreedy builds llama.cpp's greedy sampler for rows of width tokens.
func NewGreedy(width int) (*Sampler, error) {
	initialize()
	if width < 1 {
		return nil, invalid("width %d", width)
	}
	return newSampler(cgo.SamplerGreedy(), width), nil
}

// NewMirostat builds llama.cpp's Mirostat sampler: version 1 (with m
// candidates for the Zipf estimate) or 2.
func NewMirostat(width, version int, tau, eta float32, m int, seed uint32) (*Sampler, error) {
	initialize()
	if width < 1 || tau <= 0 || eta <= 0 {
		return nil, invalid("mirostat width %d, tau %g, eta %g", width, tau, eta)
	}
	switch version {
	case 1:
		if m < 1 {
			return nil, invalid("mirostat m %d", m)
		}
		return newSampler(cgo.SamplerMirostat(width, seed, tau, eta, m), width), nil
	case 2:
		return newSampler(cgo.SamplerMirostatV2(seed, tau, eta), width), nil
	}
	return nil, invalid("mirostat version %d", version)
}

func newSampler(s cgo.Sampler, width int) *Sampler {
	n := &Sampler{s: s, width: width, scratch: cgo.CMalloc(width * cgo.TokenData)}
	runtime.SetFinalizer(n, func(n *Sampler) { n.Close() })
	return n
}

// Sample builds llama.cpp's candidate array from row (as
// llama_sampler_sample does), applies the sampler, accepts the chosen token
// and returns it; -1 when the sampler selected nothing.
func (n *Sampler) Sample(row []float32) (int32, error) {
	if n.scratch == nil {
		return -1, llamacpp.ErrClosed
	}
	if len(row) != n.width {
		return -1, invalid("row of %d logits for a sampler of width %d", len(row), n.width)
	}
	return n.s.SampleRow(row, n.scratch), nil
}

// Accept tells the sampler about a token chosen elsewhere (penalty history).
func (n *Sampler) Accept(token int32) {
	if n.scratch != nil && token >= 0 && int(token) < n.width {
		n.s.Accept(token)
	}
}

// Close frees the sampler; it is idempotent.
func (n *Sampler) Close() error {
	if n.scratch != nil {
		n.s.Free()
		cgo.CFree(n.scratch)
		n.scratch = nil
		runtime.SetFinalizer(n, nil)
	}
	return nil
}

// Grammar is llama.cpp's grammar sampler over the vocabulary of a model
// file, for the side-by-side benchmarks of package grammar. It holds its own
// vocabulary-only load of the model.
type Grammar struct {
	model cgo.Model
	*Sampler
}

// NewGrammar loads the vocabulary of the GGUF model at path and builds
// llama.cpp's sampler for the GBNF text grammar (start rule "root"). Mask
// applies it to a row; Accept advances it by a chosen token.
func NewGrammar(path, grammar string) (*Grammar, error) {
	initialize()
	mp := cgo.DefaultModelParams()
	mp.VocabOnly = true
	m := cgo.ModelLoadFromFile(path, mp, 0, 0)
	if m.Nil() {
		return nil, invalid("cannot load the vocabulary of %s", path)
	}
	s := cgo.SamplerGrammar(m.Vocab(), grammar, "root")
	if s.Nil() {
		m.Free()
		return nil, invalid("llama.cpp refused the grammar")
	}
	return &Grammar{model: m, Sampler: newSampler(s, m.Vocab().NTokens())}, nil
}

// Mask builds llama.cpp's candidate array from row and applies the grammar
// to it (llama.cpp sets the disallowed candidates to -inf in its own array;
// row is not changed). It selects and accepts nothing.
func (g *Grammar) Mask(row []float32) error {
	if g.scratch == nil {
		return llamacpp.ErrClosed
	}
	if len(row) != g.width {
		return invalid("row of %d logits for a sampler of width %d", len(row), g.width)
	}
	g.s.SampleRow(row, g.scratch) // a lone grammar sampler selects nothing: -1
	return nil
}

// Reset returns the grammar to its start, as llama_sampler_reset does.
func (g *Grammar) Reset() {
	if g.scratch != nil {
		g.s.Reset()
	}
}

// Close frees the sampler and the vocabulary; it is idempotent.
func (g *Grammar) Close() error {
	if g.Sampler.scratch != nil {
		g.Sampler.Close()
		g.model.Free()
	}
	return nil
}
