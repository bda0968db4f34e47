// Package parity reads transformers' parity vectors, kept in this package's testdata folder (see
// testdata/README.md for their provenance and schema): files of kind "processors", "beam" and
// "greedy_logprobs" produced by transformers 4.57.6's own code. It holds the schema (typed cases
// for the three kinds), the string-encoded float32 values, the README's comparison rule and a
// formatter for the first difference, so that tests and internal/cmd/parity check every kind the same way.
package parity

import (
	"encoding/json"
	"fmt"
	"os"
)

// File is one parity file: its kind, its meta object and its cases, each left as raw JSON for the
// runner of its kind to decode.
type File struct {
	Kind  string                     `json:"kind"`
	Meta  map[string]json.RawMessage `json:"meta"`
	Cases []json.RawMessage          `json:"cases"`
}

// ReadFile reads and decodes a parity file.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	return Parse(data)
}

// Parse decodes a parity file's bytes. The kind must be set; cases may be empty.
func Parse(data []byte) (*File, error) {
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	if f.Kind == "" {
		return nil, fmt.Errorf("parity: the file has no \"kind\"")
	}
	return &f, nil
}

// CaseID returns the "id" of a raw case, or "" when it has none.
func CaseID(raw json.RawMessage) string {
	var c struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &c)
	return c.ID
}
