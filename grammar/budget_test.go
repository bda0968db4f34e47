package grammar

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The two hostile inputs of issue 26: a GBNF grammar whose stack set doubles with every "a"
// (llama.cpp's matcher and this package's before the shared stack graph: 4.3 GB after 22
// tokens), and a JSON Schema whose anyOf of two overlapping recursive arrays does the same with
// every "[" (4.1 GB in llamaserve).
const (
	ambiguousGBNF = "root ::= x\nx ::= \"a\" x \"b\"? | \"a\" x \"c\"? | \"a\"\n"
	overlapSchema = `{"$defs":{"a":{"type":"array","items":{"$ref":"#"}},"b":{"type":"array","items":{"$ref":"#"},"maxItems":9}},` +
		`"anyOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/b"}]}`
)

// heapGrowth runs f and returns how much it grew the live heap.
func heapGrowth(f func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// feed masks a row and accepts token tok n times, checking after each step that the footprint
// stays under perStep times the steps so far: a stack set that doubles fails within a few steps.
func feed(t *testing.T, m *Matcher, s State, tok int32, n, perStep int) State {
	t.Helper()
	row := make([]float32, m.Vocabulary().Size())
	for i := range n {
		require.NoError(t, m.Apply(s, row), "step %d", i)
		require.False(t, math.IsInf(float64(row[tok]), -1), "step %d: %q masked", i, tok)
		s = m.Accept(s, tok)
		require.LessOrEqual(t, m.Footprint(), 64<<10+perStep*(i+1), "step %d", i)
	}
	return s
}

// TestAmbiguousRecursionIsLinear runs the 47-byte grammar for 600 tokens in linear memory and
// checks its language against its definition: x derives a^k w for k >= 1 and w a string over
// {b, c} of at most k-1 bytes.
func TestAmbiguousRecursionIsLinear(t *testing.T) {
	require.Len(t, ambiguousGBNF, 47)
	m := NewMatcher(mustParse(t, ambiguousGBNF), byteVocab(t))
	var s State
	grown := heapGrowth(func() { s = feed(t, m, m.Start(), 'a', 600, 16<<10) })
	assert.Less(t, grown, int64(64<<20))
	assert.True(t, m.Complete(m.AcceptBytes(s, []byte(strings.Repeat("bc", 299)+"b"))), "599 closing bytes")
	assert.True(t, m.Dead(m.AcceptBytes(s, []byte(strings.Repeat("bc", 300)))), "600 closing bytes")

	oracle := func(s string) bool {
		k := len(s) - len(strings.TrimLeft(s, "a"))
		rest := s[k:]
		return k >= 1 && len(rest) <= k-1 && strings.Trim(rest, "bc") == ""
	}
	var all []string
	for n := range 9 {
		for code := range int(math.Pow(3, float64(n))) {
			var b strings.Builder
			for range n {
				b.WriteByte("abc"[code%3])
				code /= 3
			}
			all = append(all, b.String())
		}
	}
	for _, w := range all {
		assert.Equal(t, oracle(w), matches(m, w), "%q", w)
	}
}

// TestOverlappingRecursiveSchemaIsLinear opens 400 arrays under the overlapping anyOf schema in
// linear memory, then closes them: the document is complete, and one more "]" is refused.
func TestOverlappingRecursiveSchemaIsLinear(t *testing.T) {
	m := NewMatcher(mustSchema(t, overlapSchema), byteVocab(t))
	var s State
	grown := heapGrowth(func() { s = feed(t, m, m.Start(), '[', 400, 32<<10) })
	assert.Less(t, grown, int64(64<<20))
	closed := m.AcceptBytes(s, []byte(strings.Repeat("]", 400)))
	assert.True(t, m.Complete(closed))
	assert.True(t, m.Dead(m.AcceptBytes(closed, []byte("]"))))
	// The second branch bounds its items: ten items are an array of the first.
	assert.True(t, matches(m, "[[],[],[],[],[],[],[],[],[],[]]"))
	assert.True(t, matches(m, "[[[]],[[],[]]]"))
	assert.False(t, matches(m, "[[],]"))
}

// TestHostileFamiliesStayWithinBudget feeds grammars of the families of issue 26 (ambiguous
// recursion, overlapping alternatives, nested optional repetition) one byte at a time under an
// 8 MiB budget: each either keeps going or fails with ErrBudget, and neither the footprint nor
// the heap passes the budget. The quadratic one (a stack set of linear size whose tails change
// with every byte) must fail, with the budget named.
func TestHostileFamiliesStayWithinBudget(t *testing.T) {
	const budget = 8 << 20
	cases := []struct {
		src  string
		fail bool
	}{
		{ambiguousGBNF, false},
		{"root ::= x\nx ::= (\"a\" | \"aa\") x (\"b\" | \"bb\")? | \"a\"\n", true},
		{"root ::= x\nx ::= \"a\" x | \"a\" x \"a\" | \"a\"\n", false},
		{"root ::= x\nx ::= \"a\" x x | \"a\" | \"\"\n", false},
		{"root ::= x\nx ::= \"a\"+ x \"a\"* | \"a\"\n", false},
		{"root ::= x\nx ::= \"a\" (x \"b\" | x \"c\" | x)?\n", false},
		{"root ::= ((\"a\" \"a\"?)+ \"b\"?)+\n", false},
		{"root ::= (\"a\" (\"a\"? (\"a\" \"a\"?)*)?)* \"b\"\n", false},
	}
	for _, c := range cases {
		m := NewMatcherWith(mustParse(t, c.src), byteVocab(t), Options{MaxBytes: budget})
		row := make([]float32, m.Vocabulary().Size())
		var err error
		grown := heapGrowth(func() {
			s := m.Start()
			for range 1500 {
				if err = m.Apply(s, row); err != nil {
					break
				}
				s = m.Accept(s, 'a')
				require.LessOrEqual(t, m.Footprint(), budget+8<<10, c.src)
			}
		})
		assert.Less(t, grown, int64(4*budget), c.src)
		if c.fail {
			require.ErrorIs(t, err, ErrBudget, c.src)
			assert.Contains(t, err.Error(), "Options.MaxBytes")
		} else {
			assert.NoError(t, err, c.src)
		}
	}
}

// TestStepWorkBudget gives the ambiguous grammar a step budget that its deep states outgrow:
// the sequence fails (its row all -inf, Accept keeping it failed, neither dead nor complete)
// with an error naming Options.StepWork, and a processor reports it for that history.
func TestStepWorkBudget(t *testing.T) {
	v := byteVocab(t)
	m := NewMatcherWith(mustParse(t, ambiguousGBNF), v, Options{StepWork: 40})
	row := make([]float32, v.Size())
	s := m.Start()
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		if err = m.Apply(s, row); err == nil {
			s = m.Accept(s, 'a')
		}
	}
	require.ErrorIs(t, err, ErrBudget)
	assert.Contains(t, err.Error(), "Options.StepWork")
	for _, x := range row {
		require.True(t, math.IsInf(float64(x), -1))
	}

	failed := State(-1)
	assert.ErrorIs(t, m.Err(failed), ErrBudget)
	assert.Equal(t, failed, m.Accept(failed, 'a'))
	assert.Equal(t, failed, m.AcceptBytes(failed, []byte("b")))
	assert.False(t, m.Dead(failed))
	assert.False(t, m.Complete(failed))
	assert.Empty(t, m.Allowed(nil, failed))
	assert.NoError(t, m.Err(m.Start()))

	p := NewProcessor(NewMatcherWith(mustParse(t, ambiguousGBNF), v, Options{StepWork: 40}))
	pipe, err := logits.Chain(v.Size(), p)
	require.NoError(t, err)
	h, other := pipe.NewHistory(nil), pipe.NewHistory(nil)
	for range 1000 {
		pipe.Process(h, row)
		if p.Err(h) != nil {
			break
		}
		h.Accept('a')
	}
	assert.ErrorIs(t, p.Err(h), ErrBudget)
	assert.NoError(t, p.Err(other))
}

// TestGenerationEndsOnBudget generates under the quadratic grammar with a model that prefers
// "a" (as a logit_bias would): the request ends with FinishError and an error wrapping
// ErrBudget instead of exhausting memory, and the heap grows by less than a few budgets.
func TestGenerationEndsOnBudget(t *testing.T) {
	pieces := testPieces()
	V := len(pieces)
	tok := pieceTokenizer{pieces}
	voc, err := VocabularyFrom(tok, V)
	require.NoError(t, err)
	const budget = 4 << 20
	g := mustParse(t, "root ::= x\nx ::= (\"a\" | \"aa\") x (\"b\" | \"bb\")? | \"a\"\n")
	proc := NewProcessor(NewMatcherWith(g, voc, Options{MaxBytes: budget}))
	favour := make([]float32, V)
	favour['a'] = 10
	favourA := backend.ModelFunc(func([]int32) ([]float32, error) { return favour, nil })
	var res []generation.Result
	grown := heapGrowth(func() {
		cfg := genconfig.Default()
		maxNew := 100000
		cfg.MaxNewTokens = &maxNew
		gen := generation.NewGenerator(backend.NewMemoryBackend(V, 1, favourA), tok)
		res, err = gen.Generate(context.Background(), []generation.Request{{Prompt: []int32{'x'}, Config: cfg, Processors: []logits.Processor{proc}}})
	})
	require.NoError(t, err)
	assert.Equal(t, generation.FinishError, res[0].Finish)
	require.ErrorIs(t, res[0].Err, ErrBudget)
	assert.True(t, errors.Is(res[0].Err, ErrBudget))
	assert.Greater(t, len(res[0].Tokens), 100, "a few hundred tokens fit the budget")
	assert.Less(t, grown, int64(8*budget))
}
