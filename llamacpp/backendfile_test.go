package llamacpp_test

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeBackend compiles, with the system's C compiler, a library shaped
// like a ggml backend into dir: libggml-fake.so exports ggml_backend_init
// (which returns NULL, so ggml refuses it cleanly once loaded) and needs
// libggml-base.so beside it through $ORIGIN, as the real backends do. It
// returns the backend's path; the test is skipped without a compiler.
func fakeBackend(t *testing.T, dir string) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			t.Skip("no C compiler to build a backend library with")
		}
	}
	if runtime.GOOS != "linux" {
		t.Skip("the backend library check reads ELF files")
	}
	src := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(src, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	base := write("base.c", "int ggml_fake_base(void) { return 1; }\n")
	backend := write("backend.c", "int ggml_fake_base(void);\n"+
		"void * ggml_backend_init(void) { return ggml_fake_base() ? (void *) 0 : (void *) 1; }\n"+
		"int ggml_backend_score(void) { return 1; }\n")
	run := func(args ...string) {
		out, err := exec.Command(cc, args...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	run("-shared", "-fPIC", "-o", filepath.Join(dir, "libggml-base.so"), base)
	lib := filepath.Join(dir, "libggml-fake.so")
	run("-shared", "-fPIC", "-o", lib, backend, "-L"+dir, "-lggml-base", "-Wl,-rpath,$ORIGIN")
	return lib
}

// truncate cuts the file at path to n bytes.
func truncate(t *testing.T, path string, n int64) {
	t.Helper()
	require.NoError(t, os.Truncate(path, n))
}

// stretchFirstLoad makes the first PT_LOAD program header of the ELF64
// little-endian file at path claim four times the file's size: the
// section headers stay intact, only the segment overruns the file.
func stretchFirstLoad(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, byte(elf.ELFCLASS64), data[elf.EI_CLASS])
	le := binary.LittleEndian
	phoff, phentsize, phnum := le.Uint64(data[0x20:]), uint64(le.Uint16(data[0x36:])), uint64(le.Uint16(data[0x38:]))
	for i := range phnum {
		ph := data[phoff+i*phentsize:]
		if elf.ProgType(le.Uint32(ph)) == elf.PT_LOAD {
			le.PutUint64(ph[32:], uint64(len(data))*4) // p_filesz
			le.PutUint64(ph[40:], uint64(len(data))*4) // p_memsz
			require.NoError(t, os.WriteFile(path, data, 0o644))
			return
		}
	}
	t.Fatal("no PT_LOAD header")
}

// setMachine writes e_machine of the ELF file at path.
func setMachine(t *testing.T, path string, m elf.Machine) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	binary.LittleEndian.PutUint16(data[0x12:], uint16(m))
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// backendCase is one hostile library in a backend folder: setup damages a
// fresh fake backend in dir, and want is in the check's reason.
type backendCase struct {
	name  string
	setup func(t *testing.T, dir, lib string)
	want  string
}

func backendCases() []backendCase {
	size := func(t *testing.T, p string) int64 {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		return fi.Size()
	}
	return []backendCase{
		{"cut to 1 KiB", func(t *testing.T, _, lib string) { truncate(t, lib, 1024) }, "not a readable ELF file"},
		{"cut in half", func(t *testing.T, _, lib string) { truncate(t, lib, size(t, lib)/2) }, "not a readable ELF file"},
		{"one byte short", func(t *testing.T, _, lib string) { truncate(t, lib, size(t, lib)-1) }, "not a readable ELF file"},
		{"segment past the end", func(t *testing.T, _, lib string) { stretchFirstLoad(t, lib) }, "cut short: program header"},
		{"dependency cut short", func(t *testing.T, dir, _ string) {
			p := filepath.Join(dir, "libggml-base.so")
			truncate(t, p, size(t, p)/2)
		}, "needs "},
		{"dependency segment past the end", func(t *testing.T, dir, _ string) {
			stretchFirstLoad(t, filepath.Join(dir, "libggml-base.so"))
		}, "cut short: program header"},
		{"another machine", func(t *testing.T, _, lib string) { setMachine(t, lib, elf.EM_S390) }, "built for"},
		{"a folder", func(t *testing.T, _, lib string) {
			require.NoError(t, os.Remove(lib))
			require.NoError(t, os.Mkdir(lib, 0o755))
		}, "a directory, not a library"},
		{"a link loop", func(t *testing.T, _, lib string) {
			require.NoError(t, os.Remove(lib))
			require.NoError(t, os.Symlink(lib, lib))
		}, "too many levels of symbolic links"},
		{"no ggml_backend_init", func(t *testing.T, dir, lib string) {
			// ggml-base is an ELF library of this machine, not a backend
			data, err := os.ReadFile(filepath.Join(dir, "libggml-base.so"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(lib, data, 0o644))
		}, "no ggml_backend_init"},
	}
}

// The check refuses each damaged library with its reason and passes the
// intact one.
func TestCheckBackendLibrary(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, llamacpp.CheckBackendLibrary(fakeBackend(t, dir)))
	for _, c := range backendCases() {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			lib := fakeBackend(t, dir)
			c.setup(t, dir, lib)
			err := llamacpp.CheckBackendLibrary(lib)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			t.Log(err)
		})
	}
}
