package llamacpp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/llamaloop/llamaloop/internal/testkit/asan"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// miniSpec is the smallest model the corrupt-file tests mutate: every
// llama.cpp code path of the tiny model, a fraction of its bytes.
func miniSpec() testmodel.Spec {
	return testmodel.Spec{
		Name: "llamaloop-mini", NEmbd: 16, NLayer: 1, NHead: 2, NHeadKV: 1, NFF: 32, NCtxTrain: 128,
		RopeFreqBase: 10000, RMSEps: 1e-5, WeightType: gguf.TensorF16, Tied: true, Seed: 3,
		Vocab: testmodel.TinyVocab(false),
	}
}

// miniModel writes the mini model once per test and returns its path.
func miniModel(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mini.gguf")
	require.NoError(t, testmodel.WriteRandom(path, miniSpec()))
	return path
}

// rewrite writes a copy of the model at src with edited metadata and tensor
// infos; each tensor keeps the bytes of the source tensor of its name,
// truncated or zero-padded to its new size.
func rewrite(t testing.TB, src string, edit func(md []gguf.KV, ts []gguf.TensorInfo) ([]gguf.KV, []gguf.TensorInfo)) string {
	t.Helper()
	r, err := gguf.Open(src)
	require.NoError(t, err)
	defer r.Close()
	md := append([]gguf.KV(nil), r.Metadata...)
	ts := make([]gguf.TensorInfo, len(r.Tensors))
	for i, ti := range r.Tensors {
		ti.Shape = append([]uint64(nil), ti.Shape...)
		ts[i] = ti
	}
	md, ts = edit(md, ts)
	dst := filepath.Join(t.TempDir(), "mutated.gguf")
	f, err := os.Create(dst)
	require.NoError(t, err)
	defer f.Close()
	w, err := gguf.NewWriter(f, md, ts)
	require.NoError(t, err)
	for _, ti := range ts {
		size, err := ti.Size()
		require.NoError(t, err)
		data := make([]byte, size)
		if old, err := r.TensorBytes(ti.Name); err == nil {
			copy(data, old)
		}
		_, err = w.Write(data)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return dst
}

// setKV replaces (or appends) a metadata value.
func setKV(md []gguf.KV, key string, v any) []gguf.KV {
	for i := range md {
		if md[i].Key == key {
			md[i].Value = v
			return md
		}
	}
	return append(md, gguf.KV{Key: key, Value: v})
}

// editKV rewrites src with one metadata value changed.
func editKV(t testing.TB, src, key string, v any) string {
	return rewrite(t, src, func(md []gguf.KV, ts []gguf.TensorInfo) ([]gguf.KV, []gguf.TensorInfo) {
		return setKV(md, key, v), ts
	})
}

// patch writes a copy of src with the 8-byte little-endian length or count
// that precedes the first occurrence of marker replaced by n; off is where
// that field starts relative to marker.
func patch(t testing.TB, src string, marker string, off int, n uint64) string {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	i := bytes.Index(data, []byte(marker))
	require.Positive(t, i, "marker %q", marker)
	binary.LittleEndian.PutUint64(data[i+off:], n)
	dst := filepath.Join(t.TempDir(), "patched.gguf")
	require.NoError(t, os.WriteFile(dst, data, 0o644))
	return dst
}

// emptyKey writes a copy of src in which the metadata key name, in place,
// becomes an empty key holding an empty string (the 12 bytes of a type and
// a string length take the place of the name's bytes); len(name) must be 12.
func emptyKey(t testing.TB, src, name string) string {
	t.Helper()
	require.Len(t, name, 12)
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	i := bytes.Index(data, []byte(name))
	require.Positive(t, i)
	binary.LittleEndian.PutUint64(data[i-8:], 0)
	binary.LittleEndian.PutUint32(data[i:], uint32(gguf.TypeString))
	binary.LittleEndian.PutUint64(data[i+4:], 0)
	dst := filepath.Join(t.TempDir(), "emptykey.gguf")
	require.NoError(t, os.WriteFile(dst, data, 0o644))
	return dst
}

// exercise loads the model at path and, when that succeeds, does what the
// crashes of corrupt files need to show: a decode (after an encode, for an
// encoder-decoder model), a tokenization and every token's piece.
func exercise(path string, p llamacpp.ModelParams) error {
	m, err := llamacpp.LoadModel(path, p)
	if err != nil {
		return err
	}
	defer m.Close()
	v := m.Vocab()
	if _, err := v.Tokenize("Hello, world!\n\xff é", true, true); err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	for id := range v.Size() {
		if _, err := v.Piece(int32(id), true); err != nil {
			return fmt.Errorf("piece %d: %w", id, err)
		}
	}
	if p.VocabOnly {
		return nil
	}
	ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: 64, BatchSize: 8, Threads: 1})
	if err != nil {
		return fmt.Errorf("context: %w", err)
	}
	defer ctx.Close()
	b, err := llamacpp.NewBatch(2, 1)
	if err != nil {
		return err
	}
	defer b.Close()
	if _, err := b.Add(int32(min(5, v.Size()-1)), 0, 0, true); err != nil {
		return err
	}
	if start, ok := m.DecoderStart(); m.HasEncoder() {
		// An encoder-decoder model encodes first; its decoder starts from
		// its start token.
		if err := ctx.Encode(context.Background(), b); err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		if !ok {
			return nil
		}
		b.Clear()
		if _, err := b.Add(start, 0, 0, true); err != nil {
			return err
		}
	}
	if err := ctx.Decode(context.Background(), b); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return nil
}

// The child-process protocol: the parent re-executes the test binary to run
// TestExerciseChild alone on one file, so that a crash in llama.cpp fails
// one test instead of killing the whole binary.
const (
	childPathEnv      = "LLAMALOOP_EXERCISE_PATH"
	childAllowPreEnv  = "LLAMALOOP_EXERCISE_ALLOW_PRE"
	childUncheckedEnv = "LLAMALOOP_EXERCISE_UNCHECKED" // hand refused files to llama.cpp
	childResult       = "EXERCISE-RESULT: "
)

// TestExerciseChild is the child side; it is skipped in an ordinary run.
func TestExerciseChild(t *testing.T) {
	path := os.Getenv(childPathEnv)
	if path == "" {
		t.Skip("runs only as the child of a corrupt-model test")
	}
	if os.Getenv(childUncheckedEnv) != "" {
		llamacpp.LoadUnchecked()
	}
	err := exercise(path, llamacpp.ModelParams{AllowUnknownPreTokenizer: os.Getenv(childAllowPreEnv) != ""})
	msg := "ok"
	if err != nil {
		msg = "error: " + err.Error()
		if !errors.Is(err, llamacpp.ErrLoad) {
			msg = "unwrapped " + msg
		}
	}
	fmt.Println(childResult + strings.ReplaceAll(msg, "\n", " "))
}

// childRun is the outcome of exercising one file in a child process.
type childRun struct {
	crashed bool   // the child died or exited non-zero
	result  string // "ok", "error: ..." or "" when it crashed
	output  string
	maxRSS  int64 // bytes
}

// runChild exercises path in a child process.
func runChild(t testing.TB, path string, allowPre bool) childRun {
	t.Helper()
	if allowPre {
		return runChildEnv(t, path, childAllowPreEnv+"=1")
	}
	return runChildEnv(t, path)
}

// runChildEnv exercises path in a child process with env added to its
// environment.
func runChildEnv(t testing.TB, path string, env ...string) childRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestExerciseChild$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), childPathEnv+"="+path), env...)
	out, err := cmd.CombinedOutput()
	var run childRun
	run.output = string(out)
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			run.maxRSS = ru.Maxrss * 1024
		}
	}
	for _, line := range strings.Split(run.output, "\n") {
		if s, ok := strings.CutPrefix(line, childResult); ok {
			run.result = s
		}
	}
	run.crashed = err != nil || run.result == ""
	return run
}

// requireRefused asserts that the file at path is refused with an error
// naming want, in a child process that must not crash.
// loadReadingHeaderOnly loads the model at path and requires that its
// validation read the file, and that no read began in the tensor data:
// the validation costs the same for a gigabyte model. The data begins
// where gguf's reader says, or, where it cannot read the header, past the
// end of the file. Reads are counted, not timed, so the machine's speed
// does not matter.
func loadReadingHeaderOnly(t *testing.T, path string) error {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	dataStart := st.Size()
	if r, err := gguf.Open(path); err == nil {
		dataStart = int64(r.DataOffset)
		r.Close()
	}
	var read, lastStart int64
	restore := llamacpp.ObserveValidationReads(func(p string, off int64, n int) {
		if p == path {
			read += int64(n)
			lastStart = max(lastStart, off)
		}
	})
	defer restore()
	_, err = llamacpp.LoadModel(path, llamacpp.ModelParams{})
	assert.Positive(t, read, "the validation read the file")
	assert.Less(t, lastStart, dataStart, "the validation began a read in the tensor data (read %d bytes)", read)
	return err
}

func requireRefused(t *testing.T, path, want string) {
	t.Helper()
	run := runChild(t, path, false)
	require.False(t, run.crashed, "the child crashed:\n%s", tail(run.output, 3000))
	require.True(t, strings.HasPrefix(run.result, "error: "), "got %q, want a load error wrapping ErrLoad", run.result)
	assert.Contains(t, run.result, want)
	// A file of a few MB justifies no allocation of gigabytes.
	assert.Less(t, run.maxRSS, childRSSBound, "peak RSS of the child")
}

// childRSSBound is the most a child that reads a crafted file may hold:
// 512 MB, the bound of issue 26's campaigns; AddressSanitizer's shadow
// memory and quarantine add about 600 MB to every child (588 MB measured
// for a file the pre-check refuses).
var childRSSBound = func() int64 {
	if asan.Enabled {
		return 1536 << 20
	}
	return 512 << 20
}()

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestCorruptModels mutates a valid model precisely into each kind of file
// that crashed llama.cpp (issue 14) and requires a clean refusal. Each runs
// in a child process: before validation, each of them killed the process.
func TestCorruptModels(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process per case")
	}
	src := miniModel(t)
	run := runChild(t, src, false)
	require.Equal(t, "ok", run.result, "the unmutated model: %s", tail(run.output, 3000))

	tensor := func(name string, edit func(*gguf.TensorInfo)) string {
		return rewrite(t, src, func(md []gguf.KV, ts []gguf.TensorInfo) ([]gguf.KV, []gguf.TensorInfo) {
			for i := range ts {
				if ts[i].Name == name {
					edit(&ts[i])
				}
			}
			return md, ts
		})
	}
	tokens := testmodel.TinyVocab(false).Tokens
	cases := []struct {
		name string
		path func() string
		want string
	}{
		// GGML_ASSERT(!key.empty()) in gguf.cpp.
		{"empty key", func() string { return emptyKey(t, src, "general.name") }, "empty key"},
		// A key length past its bytes: gguf.cpp reads garbage keys.
		{"key length", func() string { return patch(t, src, "general.name", -8, 1<<40) }, "truncated"},
		// SIGFPE: gguf.cpp divides INT64_MAX by every dimension.
		{"zero dimension", func() string {
			return tensor("blk.0.attn_q.weight", func(ti *gguf.TensorInfo) { ti.Shape[1] = 0 })
		}, `tensor "blk.0.attn_q.weight": dimension 1 is 0`},
		// Abort in the vocabulary loader.
		{"duplicate token", func() string {
			dup := append([]string(nil), tokens...)
			dup[len(dup)-1] = dup[len(dup)-2]
			return editKV(t, src, "tokenizer.ggml.tokens", dup)
		}, "tokenizer.ggml.tokens: token"},
		// llama.cpp reads tokens as C strings: a NUL makes two the same.
		{"duplicate token after NUL", func() string {
			dup := append([]string(nil), tokens...)
			dup[len(dup)-1] = dup[len(dup)-2] + "\x00x"
			return editKV(t, src, "tokenizer.ggml.tokens", dup)
		}, "tokenizer.ggml.tokens: token"},
		// SIGSEGV at PC=0 in the first decode: no integer dot product.
		{"integer weights", func() string {
			return tensor("blk.0.ffn_up.weight", func(ti *gguf.TensorInfo) { ti.Type = gguf.TensorI16 })
		}, `tensor "blk.0.ffn_up.weight": type i16`},
		{"integer norm", func() string {
			return tensor("blk.0.attn_norm.weight", func(ti *gguf.TensorInfo) { ti.Type = gguf.TensorI32 })
		}, `tensor "blk.0.attn_norm.weight": type i32`},
		{"block_count 0", func() string { return editKV(t, src, "llama.block_count", uint32(0)) }, "llama.block_count: 0 layers"},
		// Aborts in the first decode.
		{"rms epsilon NaN", func() string {
			return editKV(t, src, "llama.attention.layer_norm_rms_epsilon", float32(math.NaN()))
		}, "llama.attention.layer_norm_rms_epsilon: is NaN"},
		{"rms epsilon negative", func() string {
			return editKV(t, src, "llama.attention.layer_norm_rms_epsilon", float32(-1e-5))
		}, "llama.attention.layer_norm_rms_epsilon: is -1e-05"},
		// token_to_byte aborts for a WordPiece vocabulary.
		{"bert with byte tokens", func() string { return editKV(t, src, "tokenizer.ggml.model", "bert") }, `a byte token, which a "bert" tokenizer`},
		// gguf.cpp sizes arrays by their count: gigabytes from a small file.
		{"array count", func() string { return patch(t, src, "tokenizer.ggml.scores", 21+8, 1<<29) }, `"tokenizer.ggml.scores": truncated`},
		// n_gqa divides by the key/value heads.
		{"head_count_kv 0", func() string { return editKV(t, src, "llama.attention.head_count_kv", uint32(0)) }, "key/value heads"},
		// Scores read through a raw pointer, n_tokens of them.
		{"short scores", func() string { return editKV(t, src, "tokenizer.ggml.scores", []float32{0, 0}) }, "tokenizer.ggml.scores"},
		{"string scores", func() string { return editKV(t, src, "tokenizer.ggml.scores", tokens) }, "tokenizer.ggml.scores"},
		{"float head counts", func() string { return editKV(t, src, "llama.attention.head_count", []float32{2}) }, "llama.attention.head_count"},
		{"too many experts", func() string { return editKV(t, src, "llama.expert_used_count", uint32(2)) }, "llama.expert_used_count"},
		{"rope scaling", func() string { return editKV(t, src, "llama.rope.scaling.type", "spiral") }, `unknown RoPE scaling "spiral"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := c.path()
			// The child first: where it crashes, so would this process.
			requireRefused(t, path, c.want)
			err := loadReadingHeaderOnly(t, path)
			require.ErrorIs(t, err, llamacpp.ErrLoad)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// bpeModel rewrites the mini model with a byte-level BPE ("gpt2")
// vocabulary named after the pre-tokenizer pre ("" for none).
func bpeModel(t *testing.T, src, pre string) string {
	return rewrite(t, src, func(md []gguf.KV, ts []gguf.TensorInfo) ([]gguf.KV, []gguf.TensorInfo) {
		var out []gguf.KV
		for _, kv := range md {
			if kv.Key != "tokenizer.ggml.scores" && kv.Key != "tokenizer.ggml.pre" {
				out = append(out, kv)
			}
		}
		// Byte tokens of SentencePiece have no meaning in BPE: make them
		// ordinary pieces.
		types := testmodel.TinyVocab(false).Types
		tt := make([]int32, len(types))
		for i, ty := range types {
			tt[i] = int32(ty)
			if ty == testmodel.TokenByte {
				tt[i] = int32(testmodel.TokenNormal)
			}
		}
		out = setKV(out, "tokenizer.ggml.token_type", tt)
		out = setKV(out, "tokenizer.ggml.model", "gpt2")
		out = setKV(out, "tokenizer.ggml.merges", []string{"a b"})
		if pre != "" {
			out = setKV(out, "tokenizer.ggml.pre", pre)
		}
		return out, ts
	})
}

// TestUnknownPreTokenizer: a BPE vocabulary whose pre-tokenizer this
// llama.cpp does not know would be split by llama.cpp's default rules with
// only a log line; LoadModel refuses it unless the caller accepts that.
func TestUnknownPreTokenizer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	src := miniModel(t)
	known := bpeModel(t, src, "gpt-2")
	assert.Equal(t, "ok", runChild(t, known, false).result)

	unknown := bpeModel(t, src, "qwen35-future")
	requireRefused(t, unknown, `pre-tokenizer "qwen35-future" is unknown`)
	_, err := llamacpp.LoadModel(unknown, llamacpp.ModelParams{VocabOnly: true})
	require.ErrorIs(t, err, llamacpp.ErrLoad)
	assert.Contains(t, err.Error(), `pre-tokenizer "qwen35-future" is unknown`)
	assert.Contains(t, err.Error(), "AllowUnknownPreTokenizer")
	if llamacpp.UnknownPreTokenizerFallsBack {
		assert.Equal(t, "ok", runChild(t, unknown, true).result, "accepted with the option")
	} else {
		assert.Contains(t, runChild(t, unknown, true).result, `error: llamacpp: cannot load model`)
		_, err = llamacpp.LoadModel(unknown, llamacpp.ModelParams{VocabOnly: true, AllowUnknownPreTokenizer: true})
		assert.ErrorContains(t, err, `pre-tokenizer "qwen35-future" is unknown to llama.cpp 3f545becc`)
	}

	missing := bpeModel(t, src, "")
	requireRefused(t, missing, "tokenizer.ggml.pre: missing")
	_, err = llamacpp.LoadModel(missing, llamacpp.ModelParams{VocabOnly: true})
	require.ErrorIs(t, err, llamacpp.ErrLoad)
	assert.Contains(t, err.Error(), "tokenizer.ggml.pre: missing")
	assert.Equal(t, "ok", runChild(t, missing, true).result, "accepted with the option")
}

// TestValidModelsAccepted: the validation refuses none of the models the
// project writes, and reads only their headers.
func TestValidModelsAccepted(t *testing.T) {
	for _, name := range []string{"tiny-f32", "tiny-f16", "prefix"} {
		m, err := llamacpp.LoadModel(modelPath(t, name), llamacpp.ModelParams{VocabOnly: true})
		require.NoError(t, err, name)
		m.Close()
	}
	dir := t.TempDir()
	demo, err := testmodel.NewDemo()
	require.NoError(t, err)
	path := filepath.Join(dir, "demo.gguf")
	require.NoError(t, demo.Write(path))
	m, err := llamacpp.LoadModel(path, llamacpp.ModelParams{})
	require.NoError(t, err)
	m.Close()
	// Quantized weights: q8_0 and q4_0 made by llama.cpp's own quantizer.
	f16 := modelPath(t, "tiny-f16")
	for _, q := range []struct {
		name string
		ft   llamacpp.FileType
	}{{"q8_0", llamacpp.Q8_0}, {"q4_0", llamacpp.Q4_0}} {
		out := filepath.Join(dir, "tiny-"+q.name+".gguf")
		require.NoError(t, llamacpp.Quantize(f16, out, q.ft, 1))
		m, err := llamacpp.LoadModel(out, llamacpp.ModelParams{})
		require.NoError(t, err, q.name)
		m.Close()
	}
}

// FuzzLoadModel loads mutated copies of the mini model: LoadModel must
// return a model or an error, and a model it returns must tokenize, give
// every piece and decode, without crashing the process.
func FuzzLoadModel(f *testing.F) {
	src := miniModel(f)
	data, err := os.ReadFile(src)
	require.NoError(f, err)
	f.Add(data)
	// Seeds near the crash kinds, so that `go test` exercises them.
	f.Add(data[:len(data)/3])
	flipped := append([]byte(nil), data...)
	flipped[40] ^= 0x10
	f.Add(flipped)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "fuzz.gguf")
		require.NoError(t, os.WriteFile(path, b, 0o644))
		err := exercise(path, llamacpp.ModelParams{})
		if err != nil && strings.HasPrefix(err.Error(), "llamacpp: cannot load model") {
			require.ErrorIs(t, err, llamacpp.ErrLoad)
		}
	})
}
