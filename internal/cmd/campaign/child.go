package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// limitedExec is the shell script that runs a child under its limits: the
// address-space limit (KiB, its first argument) and no core files, set by
// the shell, which then executes the command in its place (same process:
// the parent's wait4 sees the command's peak RSS). Go's os/exec cannot set
// a child's rlimits between fork and exec, a limit set on the campaign
// itself would bind its other goroutines, and a Go wrapper that set it on
// itself could fail its own next allocation under it before the exec
// (TestChildOutcomes saw "fatal error: runtime: out of memory" there).
const limitedExec = `ulimit -v "$1" && ulimit -c 0 && shift && exec "$@"`

// child is one process of a case.
type child struct {
	args    []string
	env     []string // added to the campaign's environment
	limit   uint64   // RLIMIT_AS in bytes
	timeout time.Duration

	cmd      *exec.Cmd
	output   lockedBuffer
	done     chan struct{}
	err      error
	timedOut atomic.Bool
}

// start starts the child under its limits, in a process group of its own;
// its stdout and stderr go to output (and to watch, when not nil).
func (c *child) start(watch io.Writer) error {
	args := append([]string{"-c", limitedExec, "sh", strconv.FormatUint(c.limit>>10, 10)}, c.args...)
	c.cmd = exec.Command("sh", args...)
	c.cmd.Env = append(os.Environ(), c.env...)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var w io.Writer = &c.output
	if watch != nil {
		w = io.MultiWriter(&c.output, watch)
	}
	c.cmd.Stdout, c.cmd.Stderr = w, w
	if err := c.cmd.Start(); err != nil {
		return err
	}
	c.done = make(chan struct{})
	go func() {
		timer := time.AfterFunc(c.timeout, func() {
			c.timedOut.Store(true)
			c.kill(syscall.SIGKILL)
		})
		c.err = c.cmd.Wait()
		timer.Stop()
		close(c.done)
	}()
	return nil
}

// kill sends sig to the child's process group.
func (c *child) kill(sig syscall.Signal) {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = syscall.Kill(-c.cmd.Process.Pid, sig)
	}
}

// exited reports whether the child has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait waits for the child and returns its outcome.
func (c *child) wait() outcome {
	<-c.done
	return c.outcome()
}

// run starts the child, waits for it and returns its outcome.
func (c *child) run() outcome {
	if err := c.start(nil); err != nil {
		return outcome{class: classCrash, kind: "cannot start: " + err.Error()}
	}
	return c.wait()
}

// outcome classifies the ended child: a hang (killed at its timeout), a
// crash (killed by a signal, or a Go runtime fatal error, panic or
// llama.cpp abort in its output), a clean error (any other non-zero
// exit), or ok.
func (c *child) outcome() outcome {
	o := outcome{output: c.output.String()}
	if ps := c.cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			o.rss = ru.Maxrss * 1024
		}
	}
	if c.timedOut.Load() {
		o.class, o.kind = classHang, fmt.Sprintf("no exit within %s", c.timeout)
		return o
	}
	if kind, ok := crashKind(o.output, c.cmd.ProcessState); ok {
		o.class, o.kind = classCrash, kind
		return o
	}
	if c.err != nil {
		o.class, o.kind = classError, firstError(o.output)
		return o
	}
	o.class = classOK
	return o
}

// Outcome classes.
const (
	classOK    = "ok"
	classError = "clean error"
	classCrash = "crash"
	classHang  = "hang"
)

// outcome is what one case came to.
type outcome struct {
	class  string
	kind   string // crash kind, hang or the error's first line
	rss    int64  // peak RSS of the child (wait4), bytes
	output string
	note   string // what the case measured besides (neighbour latency)
	late   bool   // a neighbour request was not answered within 1 s
}

var (
	crashMarkers = []string{"fatal error:", "panic:", "SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL", "SIGFPE",
		"GGML_ASSERT", "GGML_ABORT", "terminate called", "goroutine stack exceeds", "out of memory", "AddressSanitizer"}
	hexNumber  = regexp.MustCompile(`0x[0-9a-f]+`)
	bigNumber  = regexp.MustCompile(`\b\d{3,}\b`)
	pathPrefix = regexp.MustCompile(`(/[^\s:/]+)+/([^\s:/]+)`)
	frameLine  = regexp.MustCompile(`^([\w./*()-]+)\(`)
)

// crashKind names a crash from its output and exit: the signal or the
// first crash line, and the top frame below the runtime's, with addresses,
// long numbers and paths removed so that one kind groups its cases.
func crashKind(out string, ps *os.ProcessState) (string, bool) {
	var first string
	lines := strings.Split(out, "\n")
	for _, line := range lines {
		for _, m := range crashMarkers {
			if strings.Contains(line, m) {
				first = strings.TrimSpace(line)
				break
			}
		}
		if first != "" {
			break
		}
	}
	signaled := false
	if ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			signaled = true
			if first == "" {
				first = "killed by " + ws.Signal().String()
			}
		}
	}
	if first == "" {
		return "", false
	}
	if !signaled && ps != nil && ps.ExitCode() != 2 {
		// Go's runtime ends a fatal error, a panic and a signal in C
		// (SIGSEGV, SIGABRT of an abort) with status 2; a crash word in
		// another exit's output is quoted input
		return "", false
	}
	kind := normalise(first)
	if frame := topFrame(lines); frame != "" {
		kind += " @ " + frame
	}
	return kind, true
}

// topFrame is the first frame of the first goroutine's trace that is not
// the runtime's own.
func topFrame(lines []string) string {
	in := false
	for _, line := range lines {
		if strings.HasPrefix(line, "goroutine ") && strings.HasSuffix(strings.TrimSpace(line), ":") {
			in = true
			continue
		}
		if !in {
			continue
		}
		m := frameLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if strings.HasPrefix(m[1], "runtime.") || strings.HasPrefix(m[1], "panic(") {
			continue
		}
		return m[1]
	}
	return ""
}

func normalise(s string) string {
	s = pathPrefix.ReplaceAllString(s, "$2")
	s = hexNumber.ReplaceAllString(s, "0x…")
	s = bigNumber.ReplaceAllString(s, "N")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// firstError is the line of a clean failure that says why: the first that
// mentions an error, else the last non-empty one.
func firstError(out string) string {
	last := ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.Contains(strings.ToLower(line), "error") {
			return normalise(line)
		}
		last = line
	}
	return normalise(last)
}

// lockedBuffer collects a child's output from two writers; it keeps the
// first 64 KiB and the last 64 KiB.
type lockedBuffer struct {
	mu   sync.Mutex
	head bytes.Buffer
	tail []byte
}

const keep = 64 << 10

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	written := len(p)
	if n := keep - b.head.Len(); n > 0 {
		b.head.Write(p[:min(n, len(p))])
		if n >= len(p) {
			return written, nil
		}
		p = p[n:]
	}
	b.tail = append(b.tail, p...)
	if len(b.tail) > 2*keep {
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-keep:]...)
	}
	return written, nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tail
	if len(t) > keep {
		t = t[len(t)-keep:]
	}
	return b.head.String() + string(t)
}

// waitCtx waits for the child or for ctx.
func (c *child) waitCtx(ctx context.Context) bool {
	select {
	case <-c.done:
		return true
	case <-ctx.Done():
		return false
	}
}
