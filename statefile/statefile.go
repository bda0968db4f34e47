// Package statefile saves a sequence's state to a file and reads it back,
// in this process or another: the KV-cache state of the sequence (as
// llamacpp.Context.SeqState returns it), its tokens, the generation state
// of a request that was running (generation.RequestState's binary form) and
// an application's own data (llamagen keeps its conversation there).
//
// A state only makes sense with the model that computed it, so the file
// names the model by a [Fingerprint] of its GGUF file, and Read refuses a
// file of another model, another version of the format, or one whose bytes
// were truncated or changed (a SHA-256 checksum covers the whole file), each
// with an error that says which, before anything reaches llama.cpp.
//
// # Layout
//
// All integers are little-endian:
//
//	magic        8 bytes  "LLMLSTAT"
//	version      uint32   1
//	size         uint64   the file's size in bytes
//	fingerprint  32 bytes the model's Fingerprint
//	tokens       uint32 count, then int32 each
//	kv           uint64 length, then the bytes
//	request      uint64 length, then the bytes (empty when none)
//	app          uint64 length, then the bytes (empty when none)
//	checksum     32 bytes SHA-256 of everything before it
//
// [Capture] and [File.Restore] move a state between a file and an entry of
// a prefixcache.Cache, where a generation finds it by its tokens.
package statefile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/prefixcache"
)

// Magic opens every state file; Version is the version this package writes
// and reads.
const (
	Magic   = "LLMLSTAT"
	Version = 1
)

// Errors that Read wraps, for errors.Is.
var (
	ErrNotState = errors.New("not a llamaloop state file")
	ErrVersion  = errors.New("unsupported state file version")
	ErrCorrupt  = errors.New("state file truncated or corrupted")
	ErrModel    = errors.New("state file of another model")
)

// File is the content of a state file.
type File struct {
	// Fingerprint names the model the state belongs to.
	Fingerprint [32]byte
	// Tokens is the history the KV state holds.
	Tokens []int32
	// KV is the sequence's KV-cache state (llamacpp.Context.SeqState).
	KV []byte
	// Request is a generation.RequestState's binary form, or empty.
	Request []byte
	// App is the application's own data, or empty.
	App []byte
}

const headerSize = 8 + 4 + 8 + 32

// Encode returns the bytes of f as a state file.
func (f *File) Encode() []byte {
	n := headerSize + 4 + 4*len(f.Tokens) + 8 + len(f.KV) + 8 + len(f.Request) + 8 + len(f.App) + sha256.Size
	b := make([]byte, 0, n)
	b = append(b, Magic...)
	b = binary.LittleEndian.AppendUint32(b, Version)
	b = binary.LittleEndian.AppendUint64(b, uint64(n))
	b = append(b, f.Fingerprint[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(f.Tokens)))
	for _, t := range f.Tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	for _, part := range [][]byte{f.KV, f.Request, f.App} {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(part)))
		b = append(b, part...)
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// Decode parses a state file and checks it against the fingerprint of the
// model that will use it.
func Decode(data []byte, fingerprint [32]byte) (*File, error) {
	if len(data) < len(Magic) || string(data[:len(Magic)]) != Magic {
		return nil, ErrNotState
	}
	if len(data) < headerSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the header", ErrCorrupt, len(data))
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != Version {
		return nil, fmt.Errorf("%w %d (this build reads version %d)", ErrVersion, v, Version)
	}
	if size := binary.LittleEndian.Uint64(data[12:]); size != uint64(len(data)) {
		return nil, fmt.Errorf("%w: %d bytes, the header says %d", ErrCorrupt, len(data), size)
	}
	body := data[:len(data)-sha256.Size]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], data[len(body):]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	f := &File{}
	copy(f.Fingerprint[:], data[20:52])
	if f.Fingerprint != fingerprint {
		return nil, fmt.Errorf("%w (fingerprint %x, this model's is %x)", ErrModel, f.Fingerprint[:6], fingerprint[:6])
	}
	rest := body[headerSize:]
	var err error
	take := func(n uint64) []byte {
		if err != nil || n > uint64(len(rest)) {
			err = fmt.Errorf("%w: a field of %d bytes overruns the file", ErrCorrupt, n)
			return nil
		}
		out := rest[:n:n]
		rest = rest[n:]
		return out
	}
	count := take(4)
	if err == nil {
		raw := take(4 * uint64(binary.LittleEndian.Uint32(count)))
		for i := 0; i+4 <= len(raw); i += 4 {
			f.Tokens = append(f.Tokens, int32(binary.LittleEndian.Uint32(raw[i:])))
		}
	}
	for _, part := range []*[]byte{&f.KV, &f.Request, &f.App} {
		if n := take(8); err == nil {
			*part = take(binary.LittleEndian.Uint64(n))
		}
	}
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("%w: %d bytes after the last field", ErrCorrupt, len(rest))
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Write writes f to path atomically: a reader sees the old file or the new
// one, never part of it.
func Write(path string, f *File) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	_, err = tmp.Write(f.Encode())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}

// Read reads and checks the state file at path (see Decode).
func Read(path string, fingerprint [32]byte) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	f, err := Decode(data, fingerprint)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	return f, nil
}

// fingerprintData is how much of the tensor data the fingerprint covers:
// enough to tell apart two models of one shape with other weights.
const fingerprintData = 1 << 20

// Fingerprint identifies the GGUF model at path: a SHA-256 of its header
// (metadata, vocabulary and tensor infos), of the first MiB of its tensor
// data, and of its size.
func Fingerprint(modelPath string) ([32]byte, error) {
	r, err := gguf.Open(modelPath)
	if err != nil {
		return [32]byte{}, fmt.Errorf("fingerprint: %w", err)
	}
	defer r.Close()
	f, err := os.Open(modelPath)
	if err != nil {
		return [32]byte{}, fmt.Errorf("fingerprint: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return [32]byte{}, fmt.Errorf("fingerprint: %w", err)
	}
	h := sha256.New()
	n := min(int64(r.DataOffset)+fingerprintData, st.Size())
	if _, err := io.CopyN(h, f, n); err != nil {
		return [32]byte{}, fmt.Errorf("fingerprint: %w", err)
	}
	binary.Write(h, binary.LittleEndian, st.Size())
	var out [32]byte
	h.Sum(out[:0])
	return out, nil
}

// SlotSaver returns the KV state of an underlying slot of a
// prefixcache.Cache (llamabackend.Backend.SaveSlot).
type SlotSaver interface {
	SaveSlot(slot int) ([]byte, error)
}

// SlotLoader restores a KV state of n tokens into an empty underlying slot
// (llamabackend.Backend.LoadSlot).
type SlotLoader interface {
	LoadSlot(slot int, state []byte, n int) error
}

// Capture returns a File holding tokens and their KV state, taken from the
// entry of pc that holds them (the slot a finished or stopped request left
// there). It fails when no entry holds all of tokens, as for a sequence
// with input embeddings (an image's), which a file of tokens cannot name.
func Capture(pc *prefixcache.Cache, slots SlotSaver, tokens []int32) (*File, error) {
	slot, n, held := pc.Lookup(tokens, nil)
	if n < len(tokens) || len(tokens) == 0 {
		return nil, fmt.Errorf("state file: the cache holds %d of the sequence's %d tokens", n, len(tokens))
	}
	if held != n {
		return nil, fmt.Errorf("state file: the cache entry holds %d tokens, the sequence %d", held, n)
	}
	kv, err := slots.SaveSlot(slot)
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	return &File{Tokens: append([]int32(nil), tokens...), KV: kv}, nil
}

// Restore makes the file's sequence an entry of pc, its KV state loaded
// into a free cache slot; a generation whose prompt starts with the tokens
// then evaluates only the rest. When the state cannot be loaded the cache
// and the backend are as they were (but for entries evicted to make room).
func (f *File) Restore(pc *prefixcache.Cache, slots SlotLoader) error {
	return pc.Adopt(f.Tokens, func(slot int) error { return slots.LoadSlot(slot, f.KV, len(f.Tokens)) })
}
