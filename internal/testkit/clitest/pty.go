package clitest

import (
	"bytes"
	"io"
	"os/exec"
	"testing"
)

// RunWithTerminalStderr runs bin with stderr on a pseudo-terminal and
// stdout on a pipe, and returns what each received and the exit status.
// The test skips where no pseudo-terminal can be opened.
func RunWithTerminalStderr(t testing.TB, bin string, args ...string) (stdout, terminal string, code int) {
	t.Helper()
	master, slave, err := OpenPTY()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = slave
	if err := cmd.Start(); err != nil {
		slave.Close()
		t.Fatal(err)
	}
	slave.Close() // the child holds its own copy; reads end with EIO when it exits
	var term bytes.Buffer
	done := make(chan struct{})
	go func() {
		io.Copy(&term, master)
		close(done)
	}()
	err = cmd.Wait()
	<-done
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), term.String(), code
}
