package generation

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/numeric"
	"github.com/llamaloop/llamaloop/internal/testkit/asan"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func greedyConfig(maxNew int, eos ...int32) *genconfig.Config {
	c := genconfig.Default()
	c.MaxNewTokens = intp(maxNew)
	c.EOSTokenID = eos
	return c
}

func samplingConfig(maxNew int, eos ...int32) *genconfig.Config {
	c := greedyConfig(maxNew, eos...)
	c.DoSample = true
	return c
}

// mixedRequests are rows of different prompt lengths, configs and seeds.
func mixedRequests() []Request {
	penalty := greedyConfig(9, 5)
	penalty.RepetitionPenalty = 1.3
	penalty.NoRepeatNGramSize = 2
	warped := samplingConfig(12, 5)
	warped.Temperature = 0.7
	warped.TopK = 6
	warped.TopP = 0.9
	plain := samplingConfig(7)
	plain.TopK = 0
	minNew := greedyConfig(6, 3, 4)
	minNew.MinNewTokens = intp(4)
	return []Request{
		{Prompt: []int32{3, 1, 4, 1, 5, 9, 2}, Config: greedyConfig(8, 5), Logprobs: true, TopLogprobs: 3},
		{Prompt: []int32{2}, Config: warped, Seed: 1, Logprobs: true},
		{Prompt: []int32{6, 5}, Config: penalty, Logprobs: true},
		{Prompt: []int32{7, 7, 7, 7}, Config: plain, Seed: 42, TopLogprobs: 2},
		{Prompt: []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, Config: warped, Seed: 1},
		{Prompt: []int32{9, 9}, Config: minNew},
		{Prompt: []int32{1}, Config: plain, Seed: 7},
		{Prompt: []int32{4, 2, 4}, Config: greedyConfig(10, 5), Seed: 8, Logprobs: true,
			Mirostat: &mirostat.Config{Version: mirostat.V1, Tau: 2, Eta: 0.2}},
		{Prompt: []int32{8}, Config: plain, Seed: 9, Mirostat: &mirostat.Config{Version: mirostat.V2, Tau: 1.5, Eta: 0.1}},
	}
}

func generate(t *testing.T, b backend.Backend, tok backend.Tokenizer, reqs []Request) []Result {
	t.Helper()
	res, err := NewGenerator(b, tok).Generate(context.Background(), reqs)
	require.NoError(t, err)
	return res
}

func requireEmptySlots(t *testing.T, b *backend.MemoryBackend) {
	t.Helper()
	for s := range b.Slots() {
		require.Empty(t, b.History(s), "slot %d", s)
	}
}

// eachAlone generates each request alone on a one-slot memory backend of
// the hash model: what every batch of them must reproduce.
func eachAlone(t *testing.T, reqs []Request) []Result {
	var alone []Result
	for i := range reqs {
		b := backend.NewMemoryBackend(16, 1, testmodel.HashModel(16))
		alone = append(alone, generate(t, b, nil, reqs[i:i+1])[0])
	}
	return alone
}

// A row's tokens and log-probabilities depend only on its own request: not
// on the rows beside it, the number of slots (rows waiting for one) or the
// backend's batch size.
func TestBatchEqualsAlone(t *testing.T) {
	reqs := mixedRequests()
	alone := eachAlone(t, reqs)
	for _, tc := range []struct {
		name         string
		slots, batch int
	}{{"all slots", len(reqs), 0}, {"3 slots", 3, 0}, {"1 slot", 1, 0}, {"batch 3", len(reqs), 3}, {"2 slots batch 1", 2, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			b := backend.NewMemoryBackend(16, tc.slots, testmodel.HashModel(16))
			b.SetBatchSize(tc.batch)
			got := generate(t, b, nil, reqs)
			require.Equal(t, alone, got)
			requireEmptySlots(t, b)

			// Each prompt is evaluated once, each token but the last once.
			want := backend.MemoryStats{}
			for i, r := range got {
				want.ModelCalls += len(r.Tokens)
				want.Tokens += len(reqs[i].Prompt) + len(r.Tokens) - 1
			}
			st := b.Stats()
			require.Equal(t, want.ModelCalls, st.ModelCalls)
			require.Equal(t, want.Tokens, st.Tokens)
		})
	}
	// The requests stop for different reasons, and the samplers differ.
	require.Equal(t, FinishLength, alone[0].Finish)
	require.NotEqual(t, alone[1].Tokens, alone[4].Tokens[:min(len(alone[1].Tokens), len(alone[4].Tokens))])
	require.Len(t, alone[0].TopLogprobs, len(alone[0].Tokens))
	require.Len(t, alone[0].TopLogprobs[0], 3)
}

func TestSeedDeterminism(t *testing.T) {
	cfg := samplingConfig(40)
	cfg.TopK = 0
	run := func(seed uint64) []int32 {
		b := backend.NewMemoryBackend(16, 1, testmodel.HashModel(16))
		return generate(t, b, nil, []Request{{Prompt: []int32{1, 2}, Config: cfg, Seed: seed}})[0].Tokens
	}
	first := run(11)
	require.Len(t, first, 40)
	require.Equal(t, first, run(11))
	require.NotEqual(t, first, run(12))
}

// documentedUniforms returns the first n uniforms of logits.Source's
// documentation, computed here from math/rand/v2's PCG: PCG(seed,
// "llamaloo"), the top 53 bits of each output.
func documentedUniforms(seed uint64, n int) []float64 {
	pcg := rand.NewPCG(seed, 0x6c6c616d616c6f6f)
	u := make([]float64, n)
	for i := range u {
		u[i] = float64(pcg.Uint64()>>11) / (1 << 53)
	}
	return u
}

// The uniform draws of a row are the documented ones.
func TestSeededDrawsAreDocumented(t *testing.T) {
	// A model with 2 tokens of equal probability: token 1 is drawn when u >= 0.5.
	model := func([]int32) ([]float32, error) { return []float32{0, 0}, nil }
	cfg := samplingConfig(64)
	res := generate(t, backend.NewMemoryBackend(2, 1, model), nil, []Request{{Prompt: []int32{0}, Config: cfg, Seed: 99}})[0]
	require.Len(t, res.Tokens, 64)
	for i, u := range documentedUniforms(99, len(res.Tokens)) {
		require.Equal(t, u >= 0.5, res.Tokens[i] == 1, "draw %d: u=%v", i, u)
	}
}

// chiSquare returns Σ (observed - expected)² / expected.
func chiSquare(observed []int, p []float64) float64 {
	n := 0
	for _, o := range observed {
		n += o
	}
	x := 0.0
	for i, o := range observed {
		e := float64(n) * p[i]
		x += (float64(o) - e) * (float64(o) - e) / e
	}
	return x
}

// Sampling draws each token with the probability of the final (warped)
// distribution. Pearson's chi-square statistic of the transition counts of a
// Markov chain is compared with its 0.999 quantile: with a random seed the
// test would fail with probability 0.001 per check; the seeds are fixed, so
// it is deterministic.
func TestSamplingFrequencies(t *testing.T) {
	p := [][]float64{
		{0.5, 0.3, 0.15, 0.05},
		{0.1, 0.2, 0.3, 0.4},
		{0.25, 0.25, 0.25, 0.25},
		{0.7, 0.1, 0.1, 0.1},
	}
	check := func(t *testing.T, cfg *genconfig.Config, want [][]float64, quantile float64) {
		b := backend.NewMemoryBackend(4, 4, markovModel(p))
		var reqs []Request
		for s := range 8 {
			reqs = append(reqs, Request{Prompt: []int32{int32(s % 4)}, Config: cfg, Seed: uint64(1000 + s)})
		}
		counts := make([][]int, 4)
		for i := range counts {
			counts[i] = make([]int, 4)
		}
		for i, r := range generate(t, b, nil, reqs) {
			require.Equal(t, FinishLength, r.Finish)
			prev := reqs[i].Prompt[0]
			for _, tok := range r.Tokens {
				counts[prev][tok]++
				prev = tok
			}
		}
		x := 0.0
		for s := range counts {
			var obs []int
			var probs []float64
			for j, q := range want[s] {
				if q == 0 {
					require.Zero(t, counts[s][j], "state %d token %d has probability 0", s, j)
					continue
				}
				obs, probs = append(obs, counts[s][j]), append(probs, q)
			}
			x += chiSquare(obs, probs)
		}
		require.Less(t, x, quantile, "chi-square %v", x)
	}
	t.Run("plain", func(t *testing.T) {
		cfg := samplingConfig(5000)
		// 12 degrees of freedom (4 states x 3); chi2.ppf(0.999, 12) = 32.909.
		check(t, cfg, p, 32.909)
	})
	t.Run("temperature and top-k", func(t *testing.T) {
		cfg := samplingConfig(5000)
		cfg.Temperature = 0.5
		cfg.TopK = 2
		// Temperature 0.5 squares the probabilities, top-k 2 keeps the two
		// largest and every token tied with the second. Degrees of freedom:
		// 1 + 1 + 3 + 3 = 8; chi2.ppf(0.999, 8) = 26.124.
		want := [][]float64{
			{25.0 / 34, 9.0 / 34, 0, 0},
			{0, 0, 9.0 / 25, 16.0 / 25},
			{0.25, 0.25, 0.25, 0.25},
			{0.49 / 0.52, 0.01 / 0.52, 0.01 / 0.52, 0.01 / 0.52}, // the tie at 0.1 keeps all three
		}
		check(t, cfg, want, 26.124)
	})
}

func TestStopStringAcrossTokens(t *testing.T) {
	tok := testTokenizer{}
	// He llo " wo" rld ! </s>
	next := map[int32]int32{
		tokenID("He"): tokenID("llo"), tokenID("llo"): tokenID(" wo"),
		tokenID(" wo"): tokenID("rld"), tokenID("rld"): tokenID("!"),
	}
	run := func(stops ...string) Result {
		b := backend.NewMemoryBackend(len(testPieces), 1, chainModel(len(testPieces), next))
		return generate(t, b, tok, []Request{{Prompt: []int32{tokenID("He")}, Config: greedyConfig(10), StopStrings: stops}})[0]
	}
	r := run()
	require.Equal(t, FinishEOS, r.Finish)
	require.Equal(t, "llo world!", r.Text)
	require.Equal(t, []int32{7, 8, 9, 10, tokEOS}, r.Tokens)

	r = run("o wor", "xyz")
	require.Equal(t, FinishStop, r.Finish)
	require.Equal(t, "o wor", r.StopString)
	require.Equal(t, "llo world", r.Text, "the token that completes the stop string is kept")
	require.Equal(t, "ll", r.Text[:strings.Index(r.Text, r.StopString)])

	// Within one token, and the prompt ("He") does not count.
	r = run("Hello", "wo")
	require.Equal(t, FinishStop, r.Finish)
	require.Equal(t, "wo", r.StopString)
	require.Equal(t, "llo wo", r.Text)
}

func TestUTF8SplitAcrossTokens(t *testing.T) {
	tok := testTokenizer{}
	// é as two tokens, then € as two tokens, then an invalid byte, then EOS.
	next := map[int32]int32{
		tokenID("a"): tokenID("\xc3"), tokenID("\xc3"): tokenID("\xa9"),
		tokenID("\xa9"): tokenID("\xe2\x82"), tokenID("\xe2\x82"): tokenID("\xac"),
		tokenID("\xac"): tokenID("\xff"), tokenID("\xff"): tokenID("\xe2\x82"),
	}
	b := backend.NewMemoryBackend(len(testPieces), 1, chainModel(len(testPieces), next))
	var pieces []string
	g := NewGenerator(b, tok)
	for ev, err := range g.Stream(context.Background(), []Request{{Prompt: []int32{tokenID("a")}, Config: greedyConfig(6)}}) {
		require.NoError(t, err)
		pieces = append(pieces, string(ev.Text))
	}
	// \xc3 waits for \xa9; \xe2\x82 waits for \xac; \xff can never
	// complete and is sent as it is; the last \xe2\x82 is cut by the length
	// limit and flushed on the last event.
	require.Equal(t, []string{"", "é", "", "€", "\xff", "\xe2\x82"}, pieces)
}

// An event's text prints as text, not as byte values, through fmt and
// String.
func TestEventTextPrints(t *testing.T) {
	tok := testTokenizer{}
	next := map[int32]int32{tokenID("a"): tokenID("\xc3"), tokenID("\xc3"): tokenID("\xa9")}
	b := backend.NewMemoryBackend(len(testPieces), 1, chainModel(len(testPieces), next))
	var printed, quoted, str strings.Builder
	for ev, err := range NewGenerator(b, tok).Stream(context.Background(), []Request{{Prompt: []int32{tokenID("a")}, Config: greedyConfig(2)}}) {
		require.NoError(t, err)
		fmt.Fprint(&printed, ev.Text)
		fmt.Fprintf(&quoted, "%q", ev.Text)
		str.WriteString(ev.Text.String())
	}
	assert.Equal(t, "é", printed.String())
	assert.Equal(t, `"""é"`, quoted.String())
	assert.Equal(t, "é", str.String())
}

func TestUTF8Hold(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int
	}{
		{"", 0}, {"ab", 2}, {"a\xc3", 1}, {"a\xc3\xa9", 3}, {"\xe2\x82", 0}, {"\xe2\x82\xac", 3},
		{"\xf0\x9f\x98", 0}, {"\xf0\x9f\x98\x80", 4}, {"\xff", 1}, {"a\x80", 2}, {"\xc3a", 2},
	} {
		assert.Equal(t, tc.want, completeUTF8([]byte(tc.text), 0), "%q", tc.text)
	}
}

func TestChatAndTextPrompts(t *testing.T) {
	tok := testTokenizer{addBOS: true}
	var seen [][]int32
	model := func(h []int32) ([]float32, error) {
		seen = append(seen, append([]int32(nil), h...))
		row := make([]float32, len(testPieces))
		row[tokEOT] = 1
		return row, nil
	}
	b := backend.NewMemoryBackend(len(testPieces), 3, model)
	g := NewGenerator(b, tok)
	res, err := g.Generate(context.Background(), []Request{
		{Messages: []backend.Message{{Role: "user", Content: "Hello"}}, Config: greedyConfig(3)},
		{Text: "Hello", Config: greedyConfig(3)},
		{Text: "He<|end|>", ParseSpecial: true, Config: greedyConfig(3)},
	})
	require.NoError(t, err)
	// The chat template writes the special tokens: no BOS is added.
	require.Equal(t, []int32{3, 6, 7, 5, 4}, seen[0])
	// Plain text gets the BOS; ParseSpecial reads special-token text.
	require.Equal(t, []int32{tokBOS, 6, 7}, seen[1])
	require.Equal(t, []int32{tokBOS, 6, 5}, seen[2])
	// The tokenizer's end-of-generation tokens stop the rows.
	for _, r := range res {
		require.Equal(t, FinishEOS, r.Finish)
		require.Equal(t, []int32{tokEOT}, r.Tokens)
		require.Empty(t, r.Text)
	}
}

func TestContextFull(t *testing.T) {
	b := backend.NewMemoryBackend(16, 2, testmodel.HashModel(16))
	b.SetCapacity(10)
	res := generate(t, b, nil, []Request{
		{Prompt: []int32{1, 2, 3, 4}, Config: greedyConfig(50)},
		{Prompt: make([]int32, 11), Config: greedyConfig(50)},
		{Prompt: make([]int32, 10), Config: greedyConfig(50)},
	})
	// 10 cells hold the prompt and all tokens but the last.
	require.Equal(t, FinishContextFull, res[0].Finish)
	require.Len(t, res[0].Tokens, 7)
	require.NoError(t, res[0].Err)
	require.Equal(t, FinishContextFull, res[1].Finish)
	require.ErrorIs(t, res[1].Err, ErrPromptTooLong)
	require.Empty(t, res[1].Tokens)
	require.Equal(t, FinishContextFull, res[2].Finish)
	require.Len(t, res[2].Tokens, 1)
	requireEmptySlots(t, b)
}

// cancellingBackend cancels its context when it sees a feed of at least n
// tokens, before it evaluates anything.
type cancellingBackend struct {
	*backend.MemoryBackend
	n      int
	cancel context.CancelFunc
}

func (c cancellingBackend) Eval(ctx context.Context, feeds []backend.Feed) error {
	for _, f := range feeds {
		if len(f.Tokens) >= c.n {
			c.cancel()
		}
	}
	return c.MemoryBackend.Eval(ctx, feeds)
}

func TestCancellation(t *testing.T) {
	reqs := []Request{
		{Prompt: []int32{1, 2, 3, 4, 5, 6, 7}, Config: greedyConfig(20)},
		{Prompt: []int32{2}, Config: samplingConfig(20), Seed: 3},
		{Prompt: []int32{3, 4}, Config: greedyConfig(20)},
		{Prompt: []int32{4}, Config: samplingConfig(20), Seed: 4},
	}
	mem := backend.NewMemoryBackend(16, 2, testmodel.HashModel(16))
	want := generate(t, mem, nil, reqs)

	t.Run("during generation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		g := NewGenerator(mem, nil)
		events := 0
		got := make([]Result, len(reqs))
		for ev, err := range g.Stream(ctx, reqs) {
			require.NoError(t, err)
			if ev.Token >= 0 {
				got[ev.Request].Tokens = append(got[ev.Request].Tokens, ev.Token)
			}
			if ev.Finish != NotFinished {
				got[ev.Request].Finish, got[ev.Request].Err = ev.Finish, ev.Err
			}
			if events++; events == 5 {
				cancel()
			}
		}
		// Rows 0 and 1 ran 3 steps (the third completes after the cancel),
		// rows 2 and 3 waited for a slot.
		for i, r := range got {
			require.Equal(t, FinishCancelled, r.Finish, "row %d", i)
			require.Equal(t, context.Canceled, r.Err, "row %d: the context's error itself", i)
			require.Equal(t, want[i].Tokens[:len(r.Tokens)], append([]int32{}, r.Tokens...))
		}
		require.Len(t, got[0].Tokens, 3)
		require.Empty(t, got[2].Tokens)
		requireEmptySlots(t, mem)
	})
	t.Run("during a prompt", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		mem.SetBatchSize(4)
		defer mem.SetBatchSize(0)
		mem.ResetStats()
		b := cancellingBackend{MemoryBackend: mem, n: 7, cancel: cancel}
		res, err := NewGenerator(b, nil).Generate(ctx, reqs)
		require.NoError(t, err)
		for _, r := range res {
			require.Equal(t, FinishCancelled, r.Finish)
			require.Equal(t, context.Canceled, r.Err)
			require.Empty(t, r.Tokens)
		}
		require.Zero(t, mem.Stats().ModelCalls)
		requireEmptySlots(t, mem)
	})
	t.Run("backend usable after", func(t *testing.T) {
		require.Equal(t, want, generate(t, mem, nil, reqs))
	})
}

func TestStopIterationEarly(t *testing.T) {
	b := backend.NewMemoryBackend(16, 3, testmodel.HashModel(16))
	g := NewGenerator(b, nil)
	for range g.Stream(context.Background(), mixedRequests()) {
		break
	}
	requireEmptySlots(t, b)
	for _, err := range g.Stream(context.Background(), mixedRequests()) {
		require.NoError(t, err)
		_, err := g.Generate(context.Background(), mixedRequests())
		require.ErrorIs(t, err, ErrBusy)
		break
	}
	requireEmptySlots(t, b)
}

func TestBadInput(t *testing.T) {
	b := backend.NewMemoryBackend(16, 2, testmodel.HashModel(16))
	want := generate(t, b, nil, mixedRequests()[:2])
	beams := greedyConfig(5)
	beams.NumBeams = 2
	badTemp := samplingConfig(5)
	badTemp.Temperature = -1
	maxLen := genconfig.Default()
	maxLen.MaxLength = 3
	for name, tc := range map[string]struct {
		tok backend.Tokenizer
		req Request
		err error
	}{
		"empty prompt without tokenizer": {nil, Request{Config: greedyConfig(3)}, ErrEmptyPrompt},
		"empty prompt without BOS":       {testTokenizer{}, Request{Config: greedyConfig(3)}, ErrEmptyPrompt},
		"token out of range":             {nil, Request{Prompt: []int32{3, 16}}, backend.ErrTokenOutOfRange},
		"negative token":                 {nil, Request{Prompt: []int32{-1}}, backend.ErrTokenOutOfRange},
		"text without tokenizer":         {nil, Request{Text: "He"}, ErrNoTokenizer},
		"stop strings without tokenizer": {nil, Request{Prompt: []int32{1}, StopStrings: []string{"x"}}, ErrNoTokenizer},
		"empty stop string":              {testTokenizer{}, Request{Prompt: []int32{1}, StopStrings: []string{""}}, nil},
		"prompt and text":                {testTokenizer{}, Request{Prompt: []int32{1}, Text: "He"}, nil},
		"untokenizable text":             {testTokenizer{}, Request{Text: "zzz"}, nil},
		"beam search":                    {nil, Request{Prompt: []int32{1}, Config: beams}, nil},
		"invalid temperature":            {nil, Request{Prompt: []int32{1}, Config: badTemp}, nil},
		"prompt reaches max_length":      {nil, Request{Prompt: []int32{1, 2, 3}, Config: maxLen}, nil},
		"negative top logprobs":          {nil, Request{Prompt: []int32{1}, TopLogprobs: -1}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			// The bad request is second: nothing runs, not even the first.
			reqs := []Request{mixedRequests()[0], tc.req}
			res, err := NewGenerator(b, tc.tok).Generate(context.Background(), reqs)
			require.Error(t, err)
			require.Contains(t, err.Error(), "request 1")
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			}
			require.Empty(t, res[0].Tokens)
			requireEmptySlots(t, b)
		})
	}
	require.Equal(t, want, generate(t, b, nil, mixedRequests()[:2]), "the backend is still usable")
}

func TestEmptyPromptIsBOS(t *testing.T) {
	var first []int32
	model := func(h []int32) ([]float32, error) {
		if first == nil {
			first = append([]int32{}, h...)
		}
		return make([]float32, len(testPieces)), nil
	}
	b := backend.NewMemoryBackend(len(testPieces), 1, model)
	res := generate(t, b, testTokenizer{addBOS: true}, []Request{{Config: greedyConfig(2)}})
	require.Equal(t, []int32{tokBOS}, first)
	require.Equal(t, []int32{0, 0}, res[0].Tokens)
	require.Equal(t, FinishLength, res[0].Finish)
}

func TestNaNLogits(t *testing.T) {
	model := func(h []int32) ([]float32, error) {
		row := make([]float32, 8)
		if h[0] == 7 && len(h) > 3 {
			row[2] = float32(math.NaN())
		}
		row[h[len(h)-1]%8] = 1
		return row, nil
	}
	for _, cfg := range []*genconfig.Config{greedyConfig(10), samplingConfig(10)} {
		b := backend.NewMemoryBackend(8, 2, model)
		res := generate(t, b, nil, []Request{{Prompt: []int32{7, 1}, Config: cfg}, {Prompt: []int32{3}, Config: cfg}})
		require.Equal(t, FinishError, res[0].Finish)
		require.ErrorIs(t, res[0].Err, logits.ErrNoChoice)
		require.Len(t, res[0].Tokens, 2)
		require.Equal(t, FinishLength, res[1].Finish)
		requireEmptySlots(t, b)
	}
	// All -inf (every token suppressed) is an error too, not token 0.
	cfg := greedyConfig(4)
	cfg.SuppressTokens = []int32{0, 1, 2, 3, 4, 5, 6, 7}
	b := backend.NewMemoryBackend(8, 1, model)
	res := generate(t, b, nil, []Request{{Prompt: []int32{3}, Config: cfg}})
	require.Equal(t, FinishError, res[0].Finish)
	require.ErrorIs(t, res[0].Err, logits.ErrNoChoice)
}

// A long run of requests leaves no slot filled and the heap does not grow.
func TestNoGrowthOver100Requests(t *testing.T) {
	b := backend.NewMemoryBackend(16, 4, testmodel.HashModel(16))
	g := NewGenerator(b, testTokenizer{})
	reqs := mixedRequests()
	run := func() {
		for ev, err := range g.Stream(context.Background(), reqs) {
			require.NoError(t, err)
			_ = ev
		}
	}
	var ms runtime.MemStats
	heap := func() uint64 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	for range 10 {
		run()
	}
	before := heap()
	for range 100 {
		run()
		requireEmptySlots(t, b)
	}
	after := heap()
	require.Less(t, int64(after)-int64(before), int64(16<<10), "heap grew from %d to %d", before, after)
}

// Streaming a long row allocates nothing per token once its buffers have
// grown (the histories still double now and then).
func TestSteadyStateAllocations(t *testing.T) {
	if asan.Enabled {
		t.Skip("allocation counts are not meaningful under -asan")
	}
	miro := &mirostat.Config{Version: mirostat.V2, Tau: 5, Eta: 0.1}
	for _, req := range []Request{
		{Config: greedyConfig(4000)}, {Config: samplingConfig(4000)}, {Config: greedyConfig(4000), Mirostat: miro},
	} {
		b := backend.NewMemoryBackend(64, 1, cheapModel(64))
		g := NewGenerator(b, nil)
		req.Prompt, req.Logprobs, req.TopLogprobs = []int32{1}, true, 2
		reqs := []Request{req}
		for range g.Stream(context.Background(), reqs) {
		}
		var ms runtime.MemStats
		var start uint64
		n := 0
		for range g.Stream(context.Background(), reqs) {
			switch n++; n {
			case 1000:
				runtime.ReadMemStats(&ms)
				start = ms.Mallocs
			case 3000:
				runtime.ReadMemStats(&ms)
				require.LessOrEqual(t, ms.Mallocs-start, uint64(4), "allocations in 2000 tokens")
			}
		}
	}
}

// Mirostat rows draw the tokens that a mirostat.Sampler draws from the same
// scores with the documented uniforms.
func TestMirostat(t *testing.T) {
	const vocab = 32
	zipf := make([]float32, vocab)
	for i := range zipf {
		zipf[i] = float32(-1.1 * math.Log(float64(i+1)))
	}
	model := func([]int32) ([]float32, error) { return zipf, nil }
	for _, cfg := range []mirostat.Config{
		{Version: mirostat.V1, Tau: 5, Eta: 0.1},
		{Version: mirostat.V2, Tau: 4, Eta: 0.3, Mu: 8},
	} {
		res := generate(t, backend.NewMemoryBackend(vocab, 1, model), nil,
			[]Request{{Prompt: []int32{0}, Config: greedyConfig(300), Seed: 5, Mirostat: &cfg, Logprobs: true}})[0]
		require.Len(t, res.Tokens, 300)
		s, err := mirostat.New(cfg)
		require.NoError(t, err)
		u := documentedUniforms(5, len(res.Tokens))
		distinct := map[int32]bool{}
		for k, tok := range res.Tokens {
			st, err := s.SampleLogits(append([]float32(nil), zipf...), u[k])
			require.NoError(t, err)
			require.Equal(t, st.Token, tok, "token %d", k)
			require.InDelta(t, math.Log(st.Prob), res.Logprobs[k], 1e-5)
			distinct[tok] = true
		}
		require.Greater(t, len(distinct), 3, "mirostat samples, it is not greedy")
	}
	_, err := NewGenerator(backend.NewMemoryBackend(vocab, 1, model), nil).Generate(context.Background(),
		[]Request{{Prompt: []int32{0}, Mirostat: &mirostat.Config{Version: mirostat.V2}}})
	require.ErrorContains(t, err, "request 0")
}

// Log-probabilities are the log-softmax of the final scores, here computed
// independently in float64; the alternatives are the most probable tokens
// in order, without tokens that top-k removed.
func TestLogprobs(t *testing.T) {
	cfg := samplingConfig(20)
	cfg.TopK = 4
	cfg.Temperature = 0.8
	var observed [][]float32
	req := Request{Prompt: []int32{1, 2}, Config: cfg, Seed: 3, Logprobs: true, TopLogprobs: 6,
		ObserveScores: func(s []float32) { observed = append(observed, append([]float32(nil), s...)) }}
	res := generate(t, backend.NewMemoryBackend(16, 1, testmodel.HashModel(16)), nil, []Request{req})[0]
	require.Len(t, observed, 20)
	for k, scores := range observed {
		sum := 0.0
		finite := 0
		for _, s := range scores {
			if !math.IsInf(float64(s), -1) {
				sum += math.Exp(float64(s))
				finite++
			}
		}
		require.Equal(t, 4, finite, "top-k 4 (no ties in this model)")
		want := float64(scores[res.Tokens[k]]) - math.Log(sum)
		require.InDelta(t, want, res.Logprobs[k], 1e-5)
		top := res.TopLogprobs[k]
		require.Len(t, top, 4)
		for i, alt := range top {
			require.InDelta(t, float64(scores[alt.Token])-math.Log(sum), alt.Logprob, 1e-5)
			if i > 0 {
				require.Less(t, alt.Logprob, top[i-1].Logprob)
			}
		}
	}
}

func TestTopLogprobsTies(t *testing.T) {
	got := topLogprobs(nil, new(numeric.Best[float32]), []float32{-1, -2, -1, float32(math.Inf(-1)), -0.5, -2}, 4)
	require.Equal(t, []TokenLogprob{{4, -0.5}, {0, -1}, {2, -1}, {1, -2}}, got)
	require.Empty(t, topLogprobs(nil, new(numeric.Best[float32]), []float32{-1}, 0))
}

// A row that ends without a new token (here, cancelled) still delivers the
// bytes it held back.
func TestEndFlushesHeldText(t *testing.T) {
	next := map[int32]int32{tokenID("a"): tokenID("\xc3"), tokenID("\xc3"): tokenID("\xa9")}
	b := backend.NewMemoryBackend(len(testPieces), 1, chainModel(len(testPieces), next))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var evs []Event
	for ev, err := range NewGenerator(b, testTokenizer{}).Stream(ctx, []Request{{Prompt: []int32{tokenID("a")}, Config: greedyConfig(5)}}) {
		require.NoError(t, err)
		ev.Text = append([]byte(nil), ev.Text...)
		evs = append(evs, ev)
		cancel()
	}
	require.Len(t, evs, 2)
	require.Equal(t, Event{Request: 0, Token: tokenID("\xc3")}, evs[0])
	require.Equal(t, Event{Request: 0, Token: -1, Text: []byte("\xc3"), Finish: FinishCancelled, Err: context.Canceled}, evs[1])
}

func TestNoSlots(t *testing.T) {
	_, err := NewGenerator(backend.NewMemoryBackend(4, 0, testmodel.HashModel(4)), nil).Generate(context.Background(), []Request{{Prompt: []int32{1}}})
	require.Error(t, err)
}

// fullBackend fails its evalth Eval with backend.ErrContextFull, as a llama.cpp
// cache shared by all sequences does when it runs out of cells.
type fullBackend struct {
	*backend.MemoryBackend
	calls *int
	at    int
}

func (f fullBackend) Eval(ctx context.Context, feeds []backend.Feed) error {
	if *f.calls++; *f.calls == f.at {
		return fmt.Errorf("decode: %w", backend.ErrContextFull)
	}
	return f.MemoryBackend.Eval(ctx, feeds)
}

func TestSharedContextFull(t *testing.T) {
	reqs := mixedRequests()[:3]
	mem := backend.NewMemoryBackend(16, 2, testmodel.HashModel(16))
	want := generate(t, mem, nil, reqs)
	calls := 0
	res := generate(t, fullBackend{mem, &calls, 3}, nil, reqs)
	// Rows 0 and 1 had 2 tokens when the third Eval failed; row 2 waited
	// and then ran in full.
	for i := range 2 {
		require.Equal(t, FinishContextFull, res[i].Finish)
		require.ErrorIs(t, res[i].Err, backend.ErrContextFull)
		require.Equal(t, want[i].Tokens[:2], res[i].Tokens)
	}
	require.Equal(t, want[2], res[2])
	requireEmptySlots(t, mem)
}

// Mirostat run by its own library (mirostat.Sampler.Stream) with a
// logits.Source as its uniform source draws the tokens of a Mirostat row
// with the same seed: both take one uniform per token from the same Source.
func TestMirostatLibraryDrawsTheSameTokens(t *testing.T) {
	const vocab = 32
	model := testmodel.HashModel(vocab)
	cfg := mirostat.Config{Version: mirostat.V2, Tau: 3, Eta: 0.2}
	distinct := map[string]bool{}
	for seed := range uint64(50) {
		res := generate(t, backend.NewMemoryBackend(vocab, 1, model), nil,
			[]Request{{Prompt: []int32{3, 4}, Config: greedyConfig(24), Seed: seed, Mirostat: &cfg}})[0]
		s, err := mirostat.New(cfg)
		require.NoError(t, err)
		asInt32 := make([]int32, 0, 32)
		var lib []int32
		for st, err := range s.Stream(context.Background(), func(tokens []int32) ([]float32, error) {
			asInt32 = asInt32[:0]
			for _, t := range tokens {
				asInt32 = append(asInt32, int32(t))
			}
			return model(asInt32)
		}, logits.NewSource(seed), mirostat.GenerateOptions{Prompt: []int32{3, 4}, MaxTokens: 24}) {
			require.NoError(t, err)
			lib = append(lib, int32(st.Token))
		}
		require.Equal(t, lib, res.Tokens, "seed %d", seed)
		distinct[fmt.Sprint(lib)] = true
	}
	require.Greater(t, len(distinct), 25, "seeds draw different sequences")
}

// TrimLeadingSpace gives the text transformers' tokenizer.decode gives for
// the new tokens of a SentencePiece vocabulary: its decoder (Replace "▁"
// by " ", ByteFallback, Fuse, Strip(content=" ", left=1)) drops one space at
// the start of the decoded string, so LlamaTokenizer decodes ["▁wo", "rld",
// "!"] as "world!"; llama.cpp's pieces, streamed by default, keep it.
func TestTrimLeadingSpace(t *testing.T) {
	tok := testTokenizer{}
	next := map[int32]int32{tokenID("llo"): tokenID(" wo"), tokenID(" wo"): tokenID("rld"), tokenID("rld"): tokenID("!")}
	run := func(trim bool) (Result, string) {
		b := backend.NewMemoryBackend(len(testPieces), 1, chainModel(len(testPieces), next))
		req := Request{Prompt: []int32{tokenID("llo")}, Config: greedyConfig(10), TrimLeadingSpace: trim}
		var streamed strings.Builder
		var res Result
		for ev, err := range NewGenerator(b, tok).Stream(context.Background(), []Request{req}) {
			require.NoError(t, err)
			streamed.Write(ev.Text)
			if ev.Token >= 0 {
				res.Tokens = append(res.Tokens, ev.Token)
			}
		}
		res.Text = streamed.String()
		return res, streamed.String()
	}
	kept, _ := run(false)
	assert.Equal(t, " world!", kept.Text, "llama.cpp's pieces")
	trimmed, streamed := run(true)
	assert.Equal(t, "world!", trimmed.Text, "transformers' decode")
	assert.Equal(t, "world!", streamed, "the stream carries the trimmed text")
	assert.Equal(t, kept.Tokens, trimmed.Tokens, "only the text changes")

	assert.Equal(t, " x", string(TrimLeadingSpace([]byte("  x"))), "one space, as Strip(left=1)")
	assert.Equal(t, "x", string(TrimLeadingSpace([]byte("x"))))
	assert.Empty(t, TrimLeadingSpace(nil))
}
