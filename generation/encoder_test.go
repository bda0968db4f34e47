package generation

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/require"
)

// t5Reference writes the tiny T5 and loads its float64 reference.
func t5Reference(t *testing.T) *reference.T5 {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t5.gguf")
	require.NoError(t, testmodel.TinyT5().Write(path))
	m, err := reference.LoadT5(path)
	require.NoError(t, err)
	return m
}

// bruteGreedy is greedy decoding written out on the reference: encode,
// start the decoder at decoder_start_token_id, append the argmax n times.
func bruteGreedy(t *testing.T, m *reference.T5, in []int32, n int) []int32 {
	t.Helper()
	enc, err := m.Encode(in)
	require.NoError(t, err)
	dec := m.NewDecoder(enc)
	tok := m.DecoderStart
	var out []int32
	for range n {
		rows, err := dec.Eval([]int32{tok})
		require.NoError(t, err)
		best := 0
		for i, v := range rows[0] {
			if float32(v) > float32(rows[0][best]) {
				best = i
			}
		}
		tok = int32(best)
		out = append(out, tok)
	}
	return out
}

func maxNew(n int) *genconfig.Config {
	c := genconfig.Default()
	c.MaxNewTokens = &n
	return c
}

// Greedy requests on an encoder-decoder backend, batched, give the tokens
// of greedy decoding written out on the reference, each encoder input
// evaluated once; max_length counts the decoder start token as
// transformers does (max_length 6 leaves 5 new tokens).
func TestEncoderDecoderGreedy(t *testing.T) {
	m := t5Reference(t)
	b := refbackend.NewT5(m, 2)
	g := NewGenerator(b, nil)
	ins := [][]int32{{300, 301, 302, 303, 2}, {400, 410, 2}, {500, 2}}
	reqs := make([]Request, len(ins))
	for i, in := range ins {
		reqs[i] = Request{Prompt: in, Config: maxNew(8)}
	}
	total := genconfig.Default()
	total.MaxLength = 6
	reqs = append(reqs, Request{Prompt: ins[0], Config: total})
	res, err := g.Generate(context.Background(), reqs)
	require.NoError(t, err)
	for i, in := range ins {
		require.Equal(t, bruteGreedy(t, m, in, 8), res[i].Tokens, "request %d", i)
		require.Equal(t, FinishLength, res[i].Finish)
	}
	require.Equal(t, bruteGreedy(t, m, ins[0], 5), res[3].Tokens)
	require.Equal(t, len(reqs), b.EncoderRuns())
}

// An explicit decoder prompt continues from it: its first new token is
// greedy after decoder_start_token_id and the given tokens.
func TestEncoderDecoderPrompt(t *testing.T) {
	m := t5Reference(t)
	in := []int32{300, 301, 2}
	want := bruteGreedy(t, m, in, 4)
	g := NewGenerator(refbackend.NewT5(m, 1), nil)
	res, err := g.Generate(context.Background(), []Request{{Prompt: in, DecoderPrompt: []int32{m.DecoderStart, want[0]}, Config: maxNew(3)}})
	require.NoError(t, err)
	require.Equal(t, want[1:], res[0].Tokens)
}

// The encoder processors see the encoder input, not the decoder prompt:
// encoder_repetition_penalty 1e6 makes greedy choose among the encoder
// input's tokens (their positive logits grow a millionfold), and
// encoder_no_repeat_ngram_size 1 bans all of them; greedy on the reference
// chooses tokens outside the input.
func TestEncoderProcessorsSeeEncoderInput(t *testing.T) {
	m := t5Reference(t)
	in := make([]int32, 20)
	for i := range in {
		in[i] = int32(300 + 7*i)
	}
	plain := bruteGreedy(t, m, in, 6)
	require.True(t, slices.ContainsFunc(plain, func(x int32) bool { return !slices.Contains(in, x) }),
		"plain greedy %v stays inside the input", plain)
	g := NewGenerator(refbackend.NewT5(m, 1), nil)
	favour, ban := maxNew(6), maxNew(6)
	favour.EncoderRepetitionPenalty = 1e6
	ban.EncoderNoRepeatNGramSize = 1
	res, err := g.Generate(context.Background(), []Request{{Prompt: in, Config: favour}, {Prompt: in, Config: ban}})
	require.NoError(t, err)
	for _, x := range res[0].Tokens {
		require.Contains(t, in, x, "favoured: %v", res[0].Tokens)
	}
	for _, x := range res[1].Tokens {
		require.NotContains(t, in, x, "banned: %v", res[1].Tokens)
	}
	require.Len(t, res[1].Tokens, 6)
}

func TestEncoderDecoderErrors(t *testing.T) {
	m := t5Reference(t)
	g := NewGenerator(refbackend.NewT5(m, 1), nil)
	_, err := g.Generate(context.Background(), []Request{{Config: maxNew(2)}})
	require.ErrorIs(t, err, ErrNoEncoderInput)
	_, err = g.Generate(context.Background(), []Request{{Prompt: []int32{5}, DecoderPrompt: []int32{-1}}})
	require.ErrorContains(t, err, "decoder prompt token 0")
	// A decoder-only backend refuses a decoder prompt.
	dec := NewGenerator(backend.NewMemoryBackend(16, 1, testmodel.HashModel(16)), nil)
	_, err = dec.Generate(context.Background(), []Request{{Prompt: []int32{5}, DecoderPrompt: []int32{1}}})
	require.ErrorContains(t, err, "DecoderPrompt given to a decoder-only model")
}

// The Engine encodes each request once when it joins a running batch.
func TestEncoderDecoderEngine(t *testing.T) {
	m := t5Reference(t)
	b := refbackend.NewT5(m, 2)
	e, err := NewEngine(b, nil, EngineOptions{})
	require.NoError(t, err)
	defer e.Close()
	ins := [][]int32{{300, 301, 2}, {400, 2}, {500, 501, 502, 2}}
	var tasks []*Task
	for _, in := range ins {
		task, err := e.Submit(context.Background(), Request{Prompt: in, Config: maxNew(5)})
		require.NoError(t, err)
		tasks = append(tasks, task)
	}
	for i, task := range tasks {
		res := task.Result()
		require.NoError(t, res.Err)
		require.Equal(t, bruteGreedy(t, m, ins[i], 5), res.Tokens, "request %d", i)
	}
	_, err = e.Submit(context.Background(), Request{})
	require.ErrorIs(t, err, ErrNoEncoderInput)
}

// min_length counts decoder tokens from decoder_start_token_id: with the
// first greedy token as EOS, a request stops at once; min_length 3 (the
// start token and two more) keeps EOS out of the first two new tokens,
// which it would not if the 20 encoder tokens counted.
func TestEncoderDecoderMinLength(t *testing.T) {
	m := t5Reference(t)
	in := make([]int32, 20)
	for i := range in {
		in[i] = int32(300 + 5*i)
	}
	first := bruteGreedy(t, m, in, 1)[0]
	cfg := maxNew(6)
	cfg.EOSTokenID = []int32{first}
	atLeast := cfg.Clone()
	atLeast.MinLength = 3
	g := NewGenerator(refbackend.NewT5(m, 2), nil)
	res, err := g.Generate(context.Background(), []Request{{Prompt: in, Config: cfg}, {Prompt: in, Config: atLeast}})
	require.NoError(t, err)
	require.Equal(t, []int32{first}, res[0].Tokens)
	require.Equal(t, FinishEOS, res[0].Finish)
	require.GreaterOrEqual(t, len(res[1].Tokens), 2)
	require.NotContains(t, res[1].Tokens[:2], first)
}
