package genconfig

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/llamaloop/llamaloop/internal/quote"
)

// FieldError is a field of a config that transformers rejects, or that a generation_config.json
// document spells with the wrong JSON type. Validate, Parse, Update and CheckLengths return it
// (several of them joined with errors.Join), so that a caller can point at what set the field:
// find the first with errors.As, all of them with [FieldErrors].
type FieldError struct {
	// Field is the Go name of the field in Config ("Temperature"), or "Extra" for a field kept
	// there (watermarking_config, force_words_ids, ...).
	Field string
	// JSON is its name in generation_config.json ("temperature").
	JSON string
	// Value is the rejected value: the field's Go value, or the raw JSON (a json.RawMessage)
	// when it could not be read.
	Value any
	// Reason says what transformers requires, in its words where it has them.
	Reason string
}

// Error reads "genconfig: temperature (=-1) has to be a strictly positive float"; a long value is
// cut to its start and its length (quote.Value).
func (e *FieldError) Error() string {
	v := e.Value
	if deref, ok := derefValue(v); ok {
		v = deref
	}
	return fmt.Sprintf("genconfig: %s (=%s) %s", e.JSON, quote.Value(v), e.Reason)
}

// derefValue shows the value behind the pointer fields of Config rather than an address.
func derefValue(v any) (any, bool) {
	switch p := v.(type) {
	case *int:
		if p != nil {
			return *p, true
		}
	case *int32:
		if p != nil {
			return *p, true
		}
	case *float64:
		if p != nil {
			return *p, true
		}
	case *[2]float64:
		if p != nil {
			return *p, true
		}
	}
	return nil, false
}

// FieldErrors returns every *FieldError in err's tree (errors.Join and %w wrapping included), in
// order.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if fe, ok := err.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// fieldError returns the FieldError of the JSON field name.
func fieldError(name string, value any, format string, args ...any) *FieldError {
	return &FieldError{Field: goName(name), JSON: name, Value: value, Reason: fmt.Sprintf(format, args...)}
}

// goName returns the Go name of the field whose JSON name is name, or "Extra" for a field that
// Config keeps as it read it.
func goName(name string) string {
	if f, ok := configFields[name]; ok {
		return f.goName
	}
	return "Extra"
}

// jsonError says in a user's terms why data is not a generation config object: which JSON type it
// holds instead of an object, or where its syntax breaks (line and column), rather than naming the
// Go types that encoding/json decodes into.
func jsonError(data []byte, err error) error {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &typ):
		return fmt.Errorf("want a JSON object, got a JSON %s", typ.Value)
	case errors.As(err, &syn):
		line, col := 1, 1
		for _, c := range data[:min(int(syn.Offset), len(data))] {
			if c == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		return fmt.Errorf("invalid JSON at line %d, column %d: %s", line, max(col-1, 1), syn)
	}
	return err
}
