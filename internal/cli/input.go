package cli

import (
	"context"
	"fmt"
	"io"
	"os"
)

// ReadFile reads the file at path as os.ReadFile does, but returns as soon
// as ctx ends, with an error wrapping ctx.Err(). Opening a FIFO, or reading
// a pipe or terminal, blocks in the kernel, outside Go, until a writer comes;
// the read then runs on a goroutine that is left behind when ctx ends, so
// that Ctrl-C still stops the command at once (it exits soon after).
func ReadFile(ctx context.Context, path string) ([]byte, error) {
	return whileAlive(ctx, func() ([]byte, error) { return os.ReadFile(path) })
}

// ReadAll reads r to its end as io.ReadAll does, returning early, as
// ReadFile does, when ctx ends (stdin given as "-").
func ReadAll(ctx context.Context, r io.Reader) ([]byte, error) {
	return whileAlive(ctx, func() ([]byte, error) { return io.ReadAll(r) })
}

func whileAlive(ctx context.Context, read func() ([]byte, error)) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := read()
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("reading: %w", ctx.Err())
	}
}

// CheckModelFile checks that path names a regular file, without opening it:
// llama.cpp seeks in and maps a model file, so a FIFO, a device or a
// directory cannot be one, and opening a FIFO would block with Ctrl-C
// unable to stop it. option names the command's option for the message.
func CheckModelFile(option, path string) error {
	fi, err := os.Stat(path)
	switch {
	case os.IsNotExist(err):
		return fmt.Errorf("model file %s does not exist", path)
	case err != nil:
		return fmt.Errorf("model file: %w", err)
	case fi.IsDir():
		return Usagef("%s %s: a directory, not a GGUF file", option, path)
	case !fi.Mode().IsRegular():
		return Usagef("%s %s: not a regular file (%s): llama.cpp maps the model from a file on disk", option, path, fileKind(fi.Mode()))
	}
	return nil
}

// fileKind names a non-regular file type.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "not a plain file"
}
