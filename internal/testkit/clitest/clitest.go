// Package clitest runs llamaloop's commands in tests as a user runs them:
// it builds the binary, runs it with given arguments and stdin, and gives
// it a pseudo-terminal when a test needs one.
package clitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// BinDirEnv names a folder of prebuilt commands that Build uses instead of
// compiling them: the GPU bundle runs these tests on machines without Go.
const BinDirEnv = "LLAMALOOP_TEST_BIN_DIR"

// Build compiles the main package in the current directory into dir/name
// with the go command that runs the tests, or returns the prebuilt command
// of that name in the folder named by BinDirEnv.
func Build(dir, name string) (string, error) {
	if prebuilt := os.Getenv(BinDirEnv); prebuilt != "" {
		bin, err := filepath.Abs(filepath.Join(prebuilt, name))
		if err == nil {
			_, err = os.Stat(bin)
		}
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", BinDirEnv, prebuilt, err)
		}
		return bin, nil
	}
	bin := filepath.Join(dir, name)
	goTool := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	args := append(append([]string{"build"}, buildFlags...), "-o", bin, ".")
	out, err := exec.Command(goTool, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// Result is what a run of a command produced.
type Result struct {
	Stdout, Stderr string
	Code           int
	// MaxRSSKiB is the command's peak resident memory in KiB (getrusage's
	// ru_maxrss), 0 where the system does not say: a bound on the work a
	// command did that the machine's speed does not change.
	MaxRSSKiB int64
}

// Run runs bin with args and stdin (none when empty) and waits for it, at
// most two minutes.
func Run(t testing.TB, bin, stdin string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running %s: %v", bin, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s %q did not finish in time; stderr: %s", bin, args, stderr.String())
	}
	return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: code, MaxRSSKiB: maxRSS(cmd.ProcessState)}
}

// RunWithMemoryLimit runs bin as Run does, under an address-space limit of
// kb KiB (ulimit -v), so that a test can give a command less memory than
// its request needs on any machine. AddressSanitizer reserves terabytes of
// address space, and so does a GPU backend, so -asan builds and runs with
// LLAMALOOP_BACKEND_DIR skip the test.
func RunWithMemoryLimit(t testing.TB, bin string, kb int, args ...string) Result {
	t.Helper()
	if len(buildFlags) > 0 {
		t.Skip("an address-space limit does not work with AddressSanitizer")
	}
	if os.Getenv("LLAMALOOP_BACKEND_DIR") != "" {
		t.Skip("a GPU backend reserves more address space than the limit, and keeps the KV cache in its own memory")
	}
	script := fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, kb)
	return Run(t, "/bin/sh", "", append([]string{"-c", script, bin}, args...)...)
}

// LockedBuffer is a bytes.Buffer that a running command writes while the
// test may read it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
