package cli

import (
	"fmt"
	"io"
	"sync"
)

// Output is a command's stdout that remembers its first write error: the
// printers write many small pieces and cannot each stop the command, so the
// command asks Err between steps and at its end, and exits non-zero when the
// output was lost (a full disk, /dev/full, a closed pipe) instead of
// reporting success. After an error every write fails with it.
type Output struct {
	w   io.Writer
	mu  sync.Mutex
	err error
}

// NewOutput wraps w.
func NewOutput(w io.Writer) *Output { return &Output{w: w} }

// Write writes p to the wrapped writer unless an earlier write failed.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		o.err = fmt.Errorf("writing the output: %w", err)
	}
	return n, o.err
}

// Err returns the first write error, or nil. ExitCode maps a broken pipe
// (the reader went away) to ExitBrokenPipe, which commands end quietly.
func (o *Output) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
