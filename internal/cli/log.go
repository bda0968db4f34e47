package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// LogWarnings makes the library's log records (llamacpp reports, with
// slog, conditions such as more threads than CPUs) lines of the command's
// own: "llamagen: warning: ..." on w, from level Warn up, none when quiet.
// Without it they would come through the log package's default format
// with a timestamp, and --quiet would not hide them. A warning is said once
// however many times it is logged (each new context logs the same one).
func LogWarnings(w io.Writer, command string, quiet bool) {
	slog.SetDefault(slog.New(&warnHandler{w: w, command: command, quiet: quiet}))
}

type warnHandler struct {
	mu      sync.Mutex
	w       io.Writer
	command string
	quiet   bool
	said    map[string]bool
}

func (h *warnHandler) Enabled(_ context.Context, l slog.Level) bool {
	return !h.quiet && l >= slog.LevelWarn
}

func (h *warnHandler) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	kind := "warning"
	if r.Level >= slog.LevelError {
		kind = "error"
	}
	line := fmt.Sprintf("%s: %s: %s\n", h.command, kind, Message(errors.New(msg)))
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.said[line] {
		return nil
	}
	if h.said == nil {
		h.said = map[string]bool{}
	}
	h.said[line] = true
	_, err := io.WriteString(h.w, line)
	return err
}

func (h *warnHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *warnHandler) WithGroup(string) slog.Handler      { return h }
