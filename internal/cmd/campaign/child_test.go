package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A child runs under the address-space limit it was given, as ulimit -v
// (KiB) reports it.
func TestChildLimit(t *testing.T) {
	c := &child{args: []string{"sh", "-c", "ulimit -v"}, limit: 300 << 20, timeout: time.Minute}
	o := c.run()
	require.Equal(t, classOK, o.class, o.output)
	assert.Equal(t, "307200", strings.TrimSpace(o.output))
}

// Each outcome class from a child whose end is known in advance: a clean
// failure, death by a signal, a Go fatal error, and a child that outlives
// its timeout (sleep 600 against 50 ms: no machine is that slow).
func TestChildOutcomes(t *testing.T) {
	cases := []struct {
		args        []string
		class, kind string
	}{
		{[]string{"sh", "-c", "echo fine"}, classOK, ""},
		{[]string{"sh", "-c", "echo 'error: no such model' >&2; exit 1"}, classError, "error: no such model"},
		{[]string{"sh", "-c", "kill -SEGV $$"}, classCrash, "killed by segmentation fault"},
		{[]string{"sh", "-c", "echo 'fatal error: runtime: out of memory' >&2; exit 2"}, classCrash, "fatal error: runtime: out of memory"},
		{[]string{"sleep", "600"}, classHang, "no exit within 50ms"},
	}
	for _, c := range cases {
		timeout := time.Minute
		if c.class == classHang {
			timeout = 50 * time.Millisecond
		}
		o := (&child{args: c.args, limit: 1 << 30, timeout: timeout}).run()
		assert.Equal(t, c.class, o.class, "%v: %s", c.args, o.output)
		assert.Equal(t, c.kind, o.kind, "%v", c.args)
		if c.class != classHang {
			assert.Positive(t, o.rss, "%v: peak RSS from wait4", c.args)
		}
	}
}

// A Go crash in cgo is named by its signal line and the first frame that
// is not the runtime's, with addresses and numbers removed.
func TestCrashKind(t *testing.T) {
	out := `SIGBUS: bus error
PC=0x7f3a2b1c4d5e m=0 sigcode=2 addr=0x7f3a2b000000
signal arrived during cgo execution

goroutine 1 gp=0xc000002380 m=0 mp=0x1d4c3a0 [syscall]:
runtime.cgocall(0x1a2b3c0, 0xc00012fb08)
	/usr/local/go/src/runtime/cgocall.go:167 +0x4b fp=0xc00012fae0 sp=0xc00012faa8 pc=0x4a1b2b
github.com/llamaloop/llamaloop/cgo._Cfunc_ggml_backend_load(0x2a4b1c0)
	_cgo_gotypes.go:1234 +0x4b
`
	kind, ok := crashKind(out, nil)
	require.True(t, ok)
	assert.Equal(t, "SIGBUS: bus error @ github.com/llamaloop/llamaloop/cgo._Cfunc_ggml_backend_load", kind)

	kind, ok = crashKind("/root/go/pkg/mod/x/ggml/src/ggml.c:1234: GGML_ASSERT(ne % 2 == 0) failed\nSIGABRT: abort\n", nil)
	require.True(t, ok)
	assert.Equal(t, "ggml.c:N: GGML_ASSERT(ne % 2 == 0) failed", kind)

	_, ok = crashKind("llamacpp: loaded\n", nil)
	assert.False(t, ok)
}
