package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/cli/clitest"
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
	assert.Equal(t, "ec98e2002 (b7416+21)", v.LlamaCpp)
	assert.True(t, strings.HasPrefix(v.String(), "llamaloop "), v.String())
}
