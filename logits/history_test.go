package logits

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// stateful is every stateful processor with small parameters.
const stateful = `{"repetition_penalty": 1.3, "encoder_repetition_penalty": 0.8, "no_repeat_ngram_size": 2,
	"encoder_no_repeat_ngram_size": 2, "bad_words_ids": [[3, 4], [5]], "sequence_bias": [[[1, 2], 0.5]],
	"eos_token_id": 0, "min_new_tokens": 3, "exponential_decay_length_penalty": [2, 1.2]}`

// TestIncrementalStateMatchesFreshHistory grows a history token by token and checks, at every step, that it
// processes scores exactly like a row built directly from the same history.
func TestIncrementalStateMatchesFreshHistory(t *testing.T) {
	const v = 8
	freq := must(NewPresenceFrequencyPenalty(0.5, 0.25, 4))
	p := mustPipeline(t, stateful, Options{VocabSize: v, User: []Processor{freq}})
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		prompt := make([]int32, 1+rng.IntN(5))
		for i := range prompt {
			prompt[i] = int32(rng.IntN(v))
		}
		row := p.NewHistory(prompt)
		for step := range 15 {
			scores := make([]float32, v)
			for i := range scores {
				scores[i] = float32(rng.NormFloat64())
			}
			fresh := p.NewHistory(prompt)
			fresh.tokens = slices.Clone(row.Tokens()) // same history, states rebuilt from it
			fresh.p = nil
			a, b := slices.Clone(scores), slices.Clone(scores)
			p.Process(row, a)
			p.Process(fresh, b)
			requireSameFloats(t, b, a, "trial %d step %d history %v", trial, step, row.Tokens())
			row.Accept(int32(rng.IntN(v)))
		}
	}
}

func TestRowCloneAndCopyFrom(t *testing.T) {
	const v = 6
	p := mustPipeline(t, stateful, Options{VocabSize: v})
	a := p.NewHistory([]int32{1, 2, 3})
	a.Accept(4)
	b := a.Clone()
	a.Accept(1)
	a.Accept(2)
	assert.Equal(t, []int32{1, 2, 3, 4}, b.Tokens(), "the clone does not see later tokens")
	assert.Equal(t, 3, b.PromptLen())
	assert.Equal(t, 6, a.Len())

	// b continued alone must equal a row that never shared state.
	ref := p.NewHistory([]int32{1, 2, 3})
	ref.Accept(4)
	b.Accept(2)
	ref.Accept(2)
	scores := []float32{1, 2, 3, 4, 5, 6}
	x, y := slices.Clone(scores), slices.Clone(scores)
	p.Process(b, x)
	p.Process(ref, y)
	assert.Equal(t, y, x)

	// CopyFrom reuses storage and makes c behave like a.
	c := p.NewHistory([]int32{5})
	c.CopyFrom(a)
	assert.Equal(t, a.Tokens(), c.Tokens())
	assert.Equal(t, a.PromptLen(), c.PromptLen())
	x, y = slices.Clone(scores), slices.Clone(scores)
	p.Process(a, x)
	p.Process(c, y)
	assert.Equal(t, x, y)
	c.Accept(5)
	assert.NotEqual(t, a.Len(), c.Len())
	c.CopyFrom(c)
	assert.Equal(t, 7, c.Len())
}

func TestRowFromAnotherPipeline(t *testing.T) {
	p1 := mustPipeline(t, `{"repetition_penalty": 2.0}`, Options{VocabSize: 3})
	p2 := mustPipeline(t, `{"no_repeat_ngram_size": 1}`, Options{VocabSize: 3})
	row := p1.NewHistory([]int32{0})
	row.Accept(2)
	s := []float32{1, 1, 1}
	p2.Process(row, s)
	assert.Equal(t, []float32{ninf, 1, ninf}, s, "the row is re-initialised for p2 from its history")
}

// counter is a user processor with per-row state: it bans the token accepted last, and counts.
type counter struct{}

type counterState struct{ last, n int32 }

func (counter) Name() string { return "counter" }
func (counter) NewState(prompt []int32, _ int) State {
	return &counterState{last: prompt[len(prompt)-1], n: int32(len(prompt))}
}
func (counter) Process(row *History, scores []float32) {
	st := row.State().(*counterState)
	scores[st.last] = ninf
}
func (s *counterState) Accept(h []int32) { s.last, s.n = h[len(h)-1], s.n+1 }
func (s *counterState) Clone() State     { c := *s; return &c }

func TestUserStatefulProcessor(t *testing.T) {
	p := mustPipeline(t, `{"do_sample": true, "top_k": 2}`, Options{VocabSize: 4, User: []Processor{counter{}}})
	assert.Equal(t, []string{"counter", "TopKLogitsWarper"}, p.Names())
	row := p.NewHistory([]int32{3})
	s := []float32{1, 2, 3, 4}
	p.Process(row, s)
	assert.Equal(t, []float32{ninf, 2, 3, ninf}, s)
	row.Accept(2)
	clone := row.Clone()
	row.Accept(1)
	s = []float32{1, 2, 3, 4}
	p.Process(clone, s)
	assert.Equal(t, []float32{ninf, 2, ninf, 4}, s, "the clone bans 2, its last token, not 1")
	assert.Nil(t, row.State(), "State is only defined inside Process")
}

func TestPresenceFrequencyPenalty(t *testing.T) {
	p := must(NewPresenceFrequencyPenalty(0.5, 0.25, 0))
	// Token 1 seen twice, token 2 once: 1 - (2·0.25 + 0.5), 1 - (0.25 + 0.5).
	got := apply(t, []float32{1, 1, 1}, []int32{1, 2}, []int32{1}, p)
	assert.Equal(t, []float32{1, 0, 0.25}, got)
	// Window of 2: only the last two tokens (2, 1) count.
	p = must(NewPresenceFrequencyPenalty(0.5, 0.25, 2))
	got = apply(t, []float32{1, 1, 1}, []int32{1, 1, 2}, []int32{1}, p)
	assert.Equal(t, []float32{1, 0.25, 0.25}, got)
	_, err := NewPresenceFrequencyPenalty(0, 0, -1)
	assert.Error(t, err)
}

func TestLogitBiasAllowBlock(t *testing.T) {
	b := must(NewLogitBias(map[int32]float32{0: 1.5, 2: float32(ninf)}, 3))
	assert.Equal(t, []float32{2.5, 1, ninf}, apply(t, []float32{1, 1, 1}, nil, nil, b))
	_, err := NewLogitBias(map[int32]float32{3: 1}, 3)
	assert.Error(t, err)

	a := must(NewAllowTokens([]int32{2, 0, 2}, 4))
	assert.Equal(t, []float32{1, ninf, 3, ninf}, apply(t, []float32{1, 2, 3, 4}, nil, nil, a))
	_, err = NewAllowTokens(nil, 4)
	assert.Error(t, err)
	_, err = NewAllowTokens([]int32{4}, 4)
	assert.Error(t, err)

	k := must(NewBlockTokens([]int32{1, 3}, 4))
	assert.Equal(t, []float32{1, ninf, 3, ninf}, apply(t, []float32{1, 2, 3, 4}, nil, nil, k))
	_, err = NewBlockTokens([]int32{-1}, 4)
	assert.Error(t, err)
}

// TestNoRepeatNGramBruteForce checks the incremental n-gram table against a brute-force scan of the
// whole history at every step.
func TestNoRepeatNGramBruteForce(t *testing.T) {
	const v = 3
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 1; n <= 4; n++ {
		p, err := Chain(v, must(NewNoRepeatNGram(n)), must(NewEncoderNoRepeatNGram(n)))
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			prompt := []int32{int32(rng.IntN(v)), int32(rng.IntN(v))}
			row := p.NewHistory(prompt)
			for range 25 {
				seq := row.Tokens()
				want := []float32{0, 0, 0}
				if len(seq)+1 >= n {
					for i := 0; i+n <= len(seq); i++ {
						if slices.Equal(seq[i:i+n-1], seq[len(seq)-n+1:]) {
							want[seq[i+n-1]] = ninf
						}
					}
					for i := 0; i+n <= len(prompt); i++ {
						if slices.Equal(prompt[i:i+n-1], seq[len(seq)-n+1:]) {
							want[prompt[i+n-1]] = ninf
						}
					}
				}
				got := []float32{0, 0, 0}
				p.Process(row, got)
				assert.Equal(t, want, got, "n=%d history %v", n, seq)
				row.Accept(int32(rng.IntN(v)))
			}
		}
	}
}
