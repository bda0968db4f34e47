package llamacpp_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBatchAfterClose: every Batch method after Close reports ErrClosed or
// a harmless value, never a panic.
func TestBatchAfterClose(t *testing.T) {
	b, err := llamacpp.NewBatch(8, 2)
	require.NoError(t, err)
	_, err = b.Add(5, 0, 0, true)
	require.NoError(t, err)
	require.NoError(t, b.SetOutput(0, false))
	assert.ErrorIs(t, b.SetOutput(1, true), llamacpp.ErrInvalidArgument, "index beyond the batch's tokens")
	require.NoError(t, b.Close())
	assert.ErrorIs(t, b.SetOutput(0, true), llamacpp.ErrClosed)
	_, err = b.Add(5, 1, 0, true)
	assert.ErrorIs(t, err, llamacpp.ErrClosed)
	_, err = b.AddShared(5, 1, []int32{0, 1}, true)
	assert.ErrorIs(t, err, llamacpp.ErrClosed)
	b.Clear()
	assert.Equal(t, 0, b.Len())
	assert.Equal(t, 8, b.Cap())
	require.NoError(t, b.Close())
}

// TestNewBatchBounds: capacities beyond MaxBatch are refused before any
// allocation, and a batch that does not fit in the memory left gives
// ErrNoMemory naming the capacity (checked in a child process whose address
// space may grow by 192 MB; the batch needs about 300 MB). The margin leaves
// room for the Go runtime, which reserves its heap in 64 MB arenas: with 64 MB
// one more arena left no room at all, and small batches failed too.
func TestNewBatchBounds(t *testing.T) {
	_, err := llamacpp.NewBatch(llamacpp.MaxBatch+1, 1)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	if !llamatest.UnderAddressLimit(t, 192<<20) {
		return
	}
	_, err = llamacpp.NewBatch(llamacpp.MaxBatch, 64)
	require.ErrorIs(t, err, llamacpp.ErrNoMemory)
	assert.ErrorContains(t, err, "NewBatch capacity 1048576 with 64 sequences per token needs 307 MB")
	b, err := llamacpp.NewBatch(512, 1)
	require.NoError(t, err, "small batches still fit")
	require.NoError(t, b.Close())
}

// TestVocabDuringClose: goroutines tokenizing long texts, rendering pieces
// and reading token texts while the model closes get right results or
// ErrClosed, never a crash or garbage; Close waits for the calls in flight
// (the model's memory is then reused by the next load), and every call after
// it returns ErrClosed.
func TestVocabDuringClose(t *testing.T) {
	text := strings.Repeat("hello world, hello vocabulary. ", 2000)
	for round := range 10 {
		m, err := llamacpp.LoadModel(modelPath(t, "tiny-f32"), llamatest.ModelParams(t, llamacpp.ModelParams{VocabOnly: true}))
		require.NoError(t, err)
		v := m.Vocab()
		want, err := v.Tokenize(text, true, false)
		require.NoError(t, err)
		var running, wg sync.WaitGroup
		errs := make(chan error, 4)
		for g := range 4 {
			wg.Add(1)
			running.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					var err error
					switch (g + i) % 4 {
					case 0, 1:
						var got []int32
						if got, err = v.Tokenize(text, true, false); err == nil && !slices.Equal(got, want) {
							err = fmt.Errorf("round %d: %d tokens differ from the %d expected", round, len(got), len(want))
						}
					case 2:
						_, err = v.Piece(want[i%len(want)], false)
					case 3:
						_, err = v.Detokenize(want, false, false)
					}
					if i == 0 {
						running.Done()
					}
					if err != nil {
						if !errors.Is(err, llamacpp.ErrClosed) {
							errs <- err
						}
						return
					}
				}
			}()
		}
		running.Wait()
		require.NoError(t, m.Close())
		// Reuse the freed memory while late calls may still read it.
		m2, err := llamacpp.LoadModel(modelPath(t, "tiny-f32"), llamatest.ModelParams(t, llamacpp.ModelParams{VocabOnly: true}))
		require.NoError(t, err)
		_, err = v.Tokenize("x", false, false)
		assert.ErrorIs(t, err, llamacpp.ErrClosed)
		_, err = v.Piece(want[0], false)
		assert.ErrorIs(t, err, llamacpp.ErrClosed)
		_, err = v.Attr(want[0])
		assert.ErrorIs(t, err, llamacpp.ErrClosed)
		wg.Wait()
		require.NoError(t, m2.Close())
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

// TestContextMemoryBounds: a context whose KV cache, or whose micro-batch
// buffers, cannot fit in the memory left is refused before llama.cpp
// allocates, with an error naming the option (in a child process whose
// address space may grow by 1 GiB). The sizes are llama.cpp's own: it logs
// a KV buffer of 96 MiB for 65536 cells of the tiny model with f16 keys and
// values (3 layers, 2 KV heads of 64), so 2^24 cells take 256 times that.
func TestContextMemoryBounds(t *testing.T) {
	if !llamatest.UnderAddressLimit(t, 1<<30) {
		return
	}
	// On the CPU whatever the test mode: a KV cache on a GPU is not bounded
	// by host memory.
	m, err := llamacpp.LoadModel(modelPath(t, "tiny-f32"), llamacpp.ModelParams{})
	require.NoError(t, err)
	defer m.Close()
	_, err = m.NewContext(llamacpp.ContextParams{ContextSize: 1 << 24, Threads: 1})
	require.ErrorIs(t, err, llamacpp.ErrNoMemory)
	assert.Regexp(t, `^llamacpp: not enough memory: ContextSize 16777216 needs 25.8 GB of KV cache \(f16 keys, f16 values, 3 layers\); [\d.]+ [kMG]B available$`, err.Error())
	var me *llamacpp.MemoryError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, "ContextSize 16777216", me.Param)
	assert.Equal(t, "25.8 GB of KV cache (f16 keys, f16 values, 3 layers)", me.Needs())
	assert.Less(t, me.Available, me.Need)
	_, err = m.NewContext(llamacpp.ContextParams{ContextSize: 1 << 24, TypeK: llamacpp.KVQ4_0, TypeV: llamacpp.KVQ4_0, FlashAttention: llamacpp.FlashAttentionOn, Threads: 1})
	require.ErrorIs(t, err, llamacpp.ErrNoMemory)
	assert.ErrorContains(t, err, "ContextSize 16777216 needs 7.25 GB of KV cache (q4_0 keys, q4_0 values")
	_, err = m.NewContext(llamacpp.ContextParams{BatchSize: llamacpp.MaxBatch, Threads: 1})
	require.ErrorIs(t, err, llamacpp.ErrNoMemory)
	assert.ErrorContains(t, err, "BatchSize 1048576 with ContextSize 512 (the default) needs")
	_, err = m.NewContext(llamacpp.ContextParams{ContextSize: 1 << 16, BatchSize: 4096, FlashAttention: llamacpp.FlashAttentionOff, Threads: 1})
	require.ErrorIs(t, err, llamacpp.ErrNoMemory)
	assert.ErrorContains(t, err, "BatchSize 4096 with ContextSize 65536 needs")
	ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: 4096, Threads: 1})
	require.NoError(t, err, "a context that fits is created")
	require.NoError(t, ctx.Close())
}

// TestNULBytes: strings that reach llama.cpp as C strings refuse a NUL
// instead of losing what follows it; text that llama.cpp takes with its
// length keeps it.
func TestNULBytes(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	v := m.Vocab()
	chat := func(msgs ...backend.Message) (string, error) { return v.ApplyChatTemplate("chatml", msgs, true) }
	whole, err := chat(backend.Message{Role: "user", Content: "hello world"})
	require.NoError(t, err)
	assert.Equal(t, "<|im_start|>user\nhello world<|im_end|>\n<|im_start|>assistant\n", whole)
	_, err = chat(backend.Message{Role: "system", Content: "be brief"}, backend.Message{Role: "user", Content: "hello\x00world"})
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	assert.ErrorContains(t, err, "message 1 contains a NUL byte")
	_, err = chat(backend.Message{Role: "us\x00er", Content: "hello"})
	assert.ErrorContains(t, err, "message 0 contains a NUL byte")
	_, err = v.ApplyChatTemplate("chatml\x00junk", []backend.Message{{Role: "user", Content: "hi"}}, true)
	assert.ErrorContains(t, err, "chat template contains a NUL byte")

	arch, ok := m.MetadataValue("general.architecture")
	require.True(t, ok)
	assert.Equal(t, "llama", arch)
	_, ok = m.MetadataValue("general.architecture\x00.other")
	assert.False(t, ok, "a key cut at its NUL would name another key")
	_, ok = m.ChatTemplate("x\x00")
	assert.False(t, ok)
	out := filepath.Join(t.TempDir(), "q.gguf")
	err = llamacpp.Quantize(modelPath(t, "tiny-f32"), out+"\x00.tmp", llamacpp.Q8_0, 1)
	assert.ErrorContains(t, err, "contains a NUL byte")
	_, err = os.Stat(out)
	assert.True(t, os.IsNotExist(err), "nothing written at the path before the NUL")

	// Tokenize passes a length: the NUL and what follows are tokenized.
	short, err := v.Tokenize("ab", false, false)
	require.NoError(t, err)
	long, err := v.Tokenize("ab\x00ab", false, false)
	require.NoError(t, err)
	assert.Greater(t, len(long), len(short))
}

// TestLoadWarnings: what llama.cpp warns about while loading reaches the
// caller through Model.Warnings, with the default (quiet) logger: the
// fallback to the default pre-tokenizer that AllowUnknownPreTokenizer
// accepts, and nothing about a known one.
func TestLoadWarnings(t *testing.T) {
	src := miniModel(t)
	fallback := "missing or unrecognized pre-tokenizer type, using: 'default'"
	cases := []struct {
		pre  string
		warn bool
	}{{"gpt-2", false}, {"qwen35-future", true}, {"", true}}
	if !llamacpp.UnknownPreTokenizerFallsBack {
		// after the pin an unknown one is refused (TestUnknownPreTokenizer), a missing one warned of
		fallback = "missing pre-tokenizer type, using: 'default'"
		cases = slices.Delete(cases, 1, 2)
	}
	for _, c := range cases {
		m, err := llamacpp.LoadModel(bpeModel(t, src, c.pre), llamacpp.ModelParams{VocabOnly: true, AllowUnknownPreTokenizer: true})
		require.NoError(t, err)
		w := m.Warnings()
		require.NoError(t, m.Close())
		t.Logf("pre-tokenizer %q: %q", c.pre, w)
		found := slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, fallback) })
		assert.Equal(t, c.warn, found, "pre-tokenizer %q: warnings %q", c.pre, w)
	}
	// The tiny model's one warning: its EOS is not in llama.cpp's list of
	// end-of-generation tokens, which llama.cpp then extends with it.
	m, err := llamacpp.LoadModel(modelPath(t, "tiny-f32"), llamacpp.ModelParams{})
	require.NoError(t, err)
	defer m.Close()
	if llamacpp.UnknownPreTokenizerFallsBack {
		assert.Equal(t, []string{"load: special_eos_id is not in special_eog_ids - the tokenizer config may be incorrect"}, m.Warnings())
	} else {
		assert.Empty(t, m.Warnings(), "llama.cpp after the pin no longer warns of the EOS it adds")
	}
}
