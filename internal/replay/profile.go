// Package replay is a backend.Backend for benchmarks of the Go side of the
// loop against a device that is not there: each Eval waits a fixed wall time
// taken from a measured profile (per step and row count, and per prompt
// token), sleeping (without occupying a core) or spinning as CUDA's default
// schedule does while a GPU computes (see Wait), and returns real-sized
// logits rows of a fixed random model.
//
// A benchmark that runs the raw decode loop and the loop of package
// generation (or beam search) on the same replay backend then measures what
// the Go side costs beside a device of that speed, on any machine:
// llamabench --replay does so.
package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// Profile is a measured device: how long one evaluation takes. It is read
// from JSON (see testdata/h200.json).
type Profile struct {
	// Name says where the figures come from.
	Name string `json:"name"`
	// Note is free text: the source of the figures, which are estimates.
	Note string `json:"note,omitempty"`
	// Models are the measured models.
	Models []ModelProfile `json:"models"`
}

// ModelProfile is one model on the profiled device.
type ModelProfile struct {
	// Name names the model (bench-small-q8_0, bench-1b-q4_0).
	Name string `json:"name"`
	// VocabSize is the width of a logits row.
	VocabSize int `json:"vocab_size"`
	// Steps are the wall times of one decode step with Rows rows of one
	// token each. Between two row counts the time is interpolated linearly;
	// beyond the last it grows at the slope of the last two (or stays, with
	// one entry).
	Steps []StepTime `json:"steps"`
	// PromptTokensPerS is the prompt processing speed: a feed of n > 1
	// tokens costs n / PromptTokensPerS.
	PromptTokensPerS float64 `json:"prompt_tokens_per_s"`
	// Ratios are the loop's ratios measured on the device itself, keyed by
	// llamabench's names ("sampling chain / raw"), to be shown beside the
	// replayed ones.
	Ratios map[string]float64 `json:"ratios,omitempty"`
}

// StepTime is the wall time of one decode step of Rows rows.
type StepTime struct {
	Rows int     `json:"rows"`
	MS   float64 `json:"ms"`
}

// LoadProfile reads and validates a profile.
func LoadProfile(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseProfile(data, path)
}

// ParseProfile decodes and validates a profile read from the file path
// (named in errors), for callers that read the file themselves.
func ParseProfile(data []byte, path string) (*Profile, error) {
	var p Profile
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("replay: %s: %w", path, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("replay: %s: %w", path, err)
	}
	return &p, nil
}

// Validate reports the first field that cannot describe a device.
func (p *Profile) Validate() error {
	if len(p.Models) == 0 {
		return errors.New("no models")
	}
	for i := range p.Models {
		if err := p.Models[i].validate(); err != nil {
			return fmt.Errorf("models[%d] (%s): %w", i, p.Models[i].Name, err)
		}
	}
	return nil
}

func (m *ModelProfile) validate() error {
	switch {
	case m.VocabSize < 2:
		return fmt.Errorf("vocab_size %d: must be at least 2", m.VocabSize)
	case len(m.Steps) == 0:
		return errors.New("no steps")
	case m.PromptTokensPerS <= 0:
		return fmt.Errorf("prompt_tokens_per_s %g: must be positive", m.PromptTokensPerS)
	}
	for i, s := range m.Steps {
		if s.Rows < 1 || s.MS <= 0 {
			return fmt.Errorf("steps[%d]: rows %d, ms %g: both must be positive", i, s.Rows, s.MS)
		}
		if i > 0 && s.Rows <= m.Steps[i-1].Rows {
			return fmt.Errorf("steps[%d]: rows %d: rows must increase", i, s.Rows)
		}
	}
	return nil
}

// StepDuration is the wall time of a decode step of rows rows.
func (m *ModelProfile) StepDuration(rows int) time.Duration {
	s := m.Steps
	i, found := slices.BinarySearchFunc(s, rows, func(st StepTime, r int) int { return st.Rows - r })
	var ms float64
	switch {
	case found:
		ms = s[i].MS
	case i == 0 || len(s) == 1:
		ms = s[min(i, len(s)-1)].MS
	default:
		i = min(i, len(s)-1) // beyond the last entry: the last slope
		a, b := s[i-1], s[i]
		ms = a.MS + (b.MS-a.MS)*float64(rows-a.Rows)/float64(b.Rows-a.Rows)
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// PromptDuration is the wall time of evaluating n prompt tokens.
func (m *ModelProfile) PromptDuration(n int) time.Duration {
	return time.Duration(float64(n) / m.PromptTokensPerS * float64(time.Second))
}
