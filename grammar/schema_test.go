package grammar

import (
	"errors"
	"math"
	"strconv"
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
		{`{"type":"array","prefixItems":[{"type":"string"},{"type":"integer","minimum":0,"maximum":9}]}`,
			[]string{`["a",3]`, `[ "", 0 ]`}, []string{`["a"]`, `["a",10]`, `["a",3,4]`, `[3,"a"]`}},
		{`{"prefixItems":[{"const":1}],"items":{"type":"boolean"},"maxItems":3}`,
			[]string{`[1]`, `[1,true]`, `[1,true,false]`}, []string{`[1,true,false,true]`, `[1,2]`, `[]`}},
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
		{`{"type":"integer","multipleOf":3}`, "/", `keyword "multipleOf" is not supported (the grammar cannot express it)`},
		{`{"properties":{"a":{"allOf":[]}}}`, "/properties/a/allOf", `allOf must be a non-empty array`},
		{`{"type":"number","minimum":3}`, "/", `minimum and maximum are supported with type integer only, not number`},
		{`{"maximum":3}`, "/", `minimum and maximum are supported with type integer only`},
		{`{"type":"integer","minimum":3,"exclusiveMaximum":3}`, "/", `the range [3, 2] holds no integer`},
		{`{"type":"integer","exclusiveMinimum":true}`, "/exclusiveMinimum", `exclusiveMinimum must be a number (the boolean form of draft 4 is not supported)`},
		{`{"type":"integer","minimum":1e17}`, "/", `the range allows no integer of at most 16 digits`},
		{`{"allOf":[{"type":"string"},{"maxLength":3}]}`, "/allOf/0/type", `allOf merges object schemas only, not type "string"`},
		{`{"allOf":[{"properties":{"a":{}}},{"properties":{"a":{}}}]}`, "/allOf/1/properties/a", `property "a" appears in two allOf members (their intersection is not supported)`},
		{`{"allOf":[{"properties":{"a":{}},"additionalProperties":false},{}]}`, "/allOf/0", `keyword "additionalProperties" in an allOf of several schemas is not supported (only type object, properties and required merge)`},
		{`{"prefixItems":[{},{}],"maxItems":1}`, "/", `maxItems 1 is below the 2 items of prefixItems`},
		{`{"prefixItems":[{}],"items":false,"minItems":2}`, "/", `minItems 2 needs more than the 1 items of prefixItems, and no more are allowed`},
		{`{"items":{},"additionalItems":{}}`, "/additionalItems", `additionalItems needs items as an array`},
		{`{"type":"strin"}`, "/type", `unknown type "strin"`},
		{`{"typo":1}`, "/", `unknown keyword "typo"`},
		{`{"$ref":"http://x/y"}`, "/$ref", `$ref "http://x/y": only local references to #, #/$defs/NAME and #/definitions/NAME are supported, and the target must exist`},
		{`{"type":"object","properties":{"a":{}},"required":["b"]}`, "/required", `required property "b" is not in properties`},
		{`{"type":"string","pattern":"a+"}`, "/pattern", `pattern "a+" must start with ^ and end with $ (as llama.cpp requires)`},
		{`{"type":"array","minItems":3,"maxItems":2}`, "/", `maxItems 2 below minItems 3`},
		{`{"enum":[]}`, "/enum", `enum must be a non-empty array`},
		{`false`, "/", `the schema false matches no value`},
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
