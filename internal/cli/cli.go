// Package cli holds what llamaloop's commands share: terminal detection,
// the model-loading progress bar, help text that shows every default, the
// version strings, and model loading with clear errors.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"

	"github.com/llamaloop/llamaloop/internal/clicommon"
	"github.com/llamaloop/llamaloop/internal/quote"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// Exit statuses shared by the commands.
const (
	ExitOK          = 0
	ExitError       = 1   // a runtime error, reported as one line on stderr
	ExitUsage       = 2   // an invalid option or argument
	ExitInterrupted = 130 // SIGINT, as a shell reports 128+2
	// ExitBrokenPipe ends a command whose stdout reader went away, quietly,
	// with the status a shell reports for a death by SIGPIPE (128+13), as
	// other Unix tools end.
	ExitBrokenPipe = 141
)

// UsageError marks an error in the command line; commands exit with
// ExitUsage for it.
type UsageError struct{ Err error }

// Error returns the message of the wrapped error.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

// FlagError rewrites an error of fs.Parse in the --long spelling the help
// uses, as a UsageError. The flag package's "parse error" becomes what the
// option wants ("not an integer", "not a number").
func FlagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return Usagef("unknown option %s", quote.Value(dashes(name)))
	}
	for _, prefix := range []string{"invalid value ", "invalid boolean value "} {
		// invalid value "abc" for flag -top-k: reason
		// invalid boolean value "x" for -quiet: reason
		rest, ok := strings.CutPrefix(msg, prefix)
		if !ok {
			continue
		}
		for _, sep := range []string{" for flag -", " for -"} {
			if i := strings.Index(rest, sep); i >= 0 {
				val, tail := rest[:i], rest[i+len(sep):]
				if u, err := strconv.Unquote(val); err == nil {
					val = quote.String(u) // a value of megabytes is quoted short
				}
				name, reason, _ := strings.Cut(tail, ": ")
				return Usagef("%s %s: %s", dashes(name), val, flagReason(fs.Lookup(name), reason))
			}
		}
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return Usagef("option %s needs a value", dashes(name))
	}
	return &UsageError{err}
}

// flagReason says what f wants in place of the flag package's reasons.
func flagReason(f *flag.Flag, reason string) string {
	if f == nil {
		return reason
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return reason
	}
	switch g.Get().(type) {
	case int, int64:
		if reason == "value out of range" {
			return fmt.Sprintf("not an integer from %d to %d", math.MinInt64, math.MaxInt64)
		}
		return "not an integer"
	case uint, uint64:
		return "not a whole number"
	case float64:
		if reason == "value out of range" {
			return "beyond the range of a number"
		}
		return "not a number"
	case bool:
		return "not true or false"
	}
	return reason
}

// dashes spells a flag name as the help does: -m, --model, and -ngl (the
// options llama.cpp's tools spell with one dash).
func dashes(name string) string {
	if len(name) == 1 || llamaCppShort[name] {
		return "-" + name
	}
	return "--" + name
}

// llamaCppShort are the multi-letter options that llama.cpp's tools spell
// with one dash (-ngl, -ub, -ctk), which the commands that take them as
// aliases spell so too.
var llamaCppShort = map[string]bool{
	"ngl": true, "ub": true, "np": true, "pg": true, "fa": true, "ctk": true, "ctv": true, "nkvo": true,
	"sm": true, "mg": true, "ts": true, "dev": true, "mmp": true, "embd": true, "ncmoe": true, "oe": true,
}

// ExitCode maps an error to the command's exit status: ExitOK for nil,
// ExitInterrupted when the error comes from a cancelled context,
// ExitBrokenPipe for a write to a pipe whose reader is gone, ExitUsage for
// a UsageError, ExitError otherwise.
func ExitCode(err error) int {
	var ue *UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, syscall.EPIPE):
		return ExitBrokenPipe
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	case errors.As(err, &ue):
		return ExitUsage
	}
	return ExitError
}

// Message turns an error into the single line a command prints after its
// name (clicommon.Line).
func Message(err error) string { return clicommon.Line(err) }

// LoadModel loads a GGUF model, drawing a progress bar on progress when it
// is not nil (the caller passes its stderr only when that is a terminal).
// Cancelling ctx stops the load; the error then wraps context.Canceled.
func LoadModel(ctx context.Context, path string, gpuLayers int, progress *ProgressBar) (*llamacpp.Model, error) {
	if path == "" {
		return nil, Usagef("no model: give one with -m FILE.gguf")
	}
	if err := CheckModelFile("-m", path); err != nil {
		return nil, err
	}
	p := llamacpp.ModelParams{GPULayers: gpuLayers}
	p.Progress = func(f float32) bool {
		if ctx.Err() != nil {
			return false
		}
		progress.Set(f)
		return true
	}
	m, err := llamacpp.LoadModel(path, p)
	progress.Done()
	if ctx.Err() != nil {
		if m != nil {
			m.Close()
		}
		return nil, fmt.Errorf("loading %s: %w", path, ctx.Err())
	}
	return m, err
}

// GPUs lists the GPU devices ggml sees (integrated ones included).
func GPUs() []llamacpp.Device {
	var out []llamacpp.Device
	for _, d := range llamacpp.Devices() {
		if d.Type == llamacpp.DeviceGPU || d.Type == llamacpp.DeviceIGPU {
			out = append(out, d)
		}
	}
	return out
}

// Offloaded reports whether a model loaded with gpuLayers runs on a GPU:
// a GPU backend is present and some layers are offloaded (llama.cpp then
// keeps their KV cache in the GPU's memory too).
func Offloaded(gpuLayers int) bool {
	return gpuLayers != 0 && len(GPUs()) > 0 && llamacpp.SupportsGPUOffload()
}

// DeviceSummary says where a model's layers run: "CPU" when no GPU backend
// is present or no layer is offloaded, otherwise the GPU's description and
// how many layers it holds.
func DeviceSummary(gpuLayers, layers int) string {
	if !Offloaded(gpuLayers) {
		return "CPU"
	}
	gpus := GPUs()
	n := layers
	if gpuLayers > 0 && gpuLayers < layers {
		n = gpuLayers
	}
	name := gpus[0].Description
	if name == "" {
		name = gpus[0].Name
	}
	return fmt.Sprintf("%s (%d of %d layers offloaded)", name, n, layers)
}
