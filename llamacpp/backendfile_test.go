package llamacpp_test

import (
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/fakebackend"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeBackend builds a library shaped like a ggml backend into dir
// (fakebackend.Build) and returns its path; the test is skipped without a
// C compiler.
func fakeBackend(t *testing.T, dir string) string {
	t.Helper()
	lib, err := fakebackend.Build(dir)
	if errors.Is(err, fakebackend.ErrNoCompiler) {
		t.Skip(err)
	}
	require.NoError(t, err)
	return lib
}

// The check refuses each damaged library with its reason and passes the
// intact one.
func TestCheckBackendLibrary(t *testing.T) {
	require.NoError(t, llamacpp.CheckBackendLibrary(fakeBackend(t, t.TempDir())))
	for _, c := range fakebackend.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			lib := fakeBackend(t, dir)
			require.NoError(t, c.Damage(dir, lib))
			err := llamacpp.CheckBackendLibrary(lib)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.Reason)
			t.Log(err)
		})
	}
}

// The ELF checks pass the system's own shared libraries (with the
// libraries each needs beside it): the extents and identity they require
// are what every well-formed library has.
func TestCheckPassesSystemLibraries(t *testing.T) {
	libs, _ := filepath.Glob("/lib/*/lib*.so*")
	libs2, _ := filepath.Glob("/usr/lib/*/lib*.so*")
	libs = append(libs, libs2...)
	checked := 0
	for _, p := range libs {
		if checked == 300 {
			break
		}
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || !isELFSharedObject(p) {
			continue // linker scripts (libc.so), links to nowhere, executables
		}
		checked++
		assert.NoError(t, llamacpp.CheckSharedLibrary(p), p)
	}
	if checked == 0 {
		t.Skip("no ELF shared libraries under /lib or /usr/lib")
	}
	t.Logf("%d system libraries pass", checked)
}

// isELFSharedObject reports whether path is an ELF file of type ET_DYN of
// this machine's class (a 32-bit multilib library is another machine's).
func isELFSharedObject(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	return f.Type == elf.ET_DYN && f.Class == elf.ELFCLASS64 && f.Machine == machine
}
