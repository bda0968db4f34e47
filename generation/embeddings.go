package generation

import (
	"errors"
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
)

// checkEmbeddings checks req.PromptEmbeddings and req.PromptNonCausal
// against its prompt and the backend; the backend checks the values at
// Eval (backend.CheckEmbd).
func (g *Generator) checkEmbeddings(req *Request) error {
	if req.PromptEmbeddings == nil {
		if req.PromptNonCausal != nil {
			return fmt.Errorf("%w: PromptNonCausal without PromptEmbeddings", backend.ErrBadEmbedding)
		}
		return nil
	}
	in, ok := g.backend.(backend.EmbeddingInput)
	switch {
	case !ok:
		return fmt.Errorf("%w: PromptEmbeddings on a backend without input embeddings (%T)", backend.ErrBadEmbedding, g.backend)
	case req.Prompt == nil:
		return errors.New("PromptEmbeddings need Prompt: a placeholder token per position")
	case len(req.PromptEmbeddings) != len(req.Prompt):
		return fmt.Errorf("%w: %d PromptEmbeddings entries for %d prompt tokens", backend.ErrBadEmbedding, len(req.PromptEmbeddings), len(req.Prompt))
	}
	width := in.InputEmbeddingSize()
	if width == 0 {
		return fmt.Errorf("%w: PromptEmbeddings on a backend without input embeddings (%T takes none)", backend.ErrBadEmbedding, g.backend)
	}
	for i, e := range req.PromptEmbeddings {
		if e != nil && len(e) != width {
			return fmt.Errorf("%w: PromptEmbeddings[%d] has width %d, the model's is %d", backend.ErrBadEmbedding, i, len(e), width)
		}
	}
	if req.PromptNonCausal == nil {
		return nil
	}
	nc, ok := g.backend.(backend.NonCausalInput)
	if !ok {
		return fmt.Errorf("%w: PromptNonCausal on a backend without non-causal input (%T)", backend.ErrBadEmbedding, g.backend)
	}
	if err := backend.CheckNonCausal(req.PromptNonCausal, req.PromptEmbeddings, nc.MaxNonCausal()); err != nil {
		return fmt.Errorf("PromptNonCausal: %w (the bound is the backend's MaxNonCausal: llama.cpp's n_ubatch)", err)
	}
	return nil
}

// wholeRuns moves end, the end of a prompt chunk of r starting at from,
// out of a non-causal run, which is evaluated in one piece: back to the
// run's start when the chunk holds positions before it, else on to the
// run's end.
func (r *seq) wholeRuns(from, end int) int {
	for _, s := range r.req.PromptNonCausal {
		if s.Start < end && end < s.End {
			if s.Start > from {
				return s.Start
			}
			return s.End
		}
	}
	return end
}

// promptRuns are the request's non-causal runs within toks, the prompt
// tokens fed next, relative to toks (wholeRuns keeps them whole); nil
// when there are none.
func (r *seq) promptRuns(toks []int32) []backend.Span {
	if r.req.PromptNonCausal == nil || r.nfed >= len(r.prompt) {
		return nil
	}
	from, end := r.nfed, r.nfed+len(toks)
	r.runs = r.runs[:0]
	for _, s := range r.req.PromptNonCausal {
		if s.Start >= from && s.End <= end {
			r.runs = append(r.runs, backend.Span{Start: s.Start - from, End: s.End - from})
		}
	}
	if len(r.runs) == 0 {
		return nil
	}
	return r.runs
}

// promptEmbd is the part of the request's embeddings that goes with toks,
// the prompt tokens fed next; nil when it has none or toks are generated.
func (r *seq) promptEmbd(toks []int32) [][]float32 {
	if r.embd == nil || r.nfed >= len(r.prompt) {
		return nil
	}
	embd := r.embd[r.nfed : r.nfed+len(toks)]
	for _, e := range embd {
		if e != nil {
			return embd
		}
	}
	return nil
}

// withCandidates is the Embd of r's feed embd once n candidates follow its
// tokens: nil entries for them (the last prompt token of a speculating
// request is fed with its first candidates).
func (r *seq) withCandidates(embd [][]float32, n int) [][]float32 {
	if embd == nil {
		return nil
	}
	r.feedEmbd = append(r.feedEmbd[:0], embd...)
	for range n {
		r.feedEmbd = append(r.feedEmbd, nil)
	}
	return r.feedEmbd
}
