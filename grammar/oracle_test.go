package grammar

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oracleCase is a grammar with an independent decision procedure for its sentences (a Go regular
// expression written by hand, encoding/json, or a counter) and a tiny vocabulary.
type oracleCase struct {
	name     string
	gbnf     string
	sentence func(s string) bool
	tokens   []string // the last token is the end-of-generation token (no bytes)
	depth    int      // longest prefix checked, in tokens (default 3)
}

func reOracle(re string) func(string) bool {
	r := regexp.MustCompile(`\A(?:` + re + `)\z`)
	// Go's regexp reads an invalid byte as U+FFFD; a sentence of a grammar is valid UTF-8.
	return func(s string) bool { return utf8.ValidString(s) && r.MatchString(s) }
}

func balanced(s string) bool {
	// root ::= "(" root ")" | "x": n opening parentheses, x, n closing ones.
	n := 0
	for n < len(s) && s[n] == '(' {
		n++
	}
	if len(s) != 2*n+1 || s[n] != 'x' {
		return false
	}
	for _, c := range s[n+1:] {
		if c != ')' {
			return false
		}
	}
	return true
}

var oracleCases = []oracleCase{
	{"class-star", `root ::= "a" [b-d]* "e"`, reOracle(`a[b-d]*e`),
		[]string{"a", "b", "c", "ab", "e", "de", "x", "be", "ae", ""}, 0},
	{"alternation-repeat", `root ::= ("ab" | "c"){2,3} "!"?`, reOracle(`(ab|c){2,3}!?`),
		[]string{"a", "b", "c", "abc", "ab", "!", "c!", "ba", ""}, 0},
	{"utf8-split", `root ::= [é-ê]+ [^a-z]`, reOracle(`[é-ê]+[^a-z]`),
		[]string{"\xc3", "\xa9", "é", "ê", "éa", "1", "a", "\xa9\xc3", "\xaa1", ""}, 0},
	{"nested", `root ::= "(" root ")" | "x"`, balanced,
		[]string{"(", ")", "x", "((", "))", "x)", "(x", "x))", ""}, 0},
	{"json", JSONGrammarText, func(s string) bool {
		// The grammar is JSON with at most 16 digits per number part and whitespace limited to
		// one space or one newline plus blanks; within this vocabulary and bound, it is JSON.
		return json.Valid([]byte(s)) && (len(s) == 0 || s[0] != ' ' && s[0] != '\n')
	}, []string{"{", "}", "[", "]", `"a"`, `"`, ":", "1", ",", ""}, 2},
}

// reach is what is known of one text: the fewest tokens known to reach a sentence from it, and
// the most tokens known not to.
type reach struct{ yes, no int }

// viableWithin reports whether some sequence of at most depth tokens turns s into a sentence.
func viableWithin(c *oracleCase, s string, depth int, memo map[string]reach) bool {
	r, ok := memo[s]
	if !ok {
		r = reach{yes: 1 << 30, no: -1}
		if c.sentence(s) {
			r.yes = 0
		}
	}
	switch {
	case r.yes <= depth:
		return true
	case r.no >= depth:
		return false
	}
	for _, t := range c.tokens[:len(c.tokens)-1] {
		if t != "" && viableWithin(c, s+t, depth-1, memo) {
			r.yes = depth
			memo[s] = r
			return true
		}
	}
	r.no = depth
	memo[s] = r
	return false
}

// TestMaskMatchesBruteForce enumerates every sequence of up to 3 tokens of a tiny vocabulary that
// the oracle finds viable and checks, for each, that the mask allows exactly the
// tokens after which a sentence is reachable within 3 more tokens (end of generation exactly
// when the text is a sentence), and that any other token it allows reaches one within 5.
func TestMaskMatchesBruteForce(t *testing.T) {
	const prefixLen, bound, deeper = 3, 3, 5
	for _, c := range oracleCases {
		t.Run(c.name, func(t *testing.T) {
			g, err := Parse(c.gbnf)
			require.NoError(t, err)
			toks := make([][]byte, len(c.tokens))
			for i, s := range c.tokens {
				toks[i] = []byte(s)
			}
			eog := int32(len(toks) - 1)
			v, err := NewVocabulary(toks, []int32{eog})
			require.NoError(t, err)
			m := NewMatcher(g, v)
			memo := map[string]reach{}
			checked := 0
			var walk func(prefix string, st State, depth int)
			// Only prefixes that the oracle itself found viable are visited.
			walk = func(prefix string, st State, depth int) {
				var want []int32
				for i, tok := range c.tokens {
					switch {
					case int32(i) == eog:
						if c.sentence(prefix) {
							want = append(want, eog)
						}
					case tok != "" && viableWithin(&c, prefix+tok, bound, memo):
						want = append(want, int32(i))
					}
				}
				got := m.Allowed(nil, st)
				// A token the mask allows beyond the oracle's bound must reach a sentence
				// within a deeper one: the brute force then decides with more tokens.
				for _, tok := range got {
					if !slices.Contains(want, tok) && tok != eog && viableWithin(&c, prefix+c.tokens[tok], deeper, memo) {
						want = append(want, tok)
					}
				}
				slices.Sort(want)
				require.Equal(t, want, got, "after %q", prefix)
				checked++
				// The scores Apply leaves finite are exactly the allowed tokens.
				scores := make([]float32, len(toks))
				for i := range scores {
					scores[i] = float32(i)
				}
				m.Apply(st, scores)
				for i, s := range scores {
					assert.Equal(t, slices.Contains(want, int32(i)), s == float32(i), "after %q token %d", prefix, i)
				}
				if depth == prefixLen || depth == c.depth && c.depth > 0 {
					return
				}
				for _, i := range want {
					if i != eog {
						walk(prefix+c.tokens[i], m.Accept(st, i), depth+1)
					}
				}
			}
			walk("", m.Start(), 0)
			t.Logf("%d prefixes checked", checked)
			assert.Greater(t, checked, 10)
		})
	}
}

func ExampleMatcher() {
	g, _ := Parse(`root ::= "yes" | "no"`)
	v, _ := NewVocabulary([][]byte{[]byte("y"), []byte("es"), []byte("no"), []byte("n"), nil}, []int32{4})
	m := NewMatcher(g, v)
	s := m.Start()
	fmt.Println(m.Allowed(nil, s))
	s = m.Accept(s, 0) // "y"
	fmt.Println(m.Allowed(nil, s))
	s = m.Accept(s, 1) // "es"
	fmt.Println(m.Allowed(nil, s), m.Complete(s))
	// Output:
	// [0 2 3]
	// [1]
	// [4] true
}
