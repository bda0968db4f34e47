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
	return newSampler(cgo.SamplerChain(p.PenaltyLastN, p.RepeatPenalty, p.TopK, p.TopP, p.Temperature, p.Seed), width), nil
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
