package mirostat

import (
	"errors"
	"fmt"
)

// The errors every operation returns, possibly wrapped (in an *IndexError, a
// *RowError or with a message); test them with errors.Is. An operation that
// returns an error leaves every sampler it was given unchanged, except where a
// doc comment says otherwise (Replay, SampleBatch).
var (
	// ErrEmptyRow: the row of logits, weights or probabilities has no entries.
	ErrEmptyRow = errors.New("mirostat: empty row")
	// ErrAllMasked: every logit is -Inf, or every weight is 0.
	ErrAllMasked = errors.New("mirostat: every token is masked")
	// ErrNonFiniteLogit: a logit is NaN or +Inf (-Inf masks a token).
	ErrNonFiniteLogit = errors.New("mirostat: logit is NaN or +Inf")
	// ErrInvalidUniform: the uniform draw is not a finite number in [0, 1).
	ErrInvalidUniform = errors.New("mirostat: uniform draw must be in [0, 1)")
	// ErrInvalidProbability: a weight or probability is negative, NaN or
	// infinite, a probability exceeds 1, or probabilities do not sum to 1.
	ErrInvalidProbability = errors.New("mirostat: invalid probability")
	// ErrInvalidParameter: a configuration value, size, token id or state is
	// out of range.
	ErrInvalidParameter = errors.New("mirostat: invalid parameter")
	// ErrNotCandidate: an observed token is not in the current candidate set.
	// It wraps ErrInvalidParameter.
	ErrNotCandidate = fmt.Errorf("%w: token is not in the candidate set", ErrInvalidParameter)
	// ErrNumerical: a computation overflowed or produced NaN from valid input,
	// for example weights whose sum overflows.
	ErrNumerical = errors.New("mirostat: numerical failure")
)

// IndexError locates the offending entry of a row. Err is ErrNonFiniteLogit
// or ErrInvalidProbability.
type IndexError struct {
	Index int
	Value float64
	Err   error
}

// Error names the sentinel, the index and the value.
func (e *IndexError) Error() string {
	return fmt.Sprintf("%v: index %d is %v", e.Err, e.Index, e.Value)
}

// Unwrap returns e.Err.
func (e *IndexError) Unwrap() error { return e.Err }

// RowError locates the failing row of a replay or the failing session of a
// batch.
type RowError struct {
	Row int
	Err error
}

// Error names the row and its error.
func (e *RowError) Error() string { return fmt.Sprintf("row %d: %v", e.Row, e.Err) }

// Unwrap returns e.Err.
func (e *RowError) Unwrap() error { return e.Err }

func paramError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidParameter}, args...)...)
}
