package grammar

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParse feeds arbitrary text to the parser: it returns a grammar or a *SyntaxError whose
// position lies in the text, never panics, and a grammar it returns can be matched.
func FuzzParse(f *testing.F) {
	for _, s := range []string{JSONGrammarText, `root ::= "a" [b-d]* "e"`, `root ::= ("ab" | "c"){2,3} "!"?`, "root ::= [^\\x00-\\x1F]+ # c\n",
		`root ::= x{0,3}` + "\nx ::= \"\\u00e9\" | .", `root ::= "(" root ")" | ""`, `root ::= a` + "\na ::= a", `root ::= "a" <[98]> (!<[99]> | "c")* <[256]>`} {
		f.Add(s)
	}
	v := byteVocab(f)
	f.Fuzz(func(t *testing.T, src string) {
		g, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			require.True(t, errors.As(err, &se), "%v", err)
			require.True(t, se.Offset >= 0 && se.Offset <= len(src), "%v", err)
			return
		}
		if len(g.elems) > 1<<14 {
			return // matching a huge grammar is not what this fuzzes
		}
		m := NewMatcher(g, v)
		s := m.Start()
		for i := 0; i < len(src) && !m.Dead(s) && i < 64; i++ {
			m.Allowed(nil, s)
			s = m.Accept(s, int32(src[i]))
		}
	})
}

// FuzzSchema feeds arbitrary text to the JSON Schema converter: a schema is converted to a grammar
// that parses, or refused with an error; it never panics.
func FuzzSchema(f *testing.F) {
	for _, s := range []string{personSchema, `{"anyOf":[{"type":"string","pattern":"^a(b|c)+$"},{"type":"null"}]}`, `{"$ref":"#"}`,
		`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":true}`, `true`, `{"enum":[1,"x",null]}`,
		`{"type":"integer","minimum":-12,"exclusiveMaximum":3400}`, `{"prefixItems":[{"type":"string"}],"items":{"type":"integer","maximum":0},"maxItems":4}`,
		`{"allOf":[{"properties":{"a":{}}},{"properties":{"b":{}},"required":["b"]}]}`,
		`{"oneOf":[{"type":"object","properties":{"k":{"const":1}},"required":["k"]},{"type":"object","properties":{"k":{"const":2}},"required":["k"]}]}`,
		`{"type":"string","pattern":"^a\\s.[^x]{2,}$","maxLength":9}`, `{"minItems":1,"required":["a"],"minimum":0.5,"enum":[1,"x",[],{"a":1}]}`,
		`{"$defs":{"n":{"properties":{"c":{"allOf":[{"$ref":"#/$defs/n"},{"required":["v"]}]}}}},"$ref":"#/$defs/n","format":"date"}`,
		`{"type":"number","exclusiveMinimum":-0.25,"maximum":1e3}`, `{"type":"string","format":"email","minLength":4}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, schema string) {
		src, err := SchemaToGBNF([]byte(schema))
		if err != nil {
			return
		}
		_, err = Parse(src)
		require.NoError(t, err, "schema %s gave\n%s", schema, src)
	})
}
