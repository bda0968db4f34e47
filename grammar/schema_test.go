package grammar

import (
	"errors"
	"testing"

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
		{`true`, []string{`1`, `"s"`, `[{}]`}, []string{`x`}},
	}
	for _, c := range cases {
		g, err := FromJSONSchema([]byte(c.schema))
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
	cases := []struct{ schema, path, reason string }{
		{`{"type":"integer","minimum":3}`, "/", `keyword "minimum" is not supported (the grammar cannot express it)`},
		{`{"properties":{"a":{"allOf":[]}}}`, "/properties/a", `keyword "allOf" is not supported (the grammar cannot express it)`},
		{`{"type":"strin"}`, "/type", `unknown type "strin"`},
		{`{"typo":1}`, "/", `unknown keyword "typo"`},
		{`{"$ref":"http://x/y"}`, "/$ref", `$ref "http://x/y": only local references to #, #/$defs/NAME and #/definitions/NAME are supported, and the target must exist`},
		{`{"type":"object","properties":{"a":{}},"required":["b"]}`, "/required", `required property "b" is not in properties`},
		{`{"type":"string","pattern":"a+"}`, "/pattern", `pattern "a+" must start with ^ and end with $ (as llama.cpp requires)`},
		{`{"type":"array","minItems":3,"maxItems":2}`, "/", `maxItems 2 below minItems 3`},
		{`{"enum":[]}`, "/enum", `enum must be a non-empty array`},
		{`false`, "/", `the schema false matches no value`},
		{`{"items":[{}]}`, "/items", `items as an array (tuples) is not supported`},
	}
	for _, c := range cases {
		_, err := FromJSONSchema([]byte(c.schema))
		var se *SchemaError
		require.True(t, errors.As(err, &se), "%s: %v", c.schema, err)
		assert.Equal(t, c.path, se.Error()[len("json schema at "):len("json schema at ")+len(c.path)], c.schema)
		assert.Equal(t, c.reason, se.Reason, c.schema)
	}
	_, err := FromJSONSchema([]byte(`{"type":`))
	assert.ErrorContains(t, err, "json schema at /: not JSON")
}

func TestSchemaSelfReference(t *testing.T) {
	_, err := FromJSONSchema([]byte(`{"$ref":"#"}`))
	assert.EqualError(t, err, `json schema at /: the schema cannot be matched: grammar: line 1, column 1: left recursion: rule "ref-1" can reach itself without consuming input`)
}
