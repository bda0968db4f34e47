package parity

import (
	"fmt"
	"math"
)

// Tolerance is the README's relative tolerance for values derived from a softmax: |got - want| <=
// Tolerance·max(1, |want|).
const Tolerance = 1e-5

// Close reports whether got matches want under the README's rule: infinities must be equal, NaN
// matches only NaN, and finite values within Tolerance·max(1, |want|).
func Close(got, want float32) bool {
	if want != want || got != got {
		return want != want && got != got
	}
	if math.IsInf(float64(want), 0) || math.IsInf(float64(got), 0) {
		return got == want
	}
	return math.Abs(float64(got)-float64(want)) <= Tolerance*math.Max(1, math.Abs(float64(want)))
}

// Exact reports whether got equals want as float32 (NaN matches NaN; +0 matches -0): the rule for
// element-wise processors, which are bit-exact up to the sign of zero.
func Exact(got, want float32) bool {
	return got == want || (got != got && want != want)
}

// Diff describes the first difference between got and want: the first index where the positions of
// -inf differ, or else the first value that fails the rule (Exact when exact is set, Close
// otherwise). It returns nil when they match, and a difference in length as an error too.
func Diff(got, want []float32, exact bool) error {
	if len(got) != len(want) {
		return fmt.Errorf("length %d, want %d", len(got), len(want))
	}
	ninf := float32(math.Inf(-1))
	for i := range want {
		if (got[i] == ninf) != (want[i] == ninf) {
			return fmt.Errorf("index %d: got %s, want %s (-inf positions differ)", i, Format(got[i]), Format(want[i]))
		}
	}
	for i := range want {
		ok := Close(got[i], want[i])
		if exact {
			ok = Exact(got[i], want[i])
		}
		if !ok {
			return fmt.Errorf("index %d: got %s, want %s", i, Format(got[i]), Format(want[i]))
		}
	}
	return nil
}

// DiffMatrix is Diff row by row; the error names the row.
func DiffMatrix(got, want [][]float32, exact bool) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d rows, want %d", len(got), len(want))
	}
	for r := range want {
		if err := Diff(got[r], want[r], exact); err != nil {
			return fmt.Errorf("row %d: %w", r, err)
		}
	}
	return nil
}

// DiffInts describes the first difference between two integer sequences (tokens, beam indices).
func DiffInts[T ~int32 | ~int | ~int64](got, want []T) error {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Errorf("index %d: got %d, want %d (got %v, want %v)", i, got[i], want[i], got, want)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("length %d, want %d (got %v, want %v)", len(got), len(want), got, want)
	}
	return nil
}

// DiffStrings describes the first difference between two lists of names.
func DiffStrings(got, want []string) error {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Errorf("index %d: got %q, want %q (got %v, want %v)", i, got[i], want[i], got, want)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("got %d names %v, want %d %v", len(got), got, len(want), want)
	}
	return nil
}
