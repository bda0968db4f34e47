package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSchemaSentences checks documents written by hand against the grammar of their schema.
func TestSchemaSentences(t *testing.T) {
	v := byteVocab(t)
	cases := []struct {
		schema string
		accept []string
		reject []string
	}{
		{`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"]}`,
			[]string{`{"b":"x"}`, `{"b": "x", "a": -12}`, `{ "b":"", "a":0 }`},
			[]string{`{}`, `{"a":1,"b":"x"}`, `{"b":"x","c":1}`, `{"b":1}`, `{"b":"x","a":1.5}`, `{"b":"x","a":01}`}},
		{`{"type":"object","properties":{"a":{"const":"k"},"b":{"type":"null"}}}`,
			[]string{`{}`, `{"a":"k"}`, `{"b":null}`, `{"a":"k","b":null}`},
			[]string{`{"b":null,"a":"k"}`, `{"a":"j"}`, `{,}`}},
		{`{"type":"object","properties":{"a":{"type":"boolean"}},"additionalProperties":{"type":"number"}}`,
			[]string{`{}`, `{"a":true}`, `{"x":1.5}`, `{"a":false,"ab":2,"":3}`, `{"b":1e5}`},
			[]string{`{"a":1}`, `{"x":"s"}`}},
		{`{"type":"array","items":{"enum":["x",1,null,{"k":[]}]},"minItems":2,"maxItems":3}`,
			[]string{`["x",1]`, `[null, {"k":[]}, "x"]`},
			[]string{`["x"]`, `["x",1,1,1]`, `["y",1]`, `[]`}},
		{`{"anyOf":[{"type":"string","pattern":"^a(b|c)+d?$"},{"type":["integer","null"]}]}`,
			[]string{`"abd"`, `"acbc"`, `5`, `null`},
			[]string{`"ad"`, `"abdd"`, `1.5`, `true`}},
		{`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}},"required":["v"]}},"$ref":"#/$defs/node"}`,
			[]string{`{"v":1}`, `{"v":1,"next":{"v":2,"next":{"v":3}}}`},
			[]string{`{"v":1,"next":{}}`}},
		{`{"type":"string","format":"date-time"}`, []string{`"2024-01-31T12:00:00Z"`, `"1999-12-01T23:59:59.123+05:30"`}, []string{`"2024-13-01T00:00:00Z"`, `"2024-01-01"`}},
		{`{"type":"string","format":"uuid"}`, []string{`"0123abcd-0000-1111-2222-abcdefABCDEF"`}, []string{`"0123abcd-0000-1111-2222"`}},
		{`{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"abc"`, `"a\"b"`, `"é😀"`}, []string{`"a"`, `"abcd"`}},
		{`{"oneOf":[{"type":"object"},{"type":"array"}]}`, []string{`{"x":[1,{}]}`, `[]`}, []string{`1`}},
		// Issue 27: every keyword enforced, each on its own type.
		{`{"minItems":1}`, []string{`"foo"`, `12`, `[1]`, `{}`}, []string{`[]`}},
		{`{"required":["foo"]}`, []string{`{"foo":1}`, `"x"`, `[]`}, []string{`{}`, `{"bar":1}`}},
		{`{"type":"object","required":["foo"]}`, []string{`{"foo":null}`}, []string{`{}`}},
		{`{"type":"string","pattern":"^a+$","maxLength":3}`, []string{`"a"`, `"aaa"`}, []string{`"aaaa"`, `""`}},
		{`{"type":"string","enum":["a",1,null]}`, []string{`"a"`}, []string{`1`, `null`}},
		{`{"const":"x","type":"integer","anyOf":[{}]}`, nil, nil},
		{`{"type":"string","minLength":2}`, []string{`"ab"`, `"\ud83d\ude00\u0061"`}, []string{`"\ud83d\ude00"`, `"😀"`, `"\ud83d"`}},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}}`,
			[]string{`{"a":1,"b":"x"}`}, []string{`{"\u0061":"x"}`, `{"a":1,"\u0061":"x"}`}},
		{`{"type":"string","pattern":"^.$"}`, []string{`"a"`, `"😀"`}, []string{"\"\u2028\"", "\"\u2029\"", `"\n"`, `"ab"`}},
		{`{"type":"string","format":"date"}`, []string{`"2024-02-29"`, `"2000-02-29"`, `"2023-04-30"`}, []string{`"2023-02-29"`, `"1900-02-29"`, `"2024-02-30"`, `"2024-04-31"`}},
		{`{"enum":["R&D","<b>"]}`, []string{`"R&D"`, `"<b>"`}, []string{`"R"`, `"R&D "`}},
		{`{"type":"object","properties":{"a&b":{"const":1}},"required":["a&b"]}`, []string{`{"a&b":1}`}, nil},
		{`{"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind"]},{"type":"object","properties":{"kind":{"const":"b"}},"required":["kind"]}]}`,
			[]string{`{"kind":"a","x":1}`, `{"kind":"b"}`}, []string{`{"kind":"c"}`, `{}`}},
		{`{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","maxLength":2}`, []string{`"ab"`}, []string{`"abc"`, `1`}},
		{`{"anyOf":[{"type":"string"},{"type":"integer"}],"minimum":3}`, []string{`"x"`, `3`}, []string{`2`}},
		{`{"required":["foo"],"additionalProperties":{"type":"integer"}}`, []string{`{"foo":1}`, `{"foo":1,"bar":2}`}, []string{`{"foo":"x"}`, `{"foo":1,"bar":"x"}`}},
		{`{"$defs":{"n":{"type":"object","properties":{"a":{"type":"integer"},"child":{"allOf":[{"$ref":"#/$defs/n"},{"required":["a"]}]}}}},"$ref":"#/$defs/n"}`,
			[]string{`{"a":1,"child":{"a":2,"child":{"a":3}}}`, `{}`}, []string{`{"child":{}}`, `{"a":1,"child":{"child":{"a":1}}}`}},
		{`{"type":"string","pattern":"^[a-z]+-[0-9]+$","maxLength":6}`, []string{`"a-1"`, `"abc-12"`}, []string{`"abcd-12"`, `"a-"`, `"-1"`}},
		{`{"type":"string","pattern":"a+","maxLength":3,"minLength":2}`, []string{`"aa"`, `"xa"`, `"aax"`}, []string{`"a"`, `"xxxa"`, `"bb"`}},
		{`{"type":"string","pattern":"^ab","maxLength":4}`, []string{`"ab"`, `"abcd"`, `"ab\ud83d\ude00\n"`}, []string{`"abcde"`, `"a"`, `"ab\ud83d\ude00\n\n"`}},
		{`{"type":"string","pattern":"b$","minLength":3}`, []string{`"aab"`, `"bbb"`}, []string{`"ab"`, `"abc"`}},
		{`{"type":"array","uniqueItems":false,"items":{"type":"integer"}}`, []string{`[1,1]`}, []string{`["x"]`}},
		{`{"format":"uri","maxLength":2083,"minLength":1,"type":"string"}`, []string{`"https://example.org/a?b#c"`}, []string{`"example"`}},
		{`{"type":"number","multipleOf":0.01,"minimum":0}`, []string{`0`, `1.5`, `2.25`, `100`}, []string{`2.255`, `-1`, `1e2`}},
		{`{"type":"number","multipleOf":0.1}`, []string{`-3`, `1.5`, `0.0`}, []string{`1.25`, `1e2`}},
		{`{"multipleOf":1}`, []string{`3`, `-4`, `"x"`}, []string{`1.5`}},
		{`{"type":"integer","multipleOf":1.5}`, []string{`0`, `3`, `-9`, `300`}, []string{`1`, `4`, `1.5`}},
		{`{"type":"integer","multipleOf":7}`, []string{`0`, `7`, `-14`, `7000000000000007`}, []string{`1`, `8`, `-15`, `07`, `-0`}},
		{`{"type":"integer","multipleOf":5,"minimum":-12,"exclusiveMaximum":20}`, []string{`-10`, `0`, `15`}, []string{`-15`, `20`, `3`}},
		{`{"oneOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false},{"type":"object","properties":{"b":{"type":"string"}},"required":["b"],"additionalProperties":false}]}`,
			[]string{`{"a":1}`, `{"b":"x"}`}, []string{`{"a":1,"b":"x"}`, `{}`}},
		{`{"maximum":3}`, []string{`"x"`, `3`, `-1.5`, `2.999`, `{}`}, []string{`3.001`, `4`}},
		{`{"type":"number","exclusiveMinimum":0,"maximum":1}`, []string{`0.5`, `1`, `1.0`, `0.0001`}, []string{`0`, `0.0`, `1.01`, `-0.5`}},
		{`{"allOf":[{"type":"string"},{"maxLength":3},{"minLength":1}]}`, []string{`"abc"`}, []string{`"abcd"`, `""`, `1`}},
		{`true`, []string{`1`, `"s"`, `[{}]`}, []string{`x`}},
		{`{"type":"array","prefixItems":[{"type":"string"},{"type":"integer","minimum":0,"maximum":9}],"items":false,"minItems":2}`,
			[]string{`["a",3]`, `[ "", 0 ]`}, []string{`["a"]`, `["a",10]`, `["a",3,4]`, `[3,"a"]`}},
		{`{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}]}`,
			[]string{`[]`, `["a"]`, `["a",3]`, `["a",3,{}]`}, []string{`[3]`, `["a","b"]`}},
		{`{"prefixItems":[{"const":1}],"items":{"type":"boolean"},"maxItems":3}`,
			[]string{`[1]`, `[1,true]`, `[1,true,false]`, `[]`, `"x"`}, []string{`[1,true,false,true]`, `[1,2]`}},
		{`{"items":[{"type":"null"}],"additionalItems":false}`, []string{`[null]`}, []string{`[null,null]`}},
		{`{"$defs":{"named":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}},
		  "allOf":[{"$ref":"#/$defs/named"},{"properties":{"age":{"type":"integer","minimum":0}}}]}`,
			[]string{`{"name":"x"}`, `{"name":"x","age":3}`}, []string{`{"age":3}`, `{"name":"x","age":-1}`, `{"name":"x","k":1}`}},
		{`{"allOf":[{"$ref":"#/$defs/d"}],"description":"annotated","$defs":{"d":{"enum":[1,2]}}}`,
			[]string{`1`, `2`}, []string{`3`}},
		{`{"type":"object","properties":{"a":{"type":"boolean"}},"allOf":[{"required":["a"]}]}`,
			[]string{`{"a":true}`}, []string{`{}`}},
	}
	for _, c := range cases {
		g, err := FromJSONSchema([]byte(c.schema))
		if c.accept == nil && c.reject == nil {
			assert.ErrorContains(t, err, "matches no value", c.schema)
			continue
		}
		require.NoError(t, err, c.schema)
		m := NewMatcher(g, v)
		for _, s := range c.accept {
			assert.True(t, matches(m, s), "%s should accept %s", c.schema, s)
		}
		for _, s := range c.reject {
			assert.False(t, matches(m, s), "%s should reject %s", c.schema, s)
		}
	}
}

func TestSchemaErrors(t *testing.T) {
	cases := []struct{ schema, path, keyword, reason string }{
		{`{"type":"integer","not":{}}`, "", "not", `is not supported (the grammar cannot express it)`},
		{`{"type":"number","multipleOf":0.5}`, "", "multipleOf", `multipleOf 0.5 on numbers is supported as 1, 0.1, 0.01, ... only (at most so many fractional digits)`},
		{`{"type":"integer","multipleOf":3,"minimum":0}`, "", "multipleOf", `multipleOf 3 with a bound on one side only is not supported`},
		{`{"type":"integer","multipleOf":101}`, "", "multipleOf", `multipleOf 101 on integers without both bounds is supported up to 100`},
		{`{"type":"integer","multipleOf":0}`, "", "multipleOf", `multipleOf must be a number above 0`},
		{`{"allOf":[{"multipleOf":2},{"multipleOf":3}]}`, "/allOf/1", "multipleOf", `the intersection of two different multipleOf (2 and 3) is not supported`},
		{`{"properties":{"a":{"allOf":[]}}}`, "/properties/a", "allOf", `allOf must be a non-empty array`},
		{`{"type":"number","minimum":1e-70}`, "", "minimum", `a bound of a number with more than 64 fractional digits is not supported`},
		{`{"type":"number","minimum":3,"exclusiveMaximum":3}`, "", "", `the schema matches no value`},
		{`{"type":"integer","minimum":3,"exclusiveMaximum":3}`, "", "maximum", `the range [3, 2] holds no integer`},
		{`{"type":"integer","exclusiveMinimum":true}`, "", "exclusiveMinimum", `exclusiveMinimum must be a number (the boolean form of draft 4 is not supported)`},
		{`{"type":"integer","minimum":1e17}`, "", "minimum", `the range allows no integer of at most 16 digits`},
		{`{"allOf":[{"pattern":"^a$"},{"pattern":"^b$"}]}`, "/allOf/1", "pattern", `the intersection of two different patterns ("^a$" and "^b$") is not supported`},
		{`{"prefixItems":[{},{}],"allOf":[{"prefixItems":[{}]}]}`, "/allOf/0", "prefixItems", `the intersection of two different prefixItems lists is not supported`},
		{`{"oneOf":[{"type":"object","required":["a"]},{"type":"object","properties":{"a":{}},"additionalProperties":false}]}`, "", "oneOf", `branches 0 and 1 are not provably disjoint, so the grammar cannot enforce that exactly one matches (supported: branches of different types, with different const/enum values, with a required property whose const/enum values differ, or with a key that one requires and the other forbids)`},
		{`{"oneOf":[{"type":"string"},{"maxLength":3}]}`, "", "oneOf", `branches 0 and 1 are not provably disjoint, so the grammar cannot enforce that exactly one matches (supported: branches of different types, with different const/enum values, with a required property whose const/enum values differ, or with a key that one requires and the other forbids)`},
		{`{"type":"string","pattern":"^[a-z]+[0-9]+$","maxLength":100000}`, "", "maxLength", `pattern "^[a-z]+[0-9]+$" with minLength 0 and maxLength 100000: more than 20000 states`},
		{`{"type":"string","pattern":"^(?=a)"}`, "", "pattern", `pattern "^(?=a)": (?...) groups other than (?:...) are not supported (lookarounds, named groups, flags)`},
		{`{"type":"string","pattern":"^\\p{L}$"}`, "", "pattern", `pattern "^\\p{L}$": the escape \p is not supported`},
		{`{"type":"string","pattern":"^[\\S]$"}`, "", "pattern", `pattern "^[\\S]$": \S inside a character class is not supported`},
		{`{"type":"string","pattern":"^a$|b^"}`, "", "pattern", `pattern "^a$|b^": ^ and $ are supported at the ends of the pattern (or of its top-level alternatives) only`},
		{`{"type":"string","format":"date","pattern":"^2"}`, "", "pattern", `pattern beside format "date" is not supported`},
		{`{"type":"array","minItems":3,"maxItems":2}`, "", "maxItems", `maxItems 2 below minItems 3`},
		{`{"type":"strin"}`, "", "type", `unknown type "strin"`},
		{`{"typo":1}`, "", "typo", `is unknown`},
		{`{"type":"array","uniqueItems":true}`, "", "uniqueItems", `is not supported (the grammar cannot express it)`},
		{`{"$ref":"http://x/y"}`, "", "$ref", `$ref "http://x/y": only local references (#, #/$defs/NAME, any JSON pointer into the document) are supported, and the target must exist`},
		{`{"properties":{"a":{"$id":"http://x/","$ref":"#/b"}}}`, "/properties/a", "$id", `an $id below the root changes what the $ref under it name: not supported`},
		{`{"enum":[]}`, "", "enum", `enum must be a non-empty array`},
		{`false`, "", "", `the schema matches no value`},
		{`{"type":"string","enum":[1,2]}`, "", "", `the schema matches no value`},
	}
	for _, c := range cases {
		_, err := FromJSONSchema([]byte(c.schema))
		var se *SchemaError
		require.True(t, errors.As(err, &se), "%s: %v", c.schema, err)
		assert.Equal(t, c.path, se.Path, c.schema)
		assert.Equal(t, c.keyword, se.Keyword, c.schema)
		assert.Equal(t, c.reason, se.Reason, c.schema)
	}
	_, err := FromJSONSchema([]byte(`{"type":`))
	assert.ErrorContains(t, err, "json schema at /: not JSON")
	_, err = FromJSONSchema([]byte(`{"properties":{"a/b":{"pattern":"("}}}`))
	assert.ErrorContains(t, err, `json schema at /properties/a~1b: keyword "pattern": pattern "(": `)
	_, err = FromJSONSchema([]byte(`{"type":"integer","not":{}}`))
	assert.EqualError(t, err, `json schema at /: keyword "not" is not supported (the grammar cannot express it)`)
}

func TestSchemaSelfReference(t *testing.T) {
	_, err := FromJSONSchema([]byte(`{"$ref":"#"}`))
	assert.EqualError(t, err, `json schema at /: keyword "$ref": the schema cannot be matched: grammar: line 1, column 1: left recursion: rule "ref-1" can reach itself without consuming input`)
}

// TestSchemaIntegerRanges checks bounded integers against plain comparison, for every numeral
// (and near-numeral) of a window around each range, over ranges picked to hit every edge of the
// digit-by-digit construction.
func TestSchemaIntegerRanges(t *testing.T) {
	v := byteVocab(t)
	type bound struct {
		key string
		val string
	}
	cases := [][]bound{
		{{"minimum", "0"}},
		{{"minimum", "-7"}, {"maximum", "7"}},
		{{"minimum", "-120"}, {"maximum", "-15"}},
		{{"minimum", "3"}, {"maximum", "4567"}},
		{{"minimum", "100"}, {"maximum", "199"}},
		{{"minimum", "10"}, {"maximum", "10"}},
		{{"exclusiveMinimum", "9"}, {"exclusiveMaximum", "1000"}},
		{{"minimum", "2.5"}, {"maximum", "12.5"}},
		{{"minimum", "-2.5"}, {"maximum", "-0.5"}},
		{{"maximum", "-3"}},
		{{"maximum", "350"}},
		{{"minimum", "1"}, {"exclusiveMinimum", "4"}, {"maximum", "99"}, {"exclusiveMaximum", "50"}},
	}
	for _, bounds := range cases {
		schema := `{"type":"integer"`
		lo, hi := math.Inf(-1), math.Inf(1)
		for _, b := range bounds {
			schema += `,"` + b.key + `":` + b.val
			f, err := strconv.ParseFloat(b.val, 64)
			require.NoError(t, err)
			switch b.key {
			case "minimum":
				lo = max(lo, math.Ceil(f))
			case "exclusiveMinimum":
				lo = max(lo, math.Floor(f)+1)
			case "maximum":
				hi = min(hi, math.Floor(f))
			case "exclusiveMaximum":
				hi = min(hi, math.Ceil(f)-1)
			}
		}
		schema += "}"
		g, err := FromJSONSchema([]byte(schema))
		require.NoError(t, err, schema)
		m := NewMatcher(g, v)
		for n := -5000; n <= 5000; n++ {
			s := strconv.Itoa(n)
			want := float64(n) >= lo && float64(n) <= hi
			require.Equal(t, want, matches(m, s), "%s on %s", schema, s)
			require.False(t, matches(m, "0"+s), "%s accepts a leading zero: 0%s", schema, s)
		}
		require.False(t, matches(m, "-0"), schema)
		require.Equal(t, hi >= 1e15, matches(m, "1000000000000000"), "%s on 10^15", schema)
	}
}

// TestSchemaNumberRanges checks bounded numbers against exact comparison: every decimal of a
// grid around each bound, for bounds inclusive and exclusive, integral and fractional, negative
// and positive, open on either side.
func TestSchemaNumberRanges(t *testing.T) {
	v := byteVocab(t)
	bounds := []string{"", "0", "-0", "1", "-1", "2.5", "-2.5", "0.05", "-0.05", "0.1", "10", "-10", "99.99", "0.999", "1.25e1", "-7.125", "3.0", "0.0001", "1e-20", "0.12345678901234565"}
	var docs []string
	for i := -13; i <= 13; i++ {
		for _, f := range []string{"", ".0", ".00", ".05", ".049", ".051", ".1", ".09", ".125", ".124", ".126", ".25", ".5", ".4999", ".5001", ".99", ".999", ".9991", ".0001", ".00009", ".00011"} {
			s := strconv.Itoa(i) + f
			docs = append(docs, s)
			if i == 0 {
				docs = append(docs, "-"+s)
			}
		}
	}
	docs = append(docs, "99.99", "99.990", "99.991", "99.98", "100", "-100", "1e1", "01", "1.", ".5", "-", "--1", "0.1234567890123456", "0.12345678901234567")
	rat := func(s string) *big.Rat {
		r, ok := new(big.Rat).SetString(s)
		require.True(t, ok, s)
		return r
	}
	numeral := regexp.MustCompile(`^-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?$`)
	for _, lo := range bounds {
		for _, hi := range bounds {
			if lo == "" && hi == "" {
				continue // the number primitive, exponents and all
			}
			for _, ex := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				schema := `{"type":"number"`
				if lo != "" {
					schema += map[bool]string{false: `,"minimum":`, true: `,"exclusiveMinimum":`}[ex[0]] + lo
				}
				if hi != "" {
					schema += map[bool]string{false: `,"maximum":`, true: `,"exclusiveMaximum":`}[ex[1]] + hi
				}
				schema += "}"
				in := func(s string) bool {
					if !numeral.MatchString(s) {
						return false
					}
					x := rat(s)
					if lo != "" && (x.Cmp(rat(lo)) < 0 || ex[0] && x.Cmp(rat(lo)) == 0) {
						return false
					}
					return !(hi != "" && (x.Cmp(rat(hi)) > 0 || ex[1] && x.Cmp(rat(hi)) == 0))
				}
				g, err := FromJSONSchema([]byte(schema))
				if err != nil {
					require.ErrorContains(t, err, "matches no value", schema)
					for _, d := range docs {
						require.False(t, in(d), "%s refused but %s is in range", schema, d)
					}
					continue
				}
				m := NewMatcher(g, v)
				for _, d := range docs {
					want, got := in(d), matches(m, d)
					if strings.HasPrefix(d, "-0") && !strings.ContainsAny(d[2:], "123456789") {
						// -0, -0.0: the value zero, which a bounded number never writes so.
						require.False(t, got && !in(d), "%s accepts %s", schema, d)
						continue
					}
					require.Equal(t, want, got, "%s on %s", schema, d)
				}
			}
		}
	}
}

// TestFormatLengths checks the length bounds kept with each format against its rule: the least
// and most code points of its strings, found by walking the rule's automaton.
func TestFormatLengths(t *testing.T) {
	v := byteVocab(t)
	for name, sf := range stringFormats {
		g, err := Parse("root ::= " + sf.rule)
		require.NoError(t, err, name)
		m := NewMatcher(g, v)
		type span struct{ lo, hi int }
		memo := map[State]span{}
		var walk func(s State) span
		walk = func(s State) span {
			if r, ok := memo[s]; ok {
				return r
			}
			r := span{lo: math.MaxInt, hi: -1}
			if m.Complete(s) {
				r = span{0, 0}
			}
			for b := range 256 {
				n := m.AcceptBytes(s, []byte{byte(b)})
				if m.Dead(n) {
					continue
				}
				sub := walk(n)
				step := 1
				if b >= 0x80 && b < 0xC0 {
					step = 0 // a continuation byte: the same code point
				}
				r.lo, r.hi = min(r.lo, sub.lo+step), max(r.hi, sub.hi+step)
			}
			memo[s] = r
			return r
		}
		got := walk(m.Start())
		assert.Equal(t, sf.min, got.lo, "%s: least code points", name)
		assert.Equal(t, sf.max, got.hi, "%s: most code points", name)
		t.Logf("%-22s %d to %d code points (kept as %d to %d)", name, got.lo, got.hi, sf.min, sf.max)
	}
}

// TestSchemaPatterns checks pattern grammars against Go's regexp on random strings of a small
// alphabet, each spelled plainly and with every character escaped: a string the grammar accepts
// must match (with ECMA-262's meaning of . and \s written out for Go), and the plain spelling of
// a string that matches and needs no escape must be accepted.
func TestSchemaPatterns(t *testing.T) {
	v := byteVocab(t)
	const dot, sp = `[^\n\r\x{2028}\x{2029}]`, "\\t\\n\\x0B\\f\\r \\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}"
	// Each ECMA-262 pattern and the same language in Go's syntax.
	patterns := [][2]string{{"^a+$", "^a+$"}, {"a", "a"}, {"^ab|cd$", "^ab|cd$"}, {"^(ab|cd)*$", "^(ab|cd)*$"}, {"^[a-c]{1,3}$", "^[a-c]{1,3}$"},
		{"^.$", "^" + dot + "$"}, {"^.*$", "^" + dot + "*$"}, {"^\\s+$", "^[" + sp + "]+$"}, {"^\\S\\d$", "^[^" + sp + "]\\d$"},
		{"^[^a]*b$", "^[^a]*b$"}, {"^\\u00e9+$", "^é+$"}, {"^\\u{1F600}?x$", "^😀?x$"}, {"^[\\u0020-\\u007e]*$", "^[ -~]*$"},
		{"^(?:a|b)+?c$", "^(?:a|b)+c$"}, {"^a{2,}$", "^a{2,}$"}, {"x$", "x$"}, {"^\\x41\\t$", "^A\\t$"}, {"^[\\s\\d]+$", "^[" + sp + "0-9]+$"},
		{"^\\\\\"$", "^\\\\\"$"}, {"^[-a]$", "^[-a]$"}, {"^a?b?$", "^a?b?$"}, {"", ""}, {"^$", "^$"}, {"^[\\w.]+@[\\w]+$", "^[\\w.]+@\\w+$"},
		{"(ab)+", "(ab)+"}, {"^[^\\d\\s]$", "^[^0-9" + sp + "]$"}, {"^\\.\\*$", "^\\.\\*$"}, {"^ \\/$", "^ /$"}}
	alphabet := []string{"a", "b", "c", "d", "x", "A", "1", "2", " ", "\t", "\n", "\r", "\u2028", "\u00a0", "é", "😀", "\"", "\\", ".", "*", "/", "@", "-", "~"}
	rng := rand.New(rand.NewPCG(3, 4))
	type variant struct {
		pair   [2]string
		lo, hi int
	}
	var variants []variant
	for _, pair := range patterns {
		variants = append(variants, variant{pair, 0, -1}, variant{pair, 2, 3}, variant{pair, 0, 2}, variant{pair, 3, -1})
	}
	for _, vt := range variants {
		p := vt.pair[0]
		sch := map[string]any{"type": "string", "pattern": p}
		if vt.lo > 0 {
			sch["minLength"] = vt.lo
		}
		if vt.hi >= 0 {
			sch["maxLength"] = vt.hi
		}
		schema, err := json.Marshal(sch)
		require.NoError(t, err)
		g, err := FromJSONSchema(schema)
		if err != nil && strings.Contains(err.Error(), "matches no value") {
			continue
		}
		require.NoError(t, err, "%s", schema)
		pat := regexp.MustCompile(vt.pair[1])
		re := struct{ MatchString func(string) bool }{func(s string) bool {
			n := utf8.RuneCountInString(s)
			return pat.MatchString(s) && n >= vt.lo && (vt.hi < 0 || n <= vt.hi)
		}}
		m := NewMatcher(g, v)
		for range 1500 {
			var b strings.Builder
			for range rng.IntN(5) {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			s := b.String()
			for _, q := range []func(string) string{jsonQuote, quoteAll, quoteHTML} {
				if matches(m, q(s)) {
					require.True(t, re.MatchString(s), "%s accepts %s, which does not match %s", schema, q(s), pat)
				}
			}
			if re.MatchString(s) && !strings.ContainsAny(s, "\"\\\t\n\r") {
				assert.True(t, matches(m, jsonQuote(s)), "%s rejects %q", schema, s)
			}
		}
	}
}

// TestSchemaMultipleOf checks multipleOf against arithmetic: integer divisors on every integer of
// a window, and decimal steps (at most so many fractional digits) with bounds on a grid.
func TestSchemaMultipleOf(t *testing.T) {
	v := byteVocab(t)
	for _, k := range []int{2, 3, 7, 12, 100} {
		g, err := FromJSONSchema([]byte(`{"type":"integer","multipleOf":` + strconv.Itoa(k) + `}`))
		require.NoError(t, err)
		m := NewMatcher(g, v)
		for n := -2000; n <= 2000; n++ {
			require.Equal(t, n%k == 0, matches(m, strconv.Itoa(n)), "multipleOf %d on %d", k, n)
		}
	}
	for _, schema := range []string{`{"type":"number","multipleOf":0.01,"minimum":-1.25,"exclusiveMaximum":2.5}`, `{"type":"number","multipleOf":0.1,"exclusiveMinimum":0.05}`,
		`{"multipleOf":1,"minimum":0.5,"maximum":3.5}`, `{"type":"number","multipleOf":0.001,"maximum":-0.0005}`} {
		g, err := FromJSONSchema([]byte(schema))
		require.NoError(t, err, schema)
		m := NewMatcher(g, v)
		var s struct{ MultipleOf, Minimum, Maximum, ExclusiveMinimum, ExclusiveMaximum *float64 }
		require.NoError(t, json.Unmarshal([]byte(schema), &s))
		step, _ := new(big.Rat).SetString(strconv.FormatFloat(*s.MultipleOf, 'f', -1, 64))
		valid := func(d *big.Rat) bool {
			want := new(big.Rat).Quo(d, step).IsInt()
			for bound, ok := range map[*float64]func(c int) bool{s.Minimum: func(c int) bool { return c >= 0 }, s.Maximum: func(c int) bool { return c <= 0 },
				s.ExclusiveMinimum: func(c int) bool { return c > 0 }, s.ExclusiveMaximum: func(c int) bool { return c < 0 }} {
				if bound != nil {
					b, _ := new(big.Rat).SetString(strconv.FormatFloat(*bound, 'f', -1, 64))
					want = want && ok(d.Cmp(b))
				}
			}
			return want
		}
		for i := -3000; i <= 3000; i++ {
			d := new(big.Rat).SetFrac64(int64(i), 1000)
			text := d.FloatString(3)
			want := valid(d)
			for _, spelled := range []string{text, strings.TrimRight(strings.TrimRight(text, "0"), "."), d.FloatString(1), d.FloatString(4)} {
				if matches(m, spelled) {
					r, _ := new(big.Rat).SetString(spelled)
					require.True(t, valid(r), "%s accepts %s", schema, spelled)
				}
			}
			if want {
				short := strings.TrimRight(strings.TrimRight(text, "0"), ".")
				if short == "-0" {
					short = "0"
				}
				require.True(t, matches(m, short), "%s rejects %s", schema, short)
			}
		}
	}
}

// TestErrorsQuoteShort: an error quotes a short prefix of a long input (a
// refused pattern, an undefined rule's name), with the input's length.
func TestErrorsQuoteShort(t *testing.T) {
	long := strings.Repeat("a", 200000)
	_, err := FromJSONSchema([]byte(`{"type": "string", "pattern": "` + long + `\\b"}`))
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 300)
	assert.Contains(t, err.Error(), "(200002 bytes)")

	_, err = Parse("root ::= " + long)
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 300)
	assert.Contains(t, err.Error(), "undefined rule")
	assert.Contains(t, err.Error(), "(200000 bytes)")
}

// contentMediaType and contentEncoding follow the document's $schema: under
// draft 7, whose optional suite asserts them, they are refused (naming the
// keyword and its path); under 2019-09, 2020-12 or without $schema they
// are annotations, and the grammar is that of the other keywords.
func TestContentKeywordsFollowTheDraft(t *testing.T) {
	for _, id := range []string{"", "https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2019-09/schema"} {
		head := ""
		if id != "" {
			head = `"$schema":"` + id + `",`
		}
		g, err := FromJSONSchema([]byte(`{` + head + `"type":"object","properties":{"p":{"type":"string","contentMediaType":"application/json","contentEncoding":"base64"}},"required":["p"]}`))
		require.NoError(t, err, id)
		m := NewMatcher(g, byteVocabulary())
		st := m.AcceptBytes(m.Start(), []byte(`{"p":"%not base64{:}"}`))
		assert.True(t, !m.Dead(st) && m.Complete(st), "%s: an annotation accepts any string", id)
	}
	for _, id := range []string{"http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-07/schema"} {
		for _, kw := range []string{"contentMediaType", "contentEncoding"} {
			_, err := FromJSONSchema([]byte(`{"$schema":"` + id + `","properties":{"p":{"type":"string","` + kw + `":"x"}}}`))
			var se *SchemaError
			require.ErrorAs(t, err, &se, "%s %s", id, kw)
			assert.Equal(t, "/properties/p", se.Path)
			assert.Equal(t, kw, se.Keyword)
			assert.Contains(t, err.Error(), "is an assertion under draft 7")
		}
	}
}

// oneOf branches told apart by one required property's const values, or by
// their enums, are proven disjoint in one pass, however many; others are
// compared pairwise, and refused past maxPairwiseBranches.
func TestOneOfManyBranches(t *testing.T) {
	branches := func(n int, branch string) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, branch, i)
		}
		return `{"oneOf":[` + b.String() + `]}`
	}
	tagged := branches(2000, `{"type":"object","properties":{"name":{"const":"f%d"}},"required":["name"],"additionalProperties":false}`)
	g, err := FromJSONSchema([]byte(tagged))
	require.NoError(t, err)
	m := NewMatcher(g, byteVocabulary())
	st := m.AcceptBytes(m.Start(), []byte(`{"name":"f1999"}`))
	assert.True(t, !m.Dead(st) && m.Complete(st))
	_, err = FromJSONSchema([]byte(branches(2000, `{"enum":["a%d","b%[1]d"]}`)))
	require.NoError(t, err)
	// not required: no tag, and more branches than are compared pairwise
	_, err = FromJSONSchema([]byte(branches(maxPairwiseBranches+1, `{"type":"object","properties":{"name":{"const":"f%d"}}}`)))
	var se *SchemaError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "oneOf", se.Keyword)
	assert.Contains(t, se.Reason, "257 branches are too many to compare pairwise")
	// a shared tag value: the first pair that shares it
	_, err = FromJSONSchema([]byte(`{"oneOf":[{"type":"object","properties":{"k":{"const":1}},"required":["k"]},` +
		`{"type":"object","properties":{"k":{"const":2}},"required":["k"]},{"type":"object","properties":{"k":{"enum":[3,1]}},"required":["k"]}]}`))
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.Reason, "branches 0 and 2 are not provably disjoint")
}
