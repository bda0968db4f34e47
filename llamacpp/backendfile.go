package llamacpp

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// checkBackendLibrary says why the library at path must not be handed to
// ggml_backend_load, or returns nil. The dynamic loader maps a library's
// segments as the program headers describe them: a file cut short maps
// pages past its end, and the first read of one (the loader's own
// relocation pass, or ggml's symbol lookup) is a SIGBUS that no Go code can
// recover from. So a library is read in Go first, with debug/elf: it must
// be a regular file (after links), an ELF shared object of this machine's
// class, byte order and architecture, whose program headers and sections
// all lie within the file, with a dynamic segment and, in its dynamic
// symbol table, a defined ggml_backend_init inside an executable segment
// (and, where the library has one, a ggml_backend_score, which ggml calls
// before it). The libraries it needs that lie beside it (libggml-base.so,
// found through $ORIGIN) are checked the same way.
//
// What this does not cover: a file replaced or rewritten between this check
// and the load, or truncated while loaded (the loader maps it, it does not
// copy it). A folder of libraries is code the process runs; it must be
// writable only by whom the process trusts, like any library path.
//
// On systems whose libraries are not ELF (macOS, Windows) it checks only
// that path is a regular file.
func checkBackendLibrary(path string) (err error) {
	defer func() {
		// debug/elf reads hostile files; should one of its paths still
		// panic, the library is refused, not the process ended
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed ELF file: %v", r)
		}
	}()
	return checkLibrary(path, true, 0)
}

// maxNeededDepth bounds the chain of sibling dependencies followed.
const maxNeededDepth = 4

func checkLibrary(path string, backend bool, depth int) error {
	fi, err := os.Stat(path) // follows links; a loop is an error here
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		return errors.New("a directory, not a library")
	case !fi.Mode().IsRegular():
		return fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	machine, ok := elfMachine()
	if !ok {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil { // the file opened, not the one stat'ed
		return err
	}
	size := uint64(fi.Size())
	ef, err := elf.NewFile(f)
	if err != nil {
		return fmt.Errorf("not a readable ELF file (cut short or corrupt, %d bytes): %w", size, err)
	}
	if ef.Class != machine.class || ef.Data != machine.data || ef.Machine != machine.machine {
		return fmt.Errorf("built for %s %s %s, this machine runs %s %s %s",
			ef.Class, ef.Data, ef.Machine, machine.class, machine.data, machine.machine)
	}
	if ef.Type != elf.ET_DYN {
		return fmt.Errorf("an ELF %s, not a shared library", ef.Type)
	}
	if err := checkExtents(ef, size); err != nil {
		return err
	}
	if backend {
		if err := checkBackendSymbols(ef); err != nil {
			return err
		}
	}
	if depth >= maxNeededDepth {
		return nil
	}
	needed, err := ef.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("unreadable dynamic section: %w", err)
	}
	dir := filepath.Dir(path)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		dir = filepath.Dir(real) // $ORIGIN is the library's own folder
	}
	for _, name := range needed {
		sibling := filepath.Join(dir, filepath.Base(name))
		if _, err := os.Lstat(sibling); err != nil {
			continue // not beside it: the system's loader path finds it
		}
		if err := checkLibrary(sibling, false, depth+1); err != nil {
			return fmt.Errorf("needs %s, which cannot load: %w", sibling, err)
		}
	}
	return nil
}

// checkExtents checks that every program header and every section with
// file contents lies within the file's size bytes, and that the library has
// a dynamic segment.
func checkExtents(ef *elf.File, size uint64) error {
	within := func(off, n uint64) bool { return off <= size && n <= size-off }
	dynamic := false
	for i, p := range ef.Progs {
		if !within(p.Off, p.Filesz) {
			return fmt.Errorf("cut short: program header %d (%s) spans bytes [%d, %d+%d) of a %d-byte file", i, p.Type, p.Off, p.Off, p.Filesz, size)
		}
		if p.Type == elf.PT_LOAD && p.Filesz > p.Memsz {
			return fmt.Errorf("program header %d maps %d file bytes into %d bytes of memory", i, p.Filesz, p.Memsz)
		}
		dynamic = dynamic || p.Type == elf.PT_DYNAMIC
	}
	if !dynamic {
		return errors.New("no dynamic segment")
	}
	for _, s := range ef.Sections {
		if s.Type == elf.SHT_NOBITS || s.Type == elf.SHT_NULL {
			continue
		}
		if !within(s.Offset, s.FileSize) {
			return fmt.Errorf("cut short: section %s spans bytes [%d, %d+%d) of a %d-byte file", s.Name, s.Offset, s.Offset, s.FileSize, size)
		}
	}
	return nil
}

// checkBackendSymbols checks the entry points ggml's loader calls: a
// defined ggml_backend_init, and ggml_backend_score where the library has
// one, each a function in an executable segment that the file holds.
func checkBackendSymbols(ef *elf.File) error {
	syms, err := ef.DynamicSymbols()
	if err != nil {
		return fmt.Errorf("no dynamic symbol table: %w", err)
	}
	found := map[string]elf.Symbol{}
	for _, s := range syms {
		if s.Name == "ggml_backend_init" || s.Name == "ggml_backend_score" {
			found[s.Name] = s
		}
	}
	for _, name := range []string{"ggml_backend_init", "ggml_backend_score"} {
		s, ok := found[name]
		if !ok {
			if name == "ggml_backend_init" {
				return errors.New("not a ggml backend: no ggml_backend_init in its dynamic symbols")
			}
			continue
		}
		if s.Section == elf.SHN_UNDEF || elf.ST_TYPE(s.Info) != elf.STT_FUNC {
			return fmt.Errorf("%s is not a function the library defines", name)
		}
		if !inExecutableSegment(ef, s.Value) {
			return fmt.Errorf("%s at %#x lies outside the library's code", name, s.Value)
		}
	}
	return nil
}

func inExecutableSegment(ef *elf.File, addr uint64) bool {
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			return true
		}
	}
	return false
}

// elfIdentity is what an ELF library must say to load into this process.
type elfIdentity struct {
	class   elf.Class
	data    elf.Data
	machine elf.Machine
}

// elfMachine is this process's ELF identity; ok is false where libraries
// are not ELF files, or the architecture is not listed.
func elfMachine() (id elfIdentity, ok bool) {
	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" || runtime.GOOS == "ios" {
		return id, false
	}
	id.class, id.data = elf.ELFCLASS64, elf.ELFDATA2LSB
	switch runtime.GOARCH {
	case "amd64":
		id.machine = elf.EM_X86_64
	case "arm64":
		id.machine = elf.EM_AARCH64
	case "riscv64":
		id.machine = elf.EM_RISCV
	case "loong64":
		id.machine = elf.EM_LOONGARCH
	case "ppc64le":
		id.machine = elf.EM_PPC64
	case "s390x":
		id.machine, id.data = elf.EM_S390, elf.ELFDATA2MSB
	case "386":
		id.machine, id.class = elf.EM_386, elf.ELFCLASS32
	case "arm":
		id.machine, id.class = elf.EM_ARM, elf.ELFCLASS32
	default:
		return id, false
	}
	return id, true
}
