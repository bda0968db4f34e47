package llamaloop

import (
	"context"
	"errors"
	"fmt"

	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// Hypothesis is one continuation found by Beam.
type Hypothesis struct {
	// Text is the continuation's text, without the prompt.
	Text string
	// Score is what hypotheses are ranked by: LogProb divided by the
	// number of tokens to the power length_penalty (transformers'
	// sequences_scores).
	Score float64
	// LogProb is the sum of the tokens' log-probabilities (after the
	// config's processors).
	LogProb float64
	// Tokens are the continuation's tokens, the final end-of-generation
	// token included.
	Tokens []int32
	// Finished is true when the hypothesis ended with an end-of-generation
	// token, false when the length limit cut it.
	Finished bool
}

// Beam searches continuations of prompt with beams beams, as transformers'
// generate() does with num_beams (length_penalty, early_stopping and the
// other fields come from the options' config), and returns beams
// hypotheses, best first (num_return_sequences, when the config sets it
// above 1, asks for fewer). A constraint of the options applies to every
// beam; StopStrings do not apply.
//
// The search runs in a context of its own, made for the call: one sequence
// per beam sharing one unified KV cache of Options.Context.ContextSize
// cells, or what the prompt and the new tokens of every beam need when
// that is more. A search cut short (ctx ended, the cache filled up)
// returns what it had found with the error.
func (m *Model) Beam(ctx context.Context, prompt string, beams int, o GenerateOptions) ([]Hypothesis, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if beams < 1 || beams > llamacpp.MaxSequences() {
		return nil, fmt.Errorf("llamaloop: %d beams: want 1 to %d (llama.cpp's sequences)", beams, llamacpp.MaxSequences())
	}
	if len(o.StopStrings) > 0 {
		return nil, errors.New("llamaloop: GenerateOptions.StopStrings do not apply to beam search (a later step can replace any token): leave them out")
	}
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	cfg = cfg.Clone()
	cfg.NumBeams = beams
	if cfg.NumReturnSequences <= 1 {
		cfg.NumReturnSequences = beams
	}
	procs, err := m.constraint(o)
	if err != nil {
		return nil, err
	}
	vocab := m.model.Vocab()
	tokens, err := vocab.Tokenize(prompt, true, false)
	if err != nil {
		return nil, fmt.Errorf("llamaloop: prompt: %w", err)
	}
	if len(tokens) == 0 {
		return nil, errors.New("llamaloop: empty prompt (the model adds no BOS token): give some text")
	}

	p := m.opts.Context
	maxNew := max(cfg.Resolve(len(tokens)).MaxLength-len(tokens), 0)
	p.ContextSize = max(p.ContextSize, len(tokens)+beams*maxNew)
	p.Sequences, p.UnifiedKV, p.Embeddings, p.BatchInvariant = beams, true, false, false
	lctx, err := m.model.NewContext(p)
	if err != nil {
		return nil, fmt.Errorf("llamaloop: the beam search's context (%d sequences, %d cells): %w", beams, p.ContextSize, err)
	}
	defer lctx.Close()
	b, lb, err := newBackend(m.model, lctx)
	if err != nil {
		return nil, fmt.Errorf("llamaloop: %w", err)
	}
	defer lb.Close()

	res, err := beam.Search(ctx, b, [][]int32{tokens}, beam.Options{Config: cfg, User: append(procs, o.Processors...), Seed: o.Seed})
	switch {
	case res == nil:
		return nil, fmt.Errorf("llamaloop: %w", err)
	case errors.Is(err, beam.ErrNoRoom):
		err = fmt.Errorf("llamaloop: the beam search's context of %d cells is full: open the model with a larger Options.Context.ContextSize (%w)", lctx.Size(), err)
	case err != nil:
		err = fmt.Errorf("llamaloop: beam search stopped early: %w", err)
	}
	var hyps []Hypothesis
	for _, h := range res.Hypotheses[0] {
		var text []byte
		for _, t := range h.Tokens {
			var perr error
			if text, perr = vocab.AppendPiece(text, t, false); perr != nil {
				return nil, fmt.Errorf("llamaloop: %w", perr)
			}
		}
		hyps = append(hyps, Hypothesis{Text: string(text), Score: h.Score, LogProb: h.LogProb, Tokens: h.Tokens, Finished: h.Finished})
	}
	return hyps, err
}
