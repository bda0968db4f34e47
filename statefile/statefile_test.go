package statefile_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/statefile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sample() *statefile.File {
	return &statefile.File{
		Fingerprint: [32]byte{1, 2, 3},
		Tokens:      []int32{1, 500, 70000, 3},
		KV:          []byte("kv cells"),
		Request:     []byte{9, 9},
	}
}

// A file reads back as written; a file cut anywhere, with any byte
// changed, of another version or another model, or not a state file at
// all is refused with the error that says so.
func TestDecodeRefuses(t *testing.T) {
	f := sample()
	data := f.Encode()
	got, err := statefile.Decode(data, f.Fingerprint)
	require.NoError(t, err)
	assert.Equal(t, f.Tokens, got.Tokens)
	assert.Equal(t, f.KV, got.KV)
	assert.Equal(t, f.Request, got.Request)
	assert.Empty(t, got.App)

	for cut := 8; cut < len(data); cut++ {
		_, err := statefile.Decode(data[:cut], f.Fingerprint)
		require.ErrorIs(t, err, statefile.ErrCorrupt, "cut at %d", cut)
	}
	for i := 20; i < len(data); i++ { // every byte after magic, version and size
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x40
		_, err := statefile.Decode(bad, f.Fingerprint)
		require.ErrorIs(t, err, statefile.ErrCorrupt, "byte %d", i)
	}
	_, err = statefile.Decode(data, [32]byte{7})
	require.ErrorIs(t, err, statefile.ErrModel)
	assert.ErrorContains(t, err, "another model")

	v2 := append([]byte(nil), data...)
	binary.LittleEndian.PutUint32(v2[8:], 2)
	_, err = statefile.Decode(v2, f.Fingerprint)
	require.ErrorIs(t, err, statefile.ErrVersion)
	assert.ErrorContains(t, err, "version 2 (this build reads version 1)")

	_, err = statefile.Decode([]byte("GGUF\x03\x00\x00\x00 and more"), f.Fingerprint)
	require.ErrorIs(t, err, statefile.ErrNotState)
	_, err = statefile.Decode(nil, f.Fingerprint)
	require.ErrorIs(t, err, statefile.ErrNotState)
}

// Write replaces a file whole, and Read checks what it reads.
func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.state")
	f := sample()
	require.NoError(t, statefile.Write(path, f))
	f.App = []byte("conversation")
	require.NoError(t, statefile.Write(path, f))
	got, err := statefile.Read(path, f.Fingerprint)
	require.NoError(t, err)
	assert.Equal(t, []byte("conversation"), got.App)
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left")
	_, err = statefile.Read(filepath.Join(t.TempDir(), "none"), f.Fingerprint)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// Two models of one shape but other weights have other fingerprints; one
// file has one.
func TestFingerprint(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	sa, sb := testmodel.TinySpec(gguf.TensorF32), testmodel.TinySpec(gguf.TensorF32)
	sb.Seed = sa.Seed + 1
	require.NoError(t, testmodel.WriteRandom(a, sa))
	require.NoError(t, testmodel.WriteRandom(b, sb))
	fa, err := statefile.Fingerprint(a)
	require.NoError(t, err)
	fa2, err := statefile.Fingerprint(a)
	require.NoError(t, err)
	fb, err := statefile.Fingerprint(b)
	require.NoError(t, err)
	assert.Equal(t, fa, fa2)
	assert.NotEqual(t, fa, fb)
	_, err = statefile.Fingerprint(filepath.Join(dir, "none.gguf"))
	require.Error(t, err)
}
