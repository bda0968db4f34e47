package generation

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func resumeRequest(kind string) Request {
	cfg := genconfig.Default()
	cfg.MaxNewTokens = intp(30)
	cfg.RepetitionPenalty = 1.5
	cfg.NoRepeatNGramSize = 2
	cfg.MinNewTokens = intp(12)
	cfg.EOSTokenID = []int32{tokEOS, tokEOT}
	req := Request{Text: "Hello world", Config: cfg, Seed: 7, StopStrings: []string{"éa"}}
	switch kind {
	case "sample":
		cfg.DoSample, cfg.TopK, cfg.Temperature = true, 0, 1.4
	case "mirostat":
		req.Mirostat = &mirostat.Config{Version: mirostat.V1, Tau: 3, Eta: 0.2}
	}
	return req
}

// A request stopped after k tokens, its state encoded, decoded and resumed
// by another generator over another backend, continues with exactly the
// tokens the uninterrupted request produced, for every k: greedy with
// penalties, sampling and Mirostat.
func TestResumeContinuesExactly(t *testing.T) {
	tok := testTokenizer{addBOS: true}
	vocab := len(testPieces)
	for _, kind := range []string{"greedy", "sample", "mirostat"} {
		t.Run(kind, func(t *testing.T) {
			req := resumeRequest(kind)
			full, err := NewGenerator(backend.NewMemoryBackend(vocab, 1, testmodel.HashModel(vocab)), tok).Generate(context.Background(), []Request{req})
			require.NoError(t, err)
			want := full[0]
			require.GreaterOrEqual(t, len(want.Tokens), 12, "min_new_tokens keeps it going")
			t.Logf("%d tokens, %s: %q", len(want.Tokens), want.Finish, want.Text)
			for k := 1; k < len(want.Tokens); k++ {
				g := NewGenerator(backend.NewMemoryBackend(vocab, 1, testmodel.HashModel(vocab)), tok)
				var st *RequestState
				var text []byte
				n := 0
				for ev, err := range g.Stream(context.Background(), []Request{req}) {
					require.NoError(t, err)
					text = append(text, ev.Text...)
					if n++; n == k {
						st, err = g.State(0)
						require.NoError(t, err)
						break
					}
				}
				data, err := st.MarshalBinary()
				require.NoError(t, err)
				var back RequestState
				require.NoError(t, back.UnmarshalBinary(data))
				require.Equal(t, st, &back)

				g2 := NewGenerator(backend.NewMemoryBackend(vocab, 1, testmodel.HashModel(vocab)), tok)
				var rest []int32
				var last Event
				for ev, err := range g2.Resume(context.Background(), []Request{req}, []*RequestState{&back}) {
					require.NoError(t, err)
					if ev.Token >= 0 {
						rest = append(rest, ev.Token)
					}
					text = append(text, ev.Text...)
					last = ev
				}
				require.Equal(t, want.Tokens, append(back.Tokens, rest...), "resumed after %d tokens", k)
				assert.Equal(t, want.Finish, last.Finish)
				assert.Equal(t, want.Text, string(text))
			}
		})
	}
}

// Resume refuses a state that does not belong to its request, and a
// damaged encoding, before anything runs.
func TestResumeRefuses(t *testing.T) {
	tok := testTokenizer{addBOS: true}
	vocab := len(testPieces)
	mem := backend.NewMemoryBackend(vocab, 1, testmodel.HashModel(vocab))
	g := NewGenerator(mem, tok)
	req := resumeRequest("mirostat")
	var st *RequestState
	for ev, err := range g.Stream(context.Background(), []Request{req}) {
		require.NoError(t, err)
		require.GreaterOrEqual(t, ev.Token, int32(0))
		st, err = g.State(0)
		require.NoError(t, err)
		break
	}
	_, err := g.State(0)
	require.ErrorContains(t, err, "outside the iteration")
	run := func(r Request, s *RequestState) error {
		for _, err := range g.Resume(context.Background(), []Request{r}, []*RequestState{s}) {
			if err != nil {
				return err
			}
		}
		return nil
	}
	other := req
	other.Text = "Hello"
	require.ErrorContains(t, run(other, st), "not the request's")
	plain := req
	plain.Mirostat = nil
	require.ErrorContains(t, run(plain, st), "Mirostat")
	bad := *st
	bad.Tokens = []int32{tokEOS}
	require.ErrorContains(t, run(req, &bad), "stop token")
	bad = *st
	bad.Source = []byte("nonsense")
	require.ErrorContains(t, run(req, &bad), "random source")
	assert.Empty(t, mem.History(0))

	data, err := st.MarshalBinary()
	require.NoError(t, err)
	for _, cut := range []int{0, 1, 5, len(data) - 1} {
		var back RequestState
		require.Error(t, back.UnmarshalBinary(data[:cut]), fmt.Sprint(cut))
	}
	var back RequestState
	require.ErrorContains(t, back.UnmarshalBinary(append(data, 0)), "too many")
	data[0] = 9
	require.ErrorContains(t, back.UnmarshalBinary(data), "version 9")
}

// A request with prompt embeddings keeps their digest in its state: it
// resumes with them (the prompt fed again with its embeddings), and the
// state refuses other embeddings or none; a version-1 encoding, which has
// no digest, still decodes.
func TestResumeWithEmbeddings(t *testing.T) {
	tok := testTokenizer{addBOS: true}
	vocab := len(testPieces)
	mem := backend.NewMemoryBackend(vocab, 1, testmodel.HashModel(vocab))
	g := NewGenerator(embeddingMemory{mem}, tok)
	prompt, err := g.PromptTokens(&Request{Text: "Hello world"})
	require.NoError(t, err)
	embd := make([][]float32, len(prompt))
	embd[1] = []float32{1, 2, 3, 4}
	req := resumeRequest("greedy")
	req.Text, req.Prompt, req.PromptEmbeddings = "", prompt, embd
	var st *RequestState
	n := 0
	for _, err := range g.Stream(context.Background(), []Request{req}) {
		require.NoError(t, err)
		if n++; n == 3 {
			st, err = g.State(0)
			require.NoError(t, err)
			break
		}
	}
	require.Len(t, st.Embeddings, 32)
	data, err := st.MarshalBinary()
	require.NoError(t, err)
	var back RequestState
	require.NoError(t, back.UnmarshalBinary(data))
	require.Equal(t, st, &back)

	run := func(r Request) error {
		for _, err := range g.Resume(context.Background(), []Request{r}, []*RequestState{&back}) {
			if err != nil {
				return err
			}
		}
		return nil
	}
	require.NoError(t, run(req))
	other := req
	other.PromptEmbeddings = slices.Clone(embd)
	other.PromptEmbeddings[1] = []float32{1, 2, 3, 5}
	require.ErrorContains(t, run(other), "the state's prompt embeddings (its media) are not the request's")
	other.PromptEmbeddings = nil
	require.ErrorContains(t, run(other), "the state's prompt embeddings (its media) are not the request's")
	saved := back
	back.Embeddings = nil
	require.ErrorContains(t, run(req), "the request has PromptEmbeddings, the state none")
	back = saved

	// Version 1: the same fields, without the digest.
	v1 := append([]byte{1}, data[1:len(data)-4-32]...)
	var old RequestState
	require.NoError(t, old.UnmarshalBinary(v1))
	assert.Empty(t, old.Embeddings)
	assert.Equal(t, st.Tokens, old.Tokens)
}
