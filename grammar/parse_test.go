package grammar

import (
	"errors"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// matches reports whether the whole of s is a sentence of g, by running the matcher's automaton.
func matches(m *Matcher, s string) bool {
	st := m.AcceptBytes(m.Start(), []byte(s))
	return !m.Dead(st) && m.Complete(st)
}

func byteVocab(t testing.TB) *Vocabulary {
	toks := make([][]byte, 257)
	for i := range 256 {
		toks[i] = []byte{byte(i)}
	}
	v, err := NewVocabulary(toks, []int32{256})
	require.NoError(t, err)
	return v
}

// TestParseMatchesRegexp checks sentences of GBNF grammars against equivalent Go regular
// expressions written by hand (an independent matcher).
func TestParseMatchesRegexp(t *testing.T) {
	v := byteVocab(t)
	cases := []struct{ gbnf, re string }{
		{`root ::= "a" [b-d]* "e"`, `a[b-d]*e`},
		{`root ::= ("ab" | "c"){2,3} "!"?`, `(ab|c){2,3}!?`},
		{`root ::= [é-ê]+ [^a-z]`, `[é-ê]+[^a-z]`},
		{"root ::= x{2} y{1,} z{0,2}\nx ::= \"x\"\ny ::= [y]\nz ::= \"\\x7a\" # zed", `xxy+z{0,2}`},
		{`root ::= "\u00e9\t\"\\" [\]\x2D] .`, `é\t"\\[\]\-](?s:.)`},
		{"root ::= (\n  \"a\" |\n  \"b\"\n)+ \"😀\"", `[ab]+😀`},
		{`root ::= [^"\\\x7F\x00-\x1F]*`, `[^"\\\x7F\x00-\x1F]*`},
		{`root ::= ""`, ``},
		{"root ::= (\"a\"{1,\n 2}\n)", `a{1,2}`},
		{`root ::= "ab"* "c"+`, `(ab)*c+`},
	}
	probes := []string{"", "a", "ae", "abce", "abcde", "abx", "abab", "abc", "ccab!", "cc!!", "ababab!", "é1", "éêé!", "éa", "ê", "xxy", "xxyyzz", "xxyzzz", "xy",
		"é\t\"\\]x", "é\t\"\\-é", "é\t\"\\[\n", "ab😀", "😀", "a", "hello", "a\"b", "\x7f", "é\u00ff", "abababccc", "c", "ab"}
	for _, c := range cases {
		g, err := Parse(c.gbnf)
		require.NoError(t, err, c.gbnf)
		m := NewMatcher(g, v)
		re := regexp.MustCompile(`\A(?:` + c.re + `)\z`)
		for _, p := range probes {
			assert.Equal(t, re.MatchString(p), matches(m, p), "grammar %q on %q", c.gbnf, p)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		src       string
		line, col int
		reason    string
	}{
		{"root ::= x", 1, 10, `undefined rule "x"`},
		{"root ::= \"a\"\nroot ::= \"b\"", 2, 1, `rule "root" defined twice`},
		{"a ::= \"x\"", 1, 10, "grammar does not define root"},
		{"root ::= [a-", 1, 10, "unterminated character class"},
		{"root ::= \"abc", 1, 14, "unterminated literal"},
		{`root ::= "\q"`, 1, 11, `unknown escape \q (the escapes are \x \u \U \t \n \r \\ \" \[ \], as in llama.cpp)`},
		{`root ::= "a"{3,1}`, 1, 13, "repetition {3,1}: maximum below minimum"},
		{`root ::= * "a"`, 1, 10, `repetition '*' without a preceding symbol`},
		{"root ::= (\"a\"", 1, 14, "expected ) to close the group, found end of grammar"},
		{"root ::= a\na ::= a \"x\"", 1, 1, `left recursion: rule "a" can reach itself without consuming input`},
		{"root ::= b \"x\"\nb ::= \"y\"? root", 1, 1, `left recursion: rule "root" can reach itself without consuming input`},
		{"root = \"a\"", 1, 6, `expected ::= after rule name "root", found '='`},
		{`root ::= <think>`, 1, 10, "token references by text (<...>) are not supported: write the token's id, <[id]>"},
		{`root ::= "a" !"b"`, 1, 14, `expected <[id]> after !, found '"'`},
		{`root ::= <[1x]>`, 1, 10, `token reference "<[1x]>": expected <[id]> with a token id of 0 to 2147483647`},
		{`root ::= <[99999999999]>`, 1, 10, `token reference "<[99999999999]>": expected <[id]> with a token id of 0 to 2147483647`},
		{"root ::= a\na ::= <[3]>? a \"x\"", 1, 1, `left recursion: rule "a" can reach itself without consuming input`},
		{`root ::= [z-a]`, 1, 14, `character range 'z'-'a' is reversed`},
		{`root ::= "a"{99999999999}`, 1, 14, "repetition count 99999999999 too large"},
		{`root ::= "abc"{400000}`, 1, 23, "grammar too large (over 1048576 elements)"},
		{`root ::= "\x4"`, 1, 11, `invalid escape \x4"`},
		{"root ::= \"a\" )", 1, 14, `expected the end of the rule, found ')'`},
		// Issue 27: where llama.cpp's parser differs, this one follows it or refuses.
		{`root ::= [\-]`, 1, 11, `unknown escape \- (the escapes are \x \u \U \t \n \r \\ \" \[ \], as in llama.cpp)`},
		{`root ::= "\/"`, 1, 11, `unknown escape \/ (the escapes are \x \u \U \t \n \r \\ \" \[ \], as in llama.cpp)`},
		{`root ::= [\^a]`, 1, 11, `unknown escape \^ (the escapes are \x \u \U \t \n \r \\ \" \[ \], as in llama.cpp)`},
		{`root ::= "a" []`, 1, 14, `empty character class [] (llama.cpp reads it as the empty string: write "" for that)`},
		{`root ::= "a" [^]`, 1, 14, `empty character class [^] (llama.cpp reads it as the empty string: write "" for that)`},
		{`root ::= "\U00110000"`, 1, 11, `invalid escape \U00110000`},
		{`root ::= "\uD800"`, 1, 11, `escape \uD800 is a surrogate, not a character`},
		{"root ::= \"a\"{1,\n2}", 1, 16, "expected } to close the repetition, found '\\n'"},
	}
	for _, c := range cases {
		_, err := Parse(c.src)
		var se *SyntaxError
		require.True(t, errors.As(err, &se), "%q: %v", c.src, err)
		assert.Equal(t, c.reason, se.Reason, c.src)
		assert.Equal(t, [2]int{c.line, c.col}, [2]int{se.Line, se.Column}, "%q: %v", c.src, err)
	}
}
