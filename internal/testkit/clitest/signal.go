//go:build unix

package clitest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// InterruptWhileReading starts bin with args, waits until it has the FIFO
// at fifo open for reading, which leaves it waiting in read(2) for data,
// sends it SIGINT and returns its exit status and stderr. The test fails
// when bin never opens the FIFO, or does not end within 30 s of the signal.
func InterruptWhileReading(t testing.TB, fifo, bin string, args ...string) (code int, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var errOut LockedBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Opening a FIFO for writing without blocking succeeds once a reader
	// has it open (ENXIO before).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			defer syscall.Close(fd)
			break
		}
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			t.Fatalf("%s never opened the FIFO %s: %v; stderr: %s", bin, fifo, err, errOut.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop after SIGINT while reading %s", bin, fifo)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), errOut.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, errOut.String()
}

// RunToDevFull runs bin with args and stdout on /dev/full, where every
// write fails with ENOSPC; the test skips where there is no /dev/full.
func RunToDevFull(t testing.TB, bin string, args ...string) Result {
	t.Helper()
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = full, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return Result{Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()}
}
