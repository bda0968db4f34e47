package cgo_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeInstall lays out the pinned module's headers as cmake --install would
// (include/, lib/ with empty static libraries), editing llama.h with edit.
func fakeInstall(t *testing.T, edit func(string) string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/ollama/ollama").Output()
	require.NoError(t, err)
	mod := strings.TrimSpace(string(out))
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "include"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "lib"), 0o755))
	for _, src := range []string{"llama/llama.cpp/include", "ml/backend/ggml/ggml/include"} {
		hs, err := filepath.Glob(filepath.Join(mod, src, "*.h"))
		require.NoError(t, err)
		for _, h := range hs {
			b, err := os.ReadFile(h)
			require.NoError(t, err)
			if filepath.Base(h) == "llama.h" {
				b = []byte(edit(string(b)))
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, "include", filepath.Base(h)), b, 0o644))
		}
	}
	for _, l := range []string{"libllama.a", "libggml.a", "libggml-base.a", "libggml-cpu.a"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "lib", l), nil, 0o644))
	}
	return dir
}

func probe(t *testing.T, dir string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command("bash", "../build/llama-probe.sh", dir)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// build/llama-probe.sh takes the pinned generation of the C API from its
// headers, and names in one line what an install lacks.
func TestLlamaProbe(t *testing.T) {
	if _, err := os.Stat("../build/llama-probe.sh"); err != nil {
		t.Skip("no checkout around the test binary (a GPU bundle): ", err)
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs go to find the module's headers")
	}
	same := func(s string) string { return s }
	out, _, err := probe(t, fakeInstall(t, same))
	require.NoError(t, err)
	flags, libs, ok := strings.Cut(strings.TrimSpace(out), "|")
	require.True(t, ok, out)
	assert.Contains(t, flags, "-DLLAMALOOP_EXTERNAL -DLLAMALOOP_PROBED")
	assert.NotContains(t, flags, "LOAD_MODE", "the pin has use_mmap")
	assert.NotContains(t, flags, "PENALTIES_N_VOCAB")
	assert.Contains(t, libs, "-lllama -lggml -lggml-cpu -lggml-base")

	_, stderr, err := probe(t, fakeInstall(t, func(s string) string {
		return strings.ReplaceAll(s, "llama_model_n_embd_inp", "llama_model_n_embd_input")
	}))
	require.Error(t, err)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	assert.Contains(t, stderr, "llamaloop: the llama.cpp in ")
	assert.Contains(t, stderr, "declares no 'llama_model_n_embd_inp', which llamaloop calls (supported: llama.cpp ec98e2002")

	_, stderr, err = probe(t, fakeInstall(t, func(s string) string {
		return strings.ReplaceAll(s, "bool kv_unified;", "bool kv_unified_x;")
	}))
	require.Error(t, err)
	assert.Contains(t, stderr, "has no field 'kv_unified' that llamaloop sets")

	_, stderr, err = probe(t, t.TempDir())
	require.Error(t, err)
	assert.Contains(t, stderr, "no include/llama.h under LLAMA_CPP=")
}

// A shared install (BUILD_SHARED_LIBS=ON) links its libraries through an
// absolute rpath, so that a program runs from any folder without
// LD_LIBRARY_PATH; one whose backends are run-time modules (GGML_BACKEND_DL)
// has no CPU backend to link and gets one line saying so.
func TestLlamaProbeSharedInstall(t *testing.T) {
	if _, err := os.Stat("../build/llama-probe.sh"); err != nil {
		t.Skip("no checkout around the test binary (a GPU bundle): ", err)
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs go to find the module's headers")
	}
	same := func(s string) string { return s }
	shared := func(t *testing.T, libs ...string) string {
		dir := fakeInstall(t, same)
		as, err := filepath.Glob(filepath.Join(dir, "lib", "*.a"))
		require.NoError(t, err)
		for _, a := range as {
			require.NoError(t, os.Remove(a))
		}
		for _, l := range libs {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "lib", l), nil, 0o644))
		}
		return dir
	}
	dir := shared(t, "libllama.so", "libllama.so.0", "libggml.so", "libggml.so.0", "libggml-base.so", "libggml-base.so.0.9.7",
		"libggml-cpu.so", "libggml-cpu.so.0")
	// A relative LLAMA_CPP still yields absolute paths (cgo compiles in the package's folder).
	wd, err := os.Getwd()
	require.NoError(t, err)
	rel, err := filepath.Rel(wd, dir)
	require.NoError(t, err)
	out, stderr, err := probe(t, rel)
	require.NoError(t, err, stderr)
	flags, libs, ok := strings.Cut(strings.TrimSpace(out), "|")
	require.True(t, ok, out)
	assert.Contains(t, flags, "-DLLAMALOOP_SHARED=1")
	assert.Contains(t, flags, "-I"+dir+"/include")
	assert.Contains(t, libs, "-L"+dir+"/lib -lllama -lggml -lggml-cpu -lggml-base -Wl,-rpath,"+dir+"/lib")
	assert.NotContains(t, libs, "-lstdc++", "a shared libllama brings its own dependencies")

	dl := shared(t, "libllama.so", "libggml.so", "libggml-base.so")
	require.NoError(t, os.MkdirAll(filepath.Join(dl, "lib", "cmake", "ggml"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dl, "lib", "cmake", "ggml", "ggml-config.cmake"),
		[]byte("set(GGML_AVAILABLE_BACKENDS \"ggml-cpu\")\nset(GGML_BACKEND_DL \"ON\")\n"), 0o644))
	_, stderr, err = probe(t, dl)
	require.Error(t, err)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	assert.Contains(t, stderr, "is built with GGML_BACKEND_DL=ON")

	_, stderr, err = probe(t, shared(t, "libllama.so", "libggml.so", "libggml-base.so"))
	require.Error(t, err)
	assert.Contains(t, stderr, "no libggml-cpu in ")

	dir = shared(t, "libllama.so", "libggml.so", "libggml-base.so", "libggml-cpu.so")
	require.NoError(t, os.Remove(filepath.Join(dir, "include", "ggml-cpu.h")))
	_, stderr, err = probe(t, dir)
	require.Error(t, err)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	assert.Contains(t, stderr, "lacks the header ggml-cpu.h (supported: ")
}
