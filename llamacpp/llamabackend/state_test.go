package llamabackend_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/llamaloop/llamaloop/prefixcache"
	"github.com/llamaloop/llamaloop/statefile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cachedGenerator makes a generator over a prefix cache over a fresh
// context of m with slots sequences, cacheSlots of them for the cache.
func cachedGenerator(t testing.TB, m *llamacpp.Model, p llamacpp.ContextParams, cacheSlots int) (*generation.Generator, *prefixcache.Cache, *llamabackend.Backend) {
	t.Helper()
	_, lb := llamaGenerator(t, m, p)
	pc, err := prefixcache.New(lb, prefixcache.Options{CacheSlots: cacheSlots})
	require.NoError(t, err)
	return generation.NewGenerator(pc, llamabackend.Tokenizer{Vocab: m.Vocab()}), pc, lb
}

// A chat over the prefix cache gives on llama.cpp (f32 KV cache) the tokens
// of the same chat without it, greedy and sampled, with and without a
// unified cache, while every turn after the first evaluates only its new
// tokens; a conversation that starts over copies the system prompt from a
// cached or running one.
func TestLlamaPrefixCacheUnchanged(t *testing.T) {
	m := llamaModel(t, "tiny")
	for _, unified := range []bool{false, true} {
		for _, sample := range []bool{false, true} {
			t.Run("unified="+strconv.FormatBool(unified)+"/sample="+strconv.FormatBool(sample), func(t *testing.T) {
				plain, _ := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 1024, Sequences: 2, UnifiedKV: unified})
				cached, pc, _ := cachedGenerator(t, m, llamacpp.ContextParams{ContextSize: 2048, Sequences: 4, UnifiedKV: unified}, 2)
				system, err := m.Vocab().Tokenize("The model said: llama loop is a Go text", true, false)
				require.NoError(t, err)
				convs := [][]int32{slices.Clone(system), slices.Clone(system)}
				held, held0 := 0, 0
				for turn := range 4 {
					reqs := make([]generation.Request, 2)
					if turn == 3 {
						// Conversation 1 starts over: it copies the system prompt
						// from a cached or running sequence (a partial copy: a
						// whole stream without a unified cache, then a truncation).
						convs[1] = slices.Clone(system)
					}
					for i := range convs {
						user, err := m.Vocab().Tokenize(" and we want "+strconv.Itoa(turn*10+i), false, false)
						require.NoError(t, err)
						convs[i] = append(convs[i], user...)
						cfg := greedyConfig(12)
						if sample {
							cfg = sampleConfig(12)
						}
						reqs[i] = generation.Request{Prompt: slices.Clone(convs[i]), Config: cfg, Seed: uint64(turn*2 + i)}
					}
					want, err := plain.Generate(context.Background(), reqs)
					require.NoError(t, err)
					before := pc.Stats()
					got, err := cached.Generate(context.Background(), reqs)
					require.NoError(t, err)
					after := pc.Stats()
					for i := range reqs {
						require.Equal(t, want[i].Tokens, got[i].Tokens, "turn %d, conversation %d", turn, i)
						convs[i] = append(convs[i], got[i].Tokens...)
					}
					if turn == 3 {
						// Conversation 0 takes its entry; conversation 1 copies
						// what it shares with it (its own old entry shares as
						// much: the user turns differ in their last token).
						shared := 0
						for shared < len(reqs[1].Prompt)-1 && reqs[1].Prompt[shared] == reqs[0].Prompt[shared] && shared < held0 {
							shared++
						}
						require.GreaterOrEqual(t, shared, len(system))
						assert.Equal(t, before.Hits+2, after.Hits)
						assert.EqualValues(t, held0+shared, after.TokensSaved-before.TokensSaved)
					}
					if turn > 0 && turn < 3 {
						// Each conversation's previous prompt and reply, all but
						// the reply's last token (never fed), were not evaluated
						// again.
						assert.Equal(t, before.Hits+2, after.Hits)
						assert.EqualValues(t, held, after.TokensSaved-before.TokensSaved)
					}
					held = 0
					for i := range reqs {
						held += len(reqs[i].Prompt) + len(got[i].Tokens) - 1
					}
					held0 = len(reqs[0].Prompt) + len(got[0].Tokens) - 1
				}
			})
		}
	}
}

func resumeRequest(kind string) generation.Request {
	cfg := greedyConfig(40)
	cfg.RepetitionPenalty = 1.3
	cfg.NoRepeatNGramSize = 3
	req := generation.Request{Text: "The model said: llama loop", Config: cfg, Seed: 42}
	switch kind {
	case "sample":
		cfg.DoSample, cfg.TopK = true, 0
	case "mirostat":
		req.Mirostat = &mirostat.Config{Version: mirostat.V2, Tau: 4, Eta: 0.1}
	}
	return req
}

// A request stopped after k tokens and saved to a file is resumed by a new
// model and context (another process in all but the process) with exactly
// the tokens the uninterrupted request produced, for greedy decoding,
// seeded sampling and Mirostat; the resumed request evaluates one token
// before its next.
func TestLlamaResumeFromFile(t *testing.T) {
	for _, kind := range []string{"greedy", "sample", "mirostat"} {
		t.Run(kind, func(t *testing.T) {
			req := resumeRequest(kind)
			params := llamacpp.ContextParams{ContextSize: 512, Sequences: 2}
			path, _ := llamaModels.Load("tiny")
			m := llamaModel(t, "tiny")
			fp, err := statefile.Fingerprint(path.(string))
			require.NoError(t, err)

			plain, _ := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 512})
			full, err := plain.Generate(context.Background(), []generation.Request{req})
			require.NoError(t, err)
			want := full[0].Tokens
			require.Len(t, want, 40)

			const k = 13
			gen, pc, lb := cachedGenerator(t, m, params, 1)
			var st *generation.RequestState
			n := 0
			for _, err := range gen.Stream(context.Background(), []generation.Request{req}) {
				require.NoError(t, err)
				if n++; n == k {
					st, err = gen.State(0)
					require.NoError(t, err)
					break
				}
			}
			// The slot holds the prompt and every token but the last, which
			// is fed on resuming.
			f, err := statefile.Capture(pc, lb, append(slices.Clone(st.Prompt), st.Tokens[:k-1]...))
			require.NoError(t, err)
			f.Fingerprint = fp
			if f.Request, err = st.MarshalBinary(); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "req.state")
			require.NoError(t, statefile.Write(file, f))

			m2 := llamaModel(t, "tiny") // a new model, a new context
			gen2, pc2, lb2 := cachedGenerator(t, m2, params, 1)
			back, err := statefile.Read(file, fp)
			require.NoError(t, err)
			require.NoError(t, back.Restore(pc2, lb2))
			var st2 generation.RequestState
			require.NoError(t, st2.UnmarshalBinary(back.Request))
			var rest []int32
			for ev, err := range gen2.Resume(context.Background(), []generation.Request{req}, []*generation.RequestState{&st2}) {
				require.NoError(t, err)
				if ev.Token >= 0 {
					rest = append(rest, ev.Token)
				}
			}
			assert.Equal(t, want, append(st2.Tokens, rest...))
			s := pc2.Stats()
			assert.EqualValues(t, len(st.Prompt)+k-1, s.TokensSaved, "only the last saved token was evaluated")
		})
	}
}

// A truncated, corrupted, foreign-model or wrong-version state file is
// refused with an error that says which, and so is a state that llama.cpp
// cannot use (another KV cache type or layout); the context is unchanged:
// every sequence still empty, the cache's entries as they were.
func TestLlamaStateFileRefused(t *testing.T) {
	m := llamaModel(t, "tiny")
	path, _ := llamaModels.Load("tiny")
	fp, err := statefile.Fingerprint(path.(string))
	require.NoError(t, err)
	params := llamacpp.ContextParams{ContextSize: 512, Sequences: 2}
	gen, pc, lb := cachedGenerator(t, m, params, 1)
	res, err := gen.Generate(context.Background(), []generation.Request{{Text: "Hello world", Config: greedyConfig(8)}})
	require.NoError(t, err)
	prompt, err := m.Vocab().Tokenize("Hello world", true, false)
	require.NoError(t, err)
	seq := append(prompt, res[0].Tokens[:7]...)
	f, err := statefile.Capture(pc, lb, seq)
	require.NoError(t, err)
	f.Fingerprint = fp
	dir := t.TempDir()
	good := filepath.Join(dir, "good.state")
	require.NoError(t, statefile.Write(good, f))
	data, err := os.ReadFile(good)
	require.NoError(t, err)

	// A fresh context to load into: nothing may reach it.
	_, pc2, lb2 := cachedGenerator(t, m, params, 1)
	unchanged := func() {
		t.Helper()
		for s := range 2 {
			p, err := lb2.Context().SeqPosMax(int32(s))
			require.NoError(t, err)
			assert.Equal(t, int32(-1), p, "sequence %d is empty", s)
		}
		assert.Zero(t, pc2.Stats().Entries)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	corrupt := slices.Clone(data)
	corrupt[len(corrupt)/2] ^= 1
	v9 := slices.Clone(data)
	binary.LittleEndian.PutUint32(v9[8:], 9)
	for _, c := range []struct {
		name, path string
		fp         [32]byte
		is         error
		says       string
	}{
		{"truncated", write("cut.state", data[:len(data)-100]), fp, statefile.ErrCorrupt, "truncated or corrupted"},
		{"corrupted", write("bad.state", corrupt), fp, statefile.ErrCorrupt, "checksum mismatch"},
		{"foreign model", good, markovFingerprint(t), statefile.ErrModel, "another model"},
		{"wrong version", write("v9.state", v9), fp, statefile.ErrVersion, "version 9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := statefile.Read(c.path, c.fp)
			require.ErrorIs(t, err, c.is)
			assert.ErrorContains(t, err, c.says)
			unchanged()
		})
	}

	// Checked files that llama.cpp cannot use in this context.
	back, err := statefile.Read(good, fp)
	require.NoError(t, err)
	for _, p := range []llamacpp.ContextParams{
		{ContextSize: 512, Sequences: 3},                                               // another layout
		{ContextSize: 512, Sequences: 2, TypeK: llamacpp.KVF16, TypeV: llamacpp.KVF16}, // another KV type
	} {
		_, pc3, lb3 := cachedGenerator(t, m, p, 1)
		err := back.Restore(pc3, lb3)
		require.ErrorIs(t, err, llamacpp.ErrState)
		t.Log(err)
		for s := range p.Sequences {
			pos, _ := lb3.Context().SeqPosMax(int32(s))
			assert.Equal(t, int32(-1), pos)
		}
		assert.Zero(t, pc3.Stats().Entries)
	}
	// The good file loads, and the sequence continues as it would have.
	require.NoError(t, back.Restore(pc2, lb2))
	assert.EqualValues(t, 1, pc2.Stats().Entries)
}

func markovFingerprint(t *testing.T) [32]byte {
	llamaModel(t, "markov")
	p, _ := llamaModels.Load("markov")
	fp, err := statefile.Fingerprint(p.(string))
	require.NoError(t, err)
	return fp
}
