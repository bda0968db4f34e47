package llamacpp_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/fakebackend"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const backendChildEnv = "LLAMALOOP_TEST_BACKEND_CHILD"

// TestBackendDirChild is the child process of TestBackendDirWarnings: the
// backend folder is read once per process.
func TestBackendDirChild(t *testing.T) {
	if os.Getenv(backendChildEnv) == "" {
		t.Skip("run by TestBackendDirWarnings")
	}
	devices := llamacpp.Devices()
	fmt.Printf("devices: %d\n", len(devices))
}

// A backend folder with nothing loadable in it costs one clear warning line
// per problem and never a crash; llama.cpp carries on with its CPU backend.
// The damaged libraries of backendCases (cut at 1 KiB, in half, one byte
// short, a segment or a dependency past the end, ...) ended the process in
// SIGBUS inside ggml_backend_load before they were checked in Go; an intact
// library that ggml refuses gives ggml's reason.
func TestBackendDirWarnings(t *testing.T) {
	notELF := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(notELF, "libggml-cuda.so"), []byte("not a library"), 0o644))
	notBackend := t.TempDir()
	if libz, err := filepath.Glob("/lib/*/libz.so.1"); err == nil && len(libz) > 0 {
		data, err := os.ReadFile(libz[0])
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(notBackend, "libggml-z.so"), data, 0o644))
	}
	loop := filepath.Join(t.TempDir(), "loop")
	require.NoError(t, os.Symlink(loop, loop))
	cases := []struct {
		name, dir, want string
	}{
		{"missing folder", filepath.Join(t.TempDir(), "nowhere"), "holds no ggml backend library"},
		{"empty folder", t.TempDir(), "holds no ggml backend library"},
		{"folder in a link loop", loop, "holds no ggml backend library"},
		{"not a library", notELF, "libggml-cuda.so not loaded: "},
		{"not a backend", notBackend, "libggml-z.so not loaded: "},
	}
	intact := t.TempDir()
	if _, err := fakebackend.Build(intact); err == nil {
		cases = append(cases, struct{ name, dir, want string }{"refused by ggml", intact, "ggml_backend_init returned NULL"})
		for _, c := range fakebackend.Cases() {
			dir := t.TempDir()
			lib, err := fakebackend.Build(dir)
			require.NoError(t, err)
			require.NoError(t, c.Damage(dir, lib))
			cases = append(cases, struct{ name, dir, want string }{c.Name, dir, c.Reason})
		}
	} else {
		require.ErrorIs(t, err, fakebackend.ErrNoCompiler)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "not a backend" && len(mustList(t, c.dir)) == 0 {
				t.Skip("no libz.so.1 on this machine")
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestBackendDirChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), backendChildEnv+"=1", llamacpp.BackendDirEnv+"="+c.dir)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			var warnings []string
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "llamacpp:") {
					warnings = append(warnings, line)
				}
			}
			require.Len(t, warnings, 1, "%s", out)
			assert.Contains(t, warnings[0], c.want)
			assert.Contains(t, string(out), "devices: ")
			t.Log(warnings[0])
		})
	}
}

func mustList(t *testing.T, dir string) []os.DirEntry {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	return entries
}
