// Package fakebackend builds libraries shaped like ggml backends, and
// damages ELF files as a cut download or a bad disk would, for the tests
// and the campaign of the backend folder (LLAMALOOP_BACKEND_DIR).
package fakebackend

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// ErrNoCompiler is what Build returns where no C compiler is installed, or
// the system's libraries are not ELF.
var ErrNoCompiler = errors.New("fakebackend: no C compiler for ELF libraries on this machine")

// Build compiles, with the system's C compiler, a library shaped like a
// ggml backend into dir: libggml-fake.so exports ggml_backend_init (which
// returns NULL, so ggml refuses it cleanly once loaded) and
// ggml_backend_score, and needs libggml-base.so beside it through $ORIGIN,
// as the real backends do. It returns the backend's path.
func Build(dir string) (string, error) {
	if runtime.GOOS != "linux" {
		return "", ErrNoCompiler
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			return "", ErrNoCompiler
		}
	}
	src, err := os.MkdirTemp("", "fakebackend")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	sources := map[string]string{
		"base.c": "int ggml_fake_base(void) { return 1; }\n",
		"backend.c": "int ggml_fake_base(void);\n" +
			"void * ggml_backend_init(void) { return ggml_fake_base() ? (void *) 0 : (void *) 1; }\n" +
			"int ggml_backend_score(void) { return 1; }\n",
	}
	for name, text := range sources {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			return "", err
		}
	}
	run := func(args ...string) error {
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("fakebackend: %s %v: %w\n%s", cc, args, err, out)
		}
		return nil
	}
	if err := run("-shared", "-fPIC", "-o", filepath.Join(dir, "libggml-base.so"), filepath.Join(src, "base.c")); err != nil {
		return "", err
	}
	lib := filepath.Join(dir, "libggml-fake.so")
	return lib, run("-shared", "-fPIC", "-o", lib, filepath.Join(src, "backend.c"), "-L"+dir, "-lggml-base", "-Wl,-rpath,$ORIGIN")
}

// Truncate cuts the file at path to n bytes (n < 0: that many bytes short
// of its size).
func Truncate(path string, n int64) error {
	if n < 0 {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		n += fi.Size()
	}
	return os.Truncate(path, max(n, 0))
}

// Halve cuts the file at path to half its size.
func Halve(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.Truncate(path, fi.Size()/2)
}

// StretchFirstLoad makes the first PT_LOAD program header of the ELF64
// little-endian file at path claim four times the file's size: the section
// headers stay intact, only the segment overruns the file.
func StretchFirstLoad(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(data) < 64 || data[elf.EI_CLASS] != byte(elf.ELFCLASS64) || data[elf.EI_DATA] != byte(elf.ELFDATA2LSB) {
		return fmt.Errorf("fakebackend: %s is not an ELF64 little-endian file", path)
	}
	le := binary.LittleEndian
	phoff, phentsize, phnum := le.Uint64(data[0x20:]), uint64(le.Uint16(data[0x36:])), uint64(le.Uint16(data[0x38:]))
	for i := range phnum {
		off := phoff + i*phentsize
		if off+56 > uint64(len(data)) {
			break
		}
		ph := data[off:]
		if elf.ProgType(le.Uint32(ph)) == elf.PT_LOAD {
			le.PutUint64(ph[32:], uint64(len(data))*4) // p_filesz
			le.PutUint64(ph[40:], uint64(len(data))*4) // p_memsz
			return os.WriteFile(path, data, 0o644)
		}
	}
	return fmt.Errorf("fakebackend: %s has no PT_LOAD header", path)
}

// SetMachine writes e_machine of the little-endian ELF file at path.
func SetMachine(path string, m elf.Machine) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(data) < 0x14 {
		return fmt.Errorf("fakebackend: %s is too short for an ELF header", path)
	}
	binary.LittleEndian.PutUint16(data[0x12:], uint16(m))
	return os.WriteFile(path, data, 0o644)
}

// Case is one way to damage a backend folder that Build filled: Damage
// edits dir, whose backend is lib.
type Case struct {
	Name   string
	Damage func(dir, lib string) error
	// Reason is in the warning of a library refused for this damage.
	Reason string
}

// Cases are the damaged folders of the tests and the campaign: the backend
// cut at 1 KiB, in half and one byte short, a segment past the file's end,
// the same for its dependency, another machine's library, a folder or a
// link loop in its place, and an ELF library that is not a backend.
func Cases() []Case {
	base := func(dir string) string { return filepath.Join(dir, "libggml-base.so") }
	return []Case{
		{"cut to 1 KiB", func(_, lib string) error { return Truncate(lib, 1024) }, "not a readable ELF file"},
		{"cut in half", func(_, lib string) error { return Halve(lib) }, "not a readable ELF file"},
		{"one byte short", func(_, lib string) error { return Truncate(lib, -1) }, "not a readable ELF file"},
		{"segment past the end", func(_, lib string) error { return StretchFirstLoad(lib) }, "cut short: program header"},
		{"dependency cut short", func(dir, _ string) error { return Halve(base(dir)) }, "needs "},
		{"dependency segment past the end", func(dir, _ string) error { return StretchFirstLoad(base(dir)) }, "cut short: program header"},
		{"another machine", func(_, lib string) error { return SetMachine(lib, elf.EM_S390) }, "built for"},
		{"a folder", func(_, lib string) error {
			if err := os.Remove(lib); err != nil {
				return err
			}
			return os.Mkdir(lib, 0o755)
		}, "a directory, not a library"},
		{"a link loop", func(_, lib string) error {
			if err := os.Remove(lib); err != nil {
				return err
			}
			return os.Symlink(lib, lib)
		}, "too many levels of symbolic links"},
		{"no ggml_backend_init", func(dir, lib string) error {
			// ggml-base is an ELF library of this machine, not a backend
			data, err := os.ReadFile(base(dir))
			if err != nil {
				return err
			}
			return os.WriteFile(lib, data, 0o644)
		}, "no ggml_backend_init"},
	}
}
