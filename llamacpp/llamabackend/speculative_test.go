package llamabackend_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noisyMarkov loads the test Markov chain's noisy copy (40% of its rows
// replaced): a draft model that agrees with it about 60% of the time.
func noisyMarkov(t *testing.T) *llamacpp.Model {
	t.Helper()
	d, err := markovOracle(t).Noisy("markov-noisy", 0.4, 5) // as in TestLlamaSpeculativeSamplingFrequencies
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "noisy.gguf")
	require.NoError(t, d.Write(path))
	m, err := llamacpp.LoadModel(path, llamatest.ModelParams(t, llamacpp.ModelParams{}))
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// specBackend makes a backend over a fresh context of m with f32 KV cells.
func specBackend(t *testing.T, m *llamacpp.Model, slots int) *llamabackend.Backend {
	_, b := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 256 * slots, Sequences: slots})
	return b
}

func specPrompts(t *testing.T, m *llamacpp.Model) [][]int32 {
	var out [][]int32
	for _, s := range []string{"The model said", "Hello", "a b a b a b", "The cat sat on the", "é", "tokens and logits for every"} {
		p, err := m.Vocab().Tokenize(s, true, false)
		require.NoError(t, err)
		out = append(out, p)
	}
	return out
}

// checkLlamaCells runs the generator's stream and checks llama.cpp's cells
// at the first event of every verification step: the target's sequence
// holds the sequence S after the previous step and the step's candidates
// (no rejected candidate of an earlier step), the draft's less than that,
// and every sequence is empty at the end.
func checkLlamaCells(t *testing.T, g *generation.Generator, target, draft *llamabackend.Backend, reqs []generation.Request) []generation.Result {
	t.Helper()
	res := make([]generation.Result, len(reqs))
	stepEnded := make([]bool, len(reqs))
	for ev, err := range g.Stream(context.Background(), reqs) {
		require.NoError(t, err)
		r := &res[ev.Request]
		if ev.Token >= 0 && stepEnded[ev.Request] && ev.Drafted > 0 {
			n := len(reqs[ev.Request].Prompt) + len(r.Tokens) + ev.Drafted
			found := false
			for slot := range target.Slots() {
				if target.Len(slot) == n {
					pos, err := target.Context().SeqPosMax(int32(slot))
					require.NoError(t, err)
					require.EqualValues(t, n-1, pos)
					if draft != nil {
						assert.Less(t, draft.Len(slot), n, "request %d, draft sequence %d", ev.Request, slot)
					}
					found = true
				}
			}
			require.True(t, found, "request %d: no sequence of %d cells", ev.Request, n)
		}
		stepEnded[ev.Request] = !ev.Accepted
		if ev.Token >= 0 {
			r.Tokens = append(r.Tokens, ev.Token)
		}
		r.Speculation.Add(ev)
		if ev.Finish != generation.NotFinished {
			r.Finish, r.Err = ev.Finish, ev.Err
		}
	}
	for _, b := range []*llamabackend.Backend{target, draft} {
		if b == nil {
			continue
		}
		for slot := range b.Slots() {
			pos, err := b.Context().SeqPosMax(int32(slot))
			require.NoError(t, err)
			require.EqualValues(t, -1, pos, "slot %d", slot)
		}
	}
	return res
}

// specGen is a generator over target with draft (nil: none).
func specGen(t *testing.T, target, draft backend.Backend, tok backend.Tokenizer) *generation.Generator {
	t.Helper()
	g, err := generation.New(target, tok, generation.Options{Draft: draft})
	require.NoError(t, err)
	return g
}

func sumStats(res []generation.Result) (st generation.SpeculationStats) {
	for _, r := range res {
		st.Steps += r.Speculation.Steps
		st.Drafted += r.Speculation.Drafted
		st.Accepted += r.Speculation.Accepted
	}
	return st
}

// Greedy speculative decoding on llama.cpp gives the tokens of plain greedy
// decoding on llama.cpp, token for token, for many prompts and draft
// lengths, with a draft model (the Markov chain's noisy copy; the random
// model drafting for itself in a second context, which agrees always; the
// Markov chain drafting for the random model, which agrees rarely) and with
// prompt lookup, in batches of three rows; llama.cpp's cells are checked
// after every step.
func TestLlamaSpeculativeGreedyMatchesPlain(t *testing.T) {
	markov, tiny := llamaModel(t, "markov"), llamaModel(t, "tiny")
	noisy := noisyMarkov(t)
	cases := []struct {
		name          string
		target, draft *llamacpp.Model
		lookup        bool
	}{
		{"markov/noisy-draft", markov, noisy, false},
		{"markov/lookup", markov, nil, true},
		{"tiny/self-draft", tiny, tiny, false},
		{"tiny/markov-draft", tiny, markov, false},
		{"tiny/lookup", tiny, nil, true},
	}
	for _, tc := range cases {
		for _, k := range []int{1, 3, 6} {
			t.Run(fmt.Sprintf("%s/k%d", tc.name, k), func(t *testing.T) {
				cfg := greedyConfig(40)
				cfg.NumAssistantTokens = k
				cfg.NumAssistantTokensSchedule = genconfig.ScheduleHeuristicTransient
				if k == 3 {
					cfg.NumAssistantTokensSchedule = genconfig.ScheduleConstant
				}
				if tc.lookup {
					cfg.PromptLookupNumTokens = &k
				}
				prompts := specPrompts(t, tc.target)
				var reqs []generation.Request
				var greqs []generation.Request
				for _, p := range prompts {
					reqs = append(reqs, generation.Request{Prompt: p, Config: cfg})
					greqs = append(greqs, generation.Request{Prompt: p, Config: greedyConfig(40)})
				}
				gen, _ := llamaGenerator(t, tc.target, llamacpp.ContextParams{ContextSize: 512, Sequences: 2})
				want, err := gen.Generate(context.Background(), greqs)
				require.NoError(t, err)

				target := specBackend(t, tc.target, 3)
				var draft *llamabackend.Backend
				var gen2 *generation.Generator
				if tc.draft != nil {
					draft = specBackend(t, tc.draft, 3)
					gen2 = specGen(t, target, draft, llamabackend.Tokenizer{Vocab: tc.target.Vocab()})
				} else {
					gen2 = specGen(t, target, nil, llamabackend.Tokenizer{Vocab: tc.target.Vocab()})
				}
				got := checkLlamaCells(t, gen2, target, draft, reqs)
				for i := range reqs {
					require.Equal(t, want[i].Tokens, got[i].Tokens, "prompt %d", i)
				}
				st := sumStats(got)
				t.Logf("acceptance %.2f, %.2f accepted per step, %d steps for %d tokens",
					st.AcceptanceRate(), st.MeanAccepted(), st.Steps, st.Steps+st.Accepted)
				if tc.name == "tiny/self-draft" {
					assert.Equal(t, st.Drafted, st.Accepted, "a model agrees with itself")
				}
			})
		}
	}
}

// Greedy speculative decoding on the float64 reference forward pass gives
// the tokens of plain greedy decoding there, and those of llama.cpp.
func TestRefSpeculativeGreedyMatchesPlain(t *testing.T) {
	lb, ref, m := llamaSetup(t, "tiny", 2)
	_, ref2, _ := llamaSetup(t, "tiny", 2)
	for _, lookup := range []bool{false, true} {
		t.Run(fmt.Sprint("lookup=", lookup), func(t *testing.T) {
			k := 4
			cfg := greedyConfig(24)
			cfg.NumAssistantTokens = k
			var draft backend.Backend
			if lookup {
				cfg.PromptLookupNumTokens = &k
			} else {
				draft = ref2
			}
			prompts := specPrompts(t, m)[:3]
			var reqs []generation.Request
			var greqs []generation.Request
			for _, p := range prompts {
				reqs = append(reqs, generation.Request{Prompt: p, Config: cfg})
				greqs = append(greqs, generation.Request{Prompt: p, Config: greedyConfig(24)})
			}
			want, err := generation.NewGenerator(ref, nil).Generate(context.Background(), greqs)
			require.NoError(t, err)
			onLlama, err := generation.NewGenerator(lb, nil).Generate(context.Background(), greqs)
			require.NoError(t, err)
			got, err := specGen(t, ref, draft, nil).Generate(context.Background(), reqs)
			require.NoError(t, err)
			for i := range reqs {
				require.Equal(t, want[i].Tokens, got[i].Tokens, "prompt %d", i)
				require.Equal(t, onLlama[i].Tokens, got[i].Tokens, "prompt %d", i)
			}
		})
	}
}

// EvalAll returns at every position the logits that evaluating the tokens
// one at a time gives, across several decodes (n_batch smaller than the
// feeds).
func TestLlamaEvalAll(t *testing.T) {
	m := llamaModel(t, "tiny")
	_, b := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 2, BatchSize: 4})
	_, one := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 2})
	ctx := context.Background()
	feeds := []backend.Feed{{Slot: 0, Tokens: []int32{1, 5, 9, 13, 17, 21}}, {Slot: 1, Tokens: []int32{1, 7, 8}}}
	require.NoError(t, b.EvalAll(ctx, feeds))
	for i, f := range feeds {
		for j, tok := range f.Tokens {
			require.NoError(t, one.Eval(ctx, []backend.Feed{{Slot: f.Slot, Tokens: []int32{tok}}}))
			require.InDeltaSlice(t, one.Logits(0), b.LogitsAt(i, j), 1e-4, "feed %d position %d", i, j)
		}
		assert.Equal(t, b.LogitsAt(i, len(f.Tokens)-1), b.Logits(i))
		assert.Nil(t, b.LogitsAt(i, len(f.Tokens)))
	}
	require.NoError(t, b.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: []int32{2}}}))
	assert.Nil(t, b.LogitsAt(0, 0), "Eval ends EvalAll's rows")

}

// Speculative sampling on llama.cpp follows the Markov model's exact
// distribution: the pair of tokens after a prompt (the first drafted by the
// noisy copy and accepted or resampled, the second the target's bonus
// token or its next step) over 4000 seeds, compared with the oracle's exact
// joint distribution by Pearson's chi-square (cells of expected count below
// 5 pooled) at a false-alarm rate of 1e-4.
func TestLlamaSpeculativeSamplingFrequencies(t *testing.T) {
	m := llamaModel(t, "markov")
	oracle := markovOracle(t)
	target, draft := specBackend(t, m, 16), specBackend(t, noisyMarkov(t), 16)
	d := specGen(t, target, draft, nil)
	// A prompt token after which the draft's first candidate is accepted
	// with a probability (the overlap sum min(p, q)) between 0.3 and 0.8,
	// so that both the acceptance and the residual draw are exercised.
	noisy, err := oracle.Noisy("markov-noisy", 0.4, 5)
	require.NoError(t, err)
	prev := int32(-1)
	for tok := int32(300); tok < int32(len(oracle.StateOf)) && prev < 0; tok++ {
		p, q := softmax64(oracle.Logits(tok)), softmax64(noisy.Logits(tok))
		overlap := 0.0
		for i := range p {
			overlap += math.Min(p[i], q[i])
		}
		if overlap > 0.3 && overlap < 0.8 {
			prev = tok
		}
	}
	require.GreaterOrEqual(t, prev, int32(0), "no prompt token with a partial overlap")
	cfg := sampleConfig(2)
	cfg.NumAssistantTokens = 1
	cfg.AssistantConfidenceThreshold = 0
	const n = 4000
	reqs := make([]generation.Request, n)
	for i := range reqs {
		reqs[i] = generation.Request{Prompt: []int32{prev, prev}, Config: cfg, Seed: uint64(i)} // a Markov chain: the last token decides
	}
	res, err := d.Generate(context.Background(), reqs)
	require.NoError(t, err)
	counts := map[[2]int32]int{}
	for _, r := range res {
		require.Len(t, r.Tokens, 2)
		counts[[2]int32{r.Tokens[0], r.Tokens[1]}]++
	}
	st := sumStats(res)
	first := softmax64(oracle.Logits(prev))
	var cs chiSquare
	for a, pa := range first {
		if pa*n < 1e-3 {
			observed := 0 // the whole row: negligible
			for pair, c := range counts {
				if pair[0] == int32(a) {
					observed += c
				}
			}
			cs.pool(float64(observed), pa*n)
			continue
		}
		for b, pb := range softmax64(oracle.Logits(int32(a))) {
			cs.add(float64(counts[[2]int32{int32(a), int32(b)}]), pa*pb*n)
		}
	}
	chi, df := cs.result()
	// Wilson and Hilferty's quantile at z = 3.719 (upper 1e-4).
	k := float64(df)
	h := 2 / (9 * k)
	critical := k * math.Pow(1-h+3.719*math.Sqrt(h), 3)
	t.Logf("chi-square %.2f with %d degrees of freedom (critical %.2f); acceptance %.2f",
		chi, df, critical, st.AcceptanceRate())
	assert.Less(t, chi, critical)
	assert.Greater(t, st.AcceptanceRate(), 0.2)
	assert.Less(t, st.AcceptanceRate(), 0.9)
}
