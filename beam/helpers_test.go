package beam_test

import (
	"context"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/stretchr/testify/require"
)

// probModel is a table of next-token probabilities keyed by the generated
// tokens (the history after the first promptLen tokens), e.g. "" or "1,2";
// prefixes missing from the table get def. Logits are log(p), so a
// probability of 0 is a masked token.
func probModel(vocab, promptLen int, table map[string][]float64, def []float64) backend.ModelFunc {
	buf := make([]float32, vocab)
	return func(history []int32) ([]float32, error) {
		p, ok := table[key(history[promptLen:])]
		if !ok {
			p = def
		}
		for i := range buf {
			buf[i] = float32(math.Log(p[i]))
		}
		return buf, nil
	}
}

func key(tokens []int32) string {
	s := make([]string, len(tokens))
	for i, t := range tokens {
		s[i] = strconv.Itoa(int(t))
	}
	return strings.Join(s, ",")
}

// hashModel gives logits in [-4, 4) that depend on the whole history and on
// seed: a prefix-dependent model with no structure a search could exploit.
func hashModel(vocab int, seed uint64) backend.ModelFunc {
	buf := make([]float32, vocab)
	return func(history []int32) ([]float32, error) {
		h := fnv.New64a()
		var b [4]byte
		for _, t := range history {
			b[0], b[1], b[2], b[3] = byte(t), byte(t>>8), byte(t>>16), byte(t>>24)
			h.Write(b[:])
		}
		r := rand.New(rand.NewPCG(h.Sum64(), seed))
		for i := range buf {
			buf[i] = float32(r.Float64()*8 - 4)
		}
		return buf, nil
	}
}

// masked sets the logits of the given tokens to -inf.
func masked(m backend.ModelFunc, tokens ...int32) backend.ModelFunc {
	return func(history []int32) ([]float32, error) {
		l, err := m(history)
		for _, t := range tokens {
			l[t] = float32(math.Inf(-1))
		}
		return l, err
	}
}

// logSoftmax64 is an independent float64 log-softmax.
func logSoftmax64(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, float64(v))
	}
	sum := 0.0
	for _, v := range x {
		sum += math.Exp(float64(v) - m)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - m - math.Log(sum)
	}
	return out
}

// teacherForced is the log-probability of tokens after prompt under model,
// each step scored with an independent log-softmax.
func teacherForced(t *testing.T, model backend.ModelFunc, prompt, tokens []int32) float64 {
	t.Helper()
	hist := slices.Clone(prompt)
	sum := 0.0
	for _, tok := range tokens {
		l, err := model(hist)
		require.NoError(t, err)
		sum += logSoftmax64(l)[tok]
		hist = append(hist, tok)
	}
	return sum
}

// recorder wraps a backend and records what the search asks of it.
type recorder struct {
	backend.Backend
	feeds   [][]backend.Feed // per Eval, the feeds (tokens copied)
	maxRows int
}

func (r *recorder) Eval(ctx context.Context, feeds []backend.Feed) error {
	fs := make([]backend.Feed, len(feeds))
	for i, f := range feeds {
		fs[i] = backend.Feed{Slot: f.Slot, Tokens: slices.Clone(f.Tokens)}
	}
	r.feeds = append(r.feeds, fs)
	r.maxRows = max(r.maxRows, len(feeds))
	return r.Backend.Eval(ctx, feeds)
}

// rowsPerEval is the number of feeds of each Eval.
func (r *recorder) rowsPerEval() []int {
	n := make([]int, len(r.feeds))
	for i, f := range r.feeds {
		n[i] = len(f)
	}
	return n
}

// dropCopies is a deliberately broken backend: Copy does nothing, so a
// child that needs its parent's history copied into a free slot gets an
// empty one, and the backend scores a history the search never chose. Tests
// use it to prove that they detect a search whose backend state does not
// follow the parents.
type dropCopies struct{ *backend.MemoryBackend }

func (dropCopies) Copy(dst, src int) error { return nil }

// seenModel wraps a model and records every history it scores.
type seenModel struct {
	model backend.ModelFunc
	seen  [][]int32
}

func (m *seenModel) fn(history []int32) ([]float32, error) {
	m.seen = append(m.seen, slices.Clone(history))
	return m.model(history)
}

// cfgOf returns a default config changed by set.
func cfgOf(set func(c *genconfig.Config)) *genconfig.Config {
	c := genconfig.Default()
	set(c)
	return c
}

func intp(v int) *int            { return &v }
func int32p(v int32) *int32      { return &v }
func tokens(ts ...int32) []int32 { return ts }

// narrow runs the Narrowing rule on a fresh memory backend with `slots`
// slots.
func narrow(t *testing.T, model backend.ModelFunc, vocab, slots int, prompt []int32, set func(c *genconfig.Config)) ([]beam.Hypothesis, *recorder) {
	t.Helper()
	rec := &recorder{Backend: backend.NewMemoryBackend(vocab, slots, model)}
	res, err := beam.Search(context.Background(), rec, [][]int32{prompt}, beam.Options{Rule: beam.Narrowing, Config: cfgOf(set)})
	require.NoError(t, err)
	return res.Hypotheses[0], rec
}

// requireEmpty checks that the search left every slot of b empty.
func requireEmpty(t *testing.T, b *backend.MemoryBackend) {
	t.Helper()
	for i := range b.Slots() {
		require.Empty(t, b.History(i), "slot %d not cleared", i)
	}
}
