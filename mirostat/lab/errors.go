package lab

import (
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/mirostat"
)

// paramError is an error wrapping mirostat.ErrInvalidParameter.
func paramError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{mirostat.ErrInvalidParameter}, args...)...)
}

// rejected turns the error of a logits constructor into a parameter error that keeps its message.
func rejected(err error) error { return paramError("%v", err) }

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func checkUniform(u float64) error {
	if !(u >= 0 && u < 1) {
		return mirostat.ErrInvalidUniform
	}
	return nil
}

// checkLogits validates a row of logits as package mirostat does: not empty, no NaN or +Inf (an
// *IndexError naming the first).
func checkLogits(row []float32) error {
	if len(row) == 0 {
		return mirostat.ErrEmptyRow
	}
	for i, v := range row {
		if x := float64(v); math.IsNaN(x) || math.IsInf(x, 1) {
			return &mirostat.IndexError{Index: i, Value: x, Err: mirostat.ErrNonFiniteLogit}
		}
	}
	return nil
}

// checkIDs checks that every id indexes a row of n tokens.
func checkIDs(ids []int, n int) error {
	for _, id := range ids {
		if id < 0 || id >= n {
			return paramError("token %d outside vocabulary of %d", id, n)
		}
	}
	return nil
}
