package llamacpp

import (
	"runtime"
	"unsafe"

	"github.com/llamaloop/llamaloop/cgo"
)

// NativeSampler is one of llama.cpp's own sampler chains, applied to logits
// rows that the caller provides. llamaloop chooses tokens in Go; this type
// exists so that benchmarks can put llama.cpp's samplers beside ours on the
// same rows. It is not safe for concurrent use.
type NativeSampler struct {
	s       cgo.Sampler
	scratch unsafe.Pointer // llama_token_data[width], reused per row
	width   int
}

// NativeChainParams are the settings of llama.cpp's typical chat chain:
// penalties over the last PenaltyLastN tokens (skipped when 0), top-k, top-p,
// temperature, then a seeded draw.
type NativeChainParams struct {
	PenaltyLastN  int
	RepeatPenalty float32
	TopK          int
	TopP          float32
	Temperature   float32
	Seed          uint32
}

// NewNativeChain builds llama.cpp's sampler chain for rows of width tokens.
func NewNativeChain(width int, p NativeChainParams) (*NativeSampler, error) {
	initialize()
	if width < 1 {
		return nil, invalid("width %d", width)
	}
	return newNative(cgo.SamplerChain(p.PenaltyLastN, p.RepeatPenalty, p.TopK, p.TopP, p.Temperature, p.Seed), width), nil
}

// NewNativeGreedy builds llama.cpp's greedy sampler.
func NewNativeGreedy(width int) (*NativeSampler, error) {
	initialize()
	if width < 1 {
		return nil, invalid("width %d", width)
	}
	return newNative(cgo.SamplerGreedy(), width), nil
}

// NewNativeMirostat builds llama.cpp's Mirostat sampler: version 1 (with m
// candidates for the Zipf estimate) or 2.
func NewNativeMirostat(width, version int, tau, eta float32, m int, seed uint32) (*NativeSampler, error) {
	initialize()
	if width < 1 || tau <= 0 || eta <= 0 {
		return nil, invalid("mirostat width %d, tau %g, eta %g", width, tau, eta)
	}
	switch version {
	case 1:
		if m < 1 {
			return nil, invalid("mirostat m %d", m)
		}
		return newNative(cgo.SamplerMirostat(width, seed, tau, eta, m), width), nil
	case 2:
		return newNative(cgo.SamplerMirostatV2(seed, tau, eta), width), nil
	}
	return nil, invalid("mirostat version %d", version)
}

func newNative(s cgo.Sampler, width int) *NativeSampler {
	n := &NativeSampler{s: s, width: width, scratch: cgo.CMalloc(width * cgo.TokenData)}
	runtime.SetFinalizer(n, func(n *NativeSampler) { n.Close() })
	return n
}

// Sample builds llama.cpp's candidate array from row (as
// llama_sampler_sample does), applies the sampler, accepts the chosen token
// and returns it; -1 when the sampler selected nothing.
func (n *NativeSampler) Sample(row []float32) (int32, error) {
	if n.scratch == nil {
		return -1, ErrClosed
	}
	if len(row) != n.width {
		return -1, invalid("row of %d logits for a sampler of width %d", len(row), n.width)
	}
	return n.s.SampleRow(row, n.scratch), nil
}

// Accept tells the sampler about a token chosen elsewhere (penalty history).
func (n *NativeSampler) Accept(token int32) {
	if n.scratch != nil && token >= 0 && int(token) < n.width {
		n.s.Accept(token)
	}
}

// Close frees the sampler; it is idempotent.
func (n *NativeSampler) Close() error {
	if n.scratch != nil {
		n.s.Free()
		cgo.CFree(n.scratch)
		n.scratch = nil
		runtime.SetFinalizer(n, nil)
	}
	return nil
}
