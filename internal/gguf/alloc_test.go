package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// vocabFile is a GGUF file shaped like a model: a token list of 1000
// strings, then 4 MB of random f32 weights.
func vocabFile(t testing.TB) []byte {
	t.Helper()
	tokens := make([]string, 1000)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("tok%d", i)
	}
	const n = 1 << 20
	var buf bytes.Buffer
	w, err := NewWriter(&buf, []KV{{Key: "tokenizer.ggml.tokens", Value: tokens}},
		[]TensorInfo{{Name: "w", Type: TensorF32, Shape: []uint64{n}}})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = rng.Float32()
	}
	require.NoError(t, w.WriteFloat32s(vals))
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// withStringCount returns data with the element count of the string array
// of key replaced by the most strings the bytes after it could hold (8 bytes
// each, the length of an empty string).
func withStringCount(t testing.TB, data []byte, key string) []byte {
	t.Helper()
	i := bytes.Index(data, []byte(key))
	require.Positive(t, i)
	out := bytes.Clone(data)
	// key, value type (u32 array), element type (u32), count (u64)
	at := i + len(key) + 8
	binary.LittleEndian.PutUint64(out[at:], uint64(len(data)-at-8)/8)
	return out
}

// allocated is the bytes the Go heap allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestBadArrayCountAllocation: a string array whose count claims the rest of
// the file (the largest count the bytes left allow) fails after the strings
// that are really there, having allocated about what it read, not 16 bytes
// per claimed string (twice the file).
func TestBadArrayCountAllocation(t *testing.T) {
	good := vocabFile(t)
	var f *File
	base := allocated(func() {
		r, err := NewReader(bytes.NewReader(good), int64(len(good)))
		require.NoError(t, err)
		f = r.File
	})
	tokens, err := Get[[]string](f, "tokenizer.ggml.tokens")
	require.NoError(t, err)
	require.Len(t, tokens, 1000)

	bad := withStringCount(t, good, "tokenizer.ggml.tokens")
	var rerr error
	got := allocated(func() { _, rerr = NewReader(bytes.NewReader(bad), int64(len(bad))) })
	require.Error(t, rerr)
	t.Logf("file %d bytes; valid header allocates %d bytes, bad count %d", len(good), base, got)
	require.Less(t, got, 4*base+(256<<10), "allocation must follow the bytes read, not the claimed count")
	require.Less(t, got, uint64(len(bad))/8)
}
