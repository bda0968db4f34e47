package mirostat

import (
	"context"
	"fmt"
	"iter"
	"slices"
)

// Model returns the logits of the next token after tokens: the prompt
// followed by the tokens generated so far. tokens is valid only during the
// call and must not be modified. The row is read before Model is called
// again, so Model may reuse its buffer.
type Model func(tokens []int32) ([]float32, error)

// UniformSource supplies uniform draws in [0, 1). *ParkMiller and
// *math/rand/v2.Rand implement it.
type UniformSource interface {
	Float64() float64
}

// StopReason tells why a generation ended.
type StopReason int

const (
	// StopLimit: MaxTokens tokens were generated.
	StopLimit StopReason = iota + 1
	// StopEndToken: the last token is one of the end tokens.
	StopEndToken
	// StopObserver: the observer returned false after the last token.
	StopObserver
)

// String returns "limit", "end token" or "observer".
func (r StopReason) String() string {
	switch r {
	case StopLimit:
		return "limit"
	case StopEndToken:
		return "end token"
	case StopObserver:
		return "observer"
	}
	return fmt.Sprintf("StopReason(%d)", int(r))
}

// GenerateOptions configures Generate and Stream.
type GenerateOptions struct {
	// Prompt is what the model sees before the first generated token; it is
	// not part of the result.
	Prompt []int32
	// MaxTokens bounds the number of generated tokens; it must be > 0.
	MaxTokens int
	// EndTokens end the generation after one of them is generated (and
	// included). None by default.
	EndTokens []int32
	// Observer, when set, sees every step of Generate and stops it, after
	// that token, by returning false. An end token takes precedence as the
	// reason. Stream ignores it: breaking the loop is the same.
	Observer func(Step) bool
}

// Generation is the result of Generate.
type Generation struct {
	Tokens []int32 // generated tokens, prompt excluded
	Steps  []Step  // one per token
	Reason StopReason
}

// Generate drives an autoregressive model: it asks model for a row, then
// draws one uniform from src (only once the row is there), samples, and
// repeats until MaxTokens, an end token, or the observer stops it. On an
// error (the model's, a sampling error as a *RowError for the step index,
// or ctx's) it returns what was generated before, whose steps stay
// committed, and Reason 0.
func (s *Sampler) Generate(ctx context.Context, model Model, src UniformSource, opts GenerateOptions) (Generation, error) {
	var g Generation
	for st, err := range s.Stream(ctx, model, src, opts) {
		if err != nil {
			return g, err
		}
		g.Tokens = append(g.Tokens, st.Token)
		g.Steps = append(g.Steps, st)
		switch {
		case slices.Contains(opts.EndTokens, st.Token):
			g.Reason = StopEndToken
		case opts.Observer != nil && !opts.Observer(st):
			g.Reason = StopObserver
		case len(g.Tokens) == opts.MaxTokens:
			g.Reason = StopLimit
		default:
			continue
		}
		return g, nil
	}
	return g, nil
}

// Stream is Generate as an iterator that keeps no trace: it yields each step
// with a nil error, stops after MaxTokens tokens or an end token (yielded),
// and yields one final (Step{}, err) on an error. Breaking the loop stops the
// generation.
func (s *Sampler) Stream(ctx context.Context, model Model, src UniformSource, opts GenerateOptions) iter.Seq2[Step, error] {
	return func(yield func(Step, error) bool) {
		switch {
		case model == nil || src == nil:
			yield(Step{}, paramError("nil model or uniform source"))
			return
		case opts.MaxTokens <= 0:
			yield(Step{}, paramError("max tokens must be > 0, got %d", opts.MaxTokens))
			return
		}
		tokens := make([]int32, len(opts.Prompt), len(opts.Prompt)+opts.MaxTokens)
		copy(tokens, opts.Prompt)
		for i := range opts.MaxTokens {
			if err := ctx.Err(); err != nil {
				yield(Step{}, err)
				return
			}
			row, err := model(tokens[:len(tokens):len(tokens)])
			if err != nil {
				yield(Step{}, fmt.Errorf("mirostat: model at step %d: %w", i, err))
				return
			}
			st, err := s.SampleLogits(row, src.Float64())
			if err != nil {
				yield(Step{}, &RowError{Row: i, Err: err})
				return
			}
			tokens = append(tokens, st.Token)
			if !yield(st, nil) || slices.Contains(opts.EndTokens, st.Token) {
				return
			}
		}
	}
}
