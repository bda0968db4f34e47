package jinja

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits bound what compiling and rendering a template may cost. A zero
// field takes its default (see DefaultLimits). Every bound is checked
// before the work it bounds is done: a string or list is sized before it
// is built, arithmetic is checked for overflow, and the nesting of the
// parser, of macro calls and of the values walked is counted, so that a
// hostile template ends in a *LimitError and never in a stack overflow,
// an out-of-memory or a hang.
//
// The memory a render holds is bounded by MaxAllocBytes (every string
// and list the template builds counts, alive or not) plus the values the
// caller passed in; the time it takes, by MaxSteps and the context.
type Limits struct {
	// MaxSourceBytes bounds the template's source (default 1 MiB).
	MaxSourceBytes int64
	// MaxNesting bounds the nesting of blocks ({% if %}, {% for %}, ...)
	// and of expressions (parentheses, lists, operators) at compile time,
	// and so the depth of the renderer's own recursion (default 100).
	MaxNesting int64
	// MaxCallDepth bounds nested macro calls, caller() included
	// (default 100).
	MaxCallDepth int64
	// MaxSteps bounds the evaluation steps of one render: every node,
	// expression, loop iteration and item a filter walks counts one
	// (default 10,000,000).
	MaxSteps int64
	// MaxOutputBytes bounds the rendered text (default 16 MiB).
	MaxOutputBytes int64
	// MaxValueBytes bounds any one string the template builds
	// (repetition, concatenation, join, replace, tojson, a captured
	// block; default 16 MiB).
	MaxValueBytes int64
	// MaxValueItems bounds any one list or dict the template builds,
	// range() included (default 1,000,000).
	MaxValueItems int64
	// MaxValueDepth bounds the nesting of the values a render walks
	// (tojson, printing, comparing, building): a list that contains
	// itself hits it (default 128).
	MaxValueDepth int64
	// MaxAllocBytes bounds the bytes of all strings and lists one render
	// builds, counting 64 bytes per list or dict item (default 256 MiB).
	MaxAllocBytes int64
}

// DefaultLimits returns the limits a zero Limits stands for.
func DefaultLimits() Limits {
	return Limits{
		MaxSourceBytes: 1 << 20,
		MaxNesting:     100,
		MaxCallDepth:   100,
		MaxSteps:       10_000_000,
		MaxOutputBytes: 16 << 20,
		MaxValueBytes:  16 << 20,
		MaxValueItems:  1_000_000,
		MaxValueDepth:  128,
		MaxAllocBytes:  256 << 20,
	}
}

// withDefaults fills the zero fields of l.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	fill := func(v *int64, def int64) {
		if *v <= 0 {
			*v = def
		}
	}
	fill(&l.MaxSourceBytes, d.MaxSourceBytes)
	fill(&l.MaxNesting, d.MaxNesting)
	fill(&l.MaxCallDepth, d.MaxCallDepth)
	fill(&l.MaxSteps, d.MaxSteps)
	fill(&l.MaxOutputBytes, d.MaxOutputBytes)
	fill(&l.MaxValueBytes, d.MaxValueBytes)
	fill(&l.MaxValueItems, d.MaxValueItems)
	fill(&l.MaxValueDepth, d.MaxValueDepth)
	fill(&l.MaxAllocBytes, d.MaxAllocBytes)
	return l
}

// LimitError is the error of a template that went over one of its Limits.
type LimitError struct {
	// Limit is the name of the Limits field (MaxSteps, ...).
	Limit string
	// Value is the limit's value.
	Value int64
}

var limitUnits = map[string]string{
	"MaxSourceBytes": "bytes of source",
	"MaxNesting":     "levels of nesting",
	"MaxCallDepth":   "nested macro calls",
	"MaxSteps":       "evaluation steps",
	"MaxOutputBytes": "bytes of output",
	"MaxValueBytes":  "bytes in one value",
	"MaxValueItems":  "items in one value",
	"MaxValueDepth":  "levels of nested values",
	"MaxAllocBytes":  "bytes built by one render",
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("jinja: template exceeded %s (%d %s)", e.Limit, e.Value, limitUnits[e.Limit])
}

// Error is an error of a template's source or of its render that is not a
// limit: a syntax error, an unknown filter, a type error, a call of
// raise_exception.
type Error struct {
	// Line is the template's line (from 1) where it happened, 0 if unknown.
	Line int
	// Msg says what happened.
	Msg string
	// Raised tells an error the template raised itself (raise_exception).
	Raised bool
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("jinja: line %d: %s", e.Line, e.Msg)
	}
	return "jinja: " + e.Msg
}

// maxMessageBytes bounds the message of an Error, raise_exception's
// included.
const maxMessageBytes = 1000

func newError(line int, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > maxMessageBytes {
		msg = msg[:maxMessageBytes] + "..."
	}
	return &Error{Line: line, Msg: msg}
}

// ctxError wraps the render's context's error so that errors.Is finds
// context.Canceled or context.DeadlineExceeded.
type ctxError struct{ err error }

func (e *ctxError) Error() string { return "jinja: render stopped: " + e.err.Error() }
func (e *ctxError) Unwrap() error { return e.err }

// ParseLimits reads limits written as "Name=N,Name=N" with the names of
// Limits' fields (MaxSteps=1000000,MaxOutputBytes=1048576); the fields not
// named keep their defaults.
func ParseLimits(s string) (Limits, error) {
	var l Limits
	fields := map[string]*int64{
		"maxsourcebytes": &l.MaxSourceBytes, "maxnesting": &l.MaxNesting, "maxcalldepth": &l.MaxCallDepth,
		"maxsteps": &l.MaxSteps, "maxoutputbytes": &l.MaxOutputBytes, "maxvaluebytes": &l.MaxValueBytes,
		"maxvalueitems": &l.MaxValueItems, "maxvaluedepth": &l.MaxValueDepth, "maxallocbytes": &l.MaxAllocBytes,
	}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		f := fields[strings.ToLower(strings.TrimSpace(name))]
		if !ok || f == nil {
			return Limits{}, fmt.Errorf("jinja limits: %q is not Name=N with Name a field of Limits (MaxSteps, MaxOutputBytes, ...)", kv)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil || n <= 0 {
			return Limits{}, fmt.Errorf("jinja limits: %s: %q is not a positive integer", name, val)
		}
		*f = n
	}
	return l.withDefaults(), nil
}

// String writes l as ParseLimits reads it.
func (l Limits) String() string {
	return fmt.Sprintf("MaxSourceBytes=%d,MaxNesting=%d,MaxCallDepth=%d,MaxSteps=%d,MaxOutputBytes=%d,MaxValueBytes=%d,MaxValueItems=%d,MaxValueDepth=%d,MaxAllocBytes=%d",
		l.MaxSourceBytes, l.MaxNesting, l.MaxCallDepth, l.MaxSteps, l.MaxOutputBytes, l.MaxValueBytes, l.MaxValueItems, l.MaxValueDepth, l.MaxAllocBytes)
}
