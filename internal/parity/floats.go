package parity

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Float32 is one float32 of a parity file: a JSON string holding the shortest decimal that parses
// back to the same float32 ("0.1", "-3.4028235e+38"), or "inf", "-inf", "nan". A plain JSON number
// is accepted too.
type Float32 float32

// UnmarshalJSON reads the string (or number) form.
func (f *Float32) UnmarshalJSON(data []byte) error {
	s := string(data)
	if len(data) > 0 && data[0] == '"' {
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
	}
	v, err := strconv.ParseFloat(s, 32)
	if err != nil {
		return fmt.Errorf("parity: bad float32 %s", data)
	}
	*f = Float32(v)
	return nil
}

// MarshalJSON writes the README's string form.
func (f Float32) MarshalJSON() ([]byte, error) {
	return json.Marshal(Format(float32(f)))
}

// Format returns the README's spelling of x: the shortest decimal, "inf", "-inf" or "nan".
func Format(x float32) string {
	switch {
	case x != x:
		return "nan"
	case math.IsInf(float64(x), 1):
		return "inf"
	case math.IsInf(float64(x), -1):
		return "-inf"
	}
	return strconv.FormatFloat(float64(x), 'g', -1, 32)
}

// Vector is a []float32 that reads a JSON list of Float32; null gives nil.
type Vector []float32

// UnmarshalJSON reads a list of string-encoded floats.
func (v *Vector) UnmarshalJSON(data []byte) error {
	var raw []Float32
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if raw == nil {
		*v = nil
		return nil
	}
	out := make([]float32, len(raw))
	for i, x := range raw {
		out[i] = float32(x)
	}
	*v = out
	return nil
}

// Matrix is a [][]float32 of string-encoded floats (rows of a batch, steps...).
type Matrix []Vector

// Tensor3 is a [][][]float32 of string-encoded floats (per step, per row, per token).
type Tensor3 []Matrix
