package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/clitest"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProgressBar(t *testing.T) {
	var b bytes.Buffer
	p := NewProgressBar(&b, "loading m.gguf")
	p.Set(0)
	p.Set(0.001) // same percentage: no redraw
	p.Set(0.5)
	p.Set(2) // clamped
	p.Done()
	p.Set(0.7) // after Done: nothing
	want := "\rloading m.gguf [..............................]   0%" +
		"\rloading m.gguf [###############...............]  50%" +
		"\rloading m.gguf [##############################] 100%" +
		"\r\x1b[K"
	assert.Equal(t, want, b.String())

	var none *ProgressBar
	none.Set(0.5) // a nil bar draws nothing and does not panic
	none.Done()
}

func TestExitCodesAndMessages(t *testing.T) {
	assert.Equal(t, ExitOK, ExitCode(nil))
	assert.Equal(t, ExitError, ExitCode(errors.New("boom")))
	assert.Equal(t, ExitUsage, ExitCode(fmt.Errorf("wrapped: %w", Usagef("bad %d", 1))))
	assert.Equal(t, ExitInterrupted, ExitCode(fmt.Errorf("loading: %w", context.Canceled)))
	assert.Equal(t, "cannot load model x: not a GGUF file; see above", Message(errors.New("llamacpp: cannot load model x: not a GGUF file\nsee above")))
	assert.Equal(t, "temperature (=0) is bad", Message(errors.New("logits: temperature (=0) is bad")))
}

func TestFlagError(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	fs.Int("top-k", 0, "")
	fs.Int("r", 0, "")
	fs.Float64("temp", 0, "")
	fs.Bool("quiet", false, "")
	for args, want := range map[string]string{
		"--nope":                       "unknown option --nope",
		"-q":                           "unknown option -q",
		"--top-k=abc":                  `--top-k "abc": not an integer`,
		"--top-k=99999999999999999999": `--top-k "99999999999999999999": not an integer from -9223372036854775808 to 9223372036854775807`,
		"--temp=x":                     `--temp "x": not a number`,
		"--temp=1e999":                 `--temp "1e999": beyond the range of a number`,
		"--quiet=maybe":                `--quiet "maybe": not true or false`,
		"-r":                           "option -r needs a value",
	} {
		err := FlagError(fs, fs.Parse(strings.Fields(args)))
		assert.Equal(t, ExitUsage, ExitCode(err), args)
		assert.Equal(t, want, err.Error(), args)
	}
}

func TestPrintUsageShowsEveryDefault(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("m", "", "the model `FILE`")
	fs.String("model", "", "the model `FILE`")
	fs.Int("n", 3, "how `MANY`")
	fs.Bool("quiet", false, "say less")
	fs.Float64("extra-long-option-name", 0.5, "a long one")
	var b bytes.Buffer
	PrintUsage(&b, fs, "head\n", []Group{{Title: "Main", Flags: []string{"m,model", "n"}}})
	want := "head\n\nMain:\n" +
		"  -m, --model FILE          the model FILE (default: none)\n" +
		"  -n MANY                   how MANY (default: 3)\n" +
		"\nOther options:\n" +
		"  --extra-long-option-name float\n" +
		"                            a long one (default: 0.5)\n" +
		"  --quiet                   say less (default: false)\n"
	assert.Equal(t, want, b.String())
}

func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "x")
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, IsTerminal(f.Fd()))
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	assert.False(t, IsTerminal(w.Fd()))
	master, slave, err := clitest.OpenPTY()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	assert.True(t, IsTerminal(slave.Fd()))
}

func TestLoadModelErrors(t *testing.T) {
	_, err := LoadModel(context.Background(), "", 0, nil)
	assert.Equal(t, ExitUsage, ExitCode(err))
	_, err = LoadModel(context.Background(), t.TempDir()+"/missing.gguf", 0, nil)
	assert.ErrorContains(t, err, "missing.gguf does not exist")
}

func TestBuildVersion(t *testing.T) {
	v := BuildVersion()
	assert.NotEmpty(t, v.Llamaloop)
	if External {
		assert.True(t, strings.HasPrefix(v.LlamaCpp, "external"), v.LlamaCpp)
	} else {
		assert.Equal(t, "ec98e2002 (b7416+21)", v.LlamaCpp)
	}
	assert.True(t, strings.HasPrefix(v.String(), "llamaloop "), v.String())
}

// failingWriter fails every write with err.
type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestOutputKeepsTheFirstWriteError(t *testing.T) {
	var b bytes.Buffer
	out := NewOutput(&b)
	_, err := out.Write([]byte("ok"))
	require.NoError(t, err)
	require.NoError(t, out.Err())
	assert.Equal(t, "ok", b.String())

	out = NewOutput(failingWriter{syscall.ENOSPC})
	_, err = out.Write([]byte("x"))
	require.Error(t, err)
	assert.EqualError(t, out.Err(), "writing the output: no space left on device")
	assert.Equal(t, ExitError, ExitCode(out.Err()))

	out = NewOutput(failingWriter{&os.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.EPIPE}})
	out.Write([]byte("x"))
	assert.Equal(t, ExitBrokenPipe, ExitCode(out.Err()), "a closed pipe ends the command quietly")
}

// A read of a FIFO without a writer blocks in the kernel; ReadFile returns
// when the context ends.
func TestReadFileEndsWithTheContext(t *testing.T) {
	fifo := t.TempDir() + "/fifo"
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := ReadFile(ctx, fifo)
		done <- err
	}()
	cancel()
	err := <-done
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, ExitInterrupted, ExitCode(err))
	// unblock the reader left behind
	if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
		w.Close()
	}

	path := t.TempDir() + "/f"
	require.NoError(t, os.WriteFile(path, []byte("data"), 0o644))
	data, err := ReadFile(context.Background(), path)
	require.NoError(t, err)
	assert.Equal(t, "data", string(data))
	data, err = ReadAll(context.Background(), strings.NewReader("stdin"))
	require.NoError(t, err)
	assert.Equal(t, "stdin", string(data))
}

func TestCheckModelFile(t *testing.T) {
	dir := t.TempDir()
	fifo := dir + "/m.gguf"
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	regular := dir + "/r.gguf"
	require.NoError(t, os.WriteFile(regular, []byte("GGUF"), 0o644))
	assert.NoError(t, CheckModelFile("-m", regular))
	for path, want := range map[string]string{
		fifo:             "-m " + fifo + ": not a regular file (a named pipe): llama.cpp maps the model from a file on disk",
		dir:              "-m " + dir + ": a directory, not a GGUF file",
		"/dev/null":      "-m /dev/null: not a regular file (a character device): llama.cpp maps the model from a file on disk",
		dir + "/missing": "model file " + dir + "/missing does not exist",
	} {
		assert.EqualError(t, CheckModelFile("-m", path), want)
	}
}

func TestLogWarningsInTheCommandsVoice(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	var b bytes.Buffer
	LogWarnings(&b, "llamagen", false)
	slog.Info("not shown")
	slog.Warn("llamacpp: 9 threads on 2 CPUs", "n", 9)
	slog.Warn("llamacpp: 9 threads on 2 CPUs", "n", 9) // said once
	slog.Error("llamacpp: boom")
	assert.Equal(t, "llamagen: warning: 9 threads on 2 CPUs n=9\nllamagen: error: boom\n", b.String())
	b.Reset()
	LogWarnings(&b, "llamagen", true)
	slog.Warn("hidden by --quiet")
	assert.Empty(t, b.String())
}

func TestCheckThreadsAndCells(t *testing.T) {
	assert.NoError(t, CheckThreads(1))
	assert.NoError(t, CheckThreads(512))
	assert.EqualError(t, CheckThreads(513), "--threads 513: must be from 1 to 512")
	assert.EqualError(t, CheckThreads(0), "--threads 0: must be from 1 to 512")

	// The bound on cells comes before the model is asked for anything.
	_, err := NewContext(nil, "--ctx 99999999", llamacpp.ContextParams{ContextSize: 99999999})
	assert.EqualError(t, err, "--ctx 99999999: the KV cache would have 99999999 cells; llama.cpp takes at most 16777216")
	assert.Equal(t, ExitUsage, ExitCode(err))
}
