package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// realSchemas are schemas of the kinds that real callers send (OpenAI strict mode, Pydantic and
// zod exports) and of the kinds issue 27 found leaking.
var realSchemas = []string{
	// OpenAI strict mode: every property required, no other keys, anyOf of objects, $defs and a
	// recursive $ref, enum, nullable types.
	`{"type":"object","properties":{
		"name":{"type":"string"},
		"nick":{"type":["string","null"]},
		"role":{"type":"string","enum":["admin","user","R&D <lab>"]},
		"item":{"anyOf":[
			{"type":"object","properties":{"kind":{"type":"string","const":"a"},"x":{"type":"number"}},"required":["kind","x"],"additionalProperties":false},
			{"$ref":"#/$defs/node"}]},
		"tree":{"$ref":"#/$defs/node"}},
	 "required":["name","nick","role","item","tree"],"additionalProperties":false,
	 "$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},
		"required":["value","children"],"additionalProperties":false}}}`,
	// Pydantic: annotated $ref in allOf, Optional as anyOf with null, defaults, titles,
	// constrained types.
	`{"$defs":{"Address":{"properties":{"city":{"title":"City","type":"string","minLength":1,"maxLength":8},"zip":{"title":"Zip","type":"string","pattern":"^[0-9]{5}$"}},
		"required":["city","zip"],"title":"Address","type":"object"}},
	  "properties":{"id":{"title":"Id","type":"integer","minimum":1,"maximum":9999},
		"score":{"title":"Score","type":"number","exclusiveMinimum":0,"maximum":1},
		"address":{"allOf":[{"$ref":"#/$defs/Address"}],"description":"where"},
		"email":{"anyOf":[{"type":"string","format":"email"},{"type":"null"}],"default":null,"title":"Email"},
		"born":{"type":"string","format":"date"},
		"seen":{"type":"string","format":"date-time"},
		"token":{"type":"string","format":"uuid"},
		"site":{"format":"uri","maxLength":2083,"minLength":1,"type":"string"},
		"kind":{"enum":["a","b"],"title":"Kind","type":"string"}},
	  "required":["id","address","born"],"title":"User","type":"object"}`,
	// Pydantic: a discriminated union (OpenAPI's discriminator is an annotation; the const
	// tags make the oneOf provably disjoint).
	`{"$defs":{"Cat":{"properties":{"pet_type":{"const":"cat","title":"Pet Type","type":"string"},"meows":{"type":"integer","minimum":0}},"required":["pet_type","meows"],"title":"Cat","type":"object"},
		"Dog":{"properties":{"pet_type":{"const":"dog","title":"Pet Type","type":"string"},"barks":{"type":"number"}},"required":["pet_type","barks"],"title":"Dog","type":"object"}},
	  "properties":{"pet":{"discriminator":{"mapping":{"cat":"#/$defs/Cat","dog":"#/$defs/Dog"},"propertyName":"pet_type"},"oneOf":[{"$ref":"#/$defs/Cat"},{"$ref":"#/$defs/Dog"}],"title":"Pet"}},
	  "required":["pet"],"title":"Model","type":"object"}`,
	// zod: $schema, additionalProperties false, a discriminated union.
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{
		"shape":{"oneOf":[
			{"type":"object","properties":{"type":{"type":"string","const":"circle"},"r":{"type":"number","minimum":0}},"required":["type","r"],"additionalProperties":false},
			{"type":"object","properties":{"type":{"type":"string","const":"rect"},"w":{"type":"integer"},"h":{"type":"integer"}},"required":["type","w","h"],"additionalProperties":false}]},
		"tags":{"type":"array","items":{"type":"string","maxLength":3},"minItems":1,"maxItems":3}},
	  "required":["shape"],"additionalProperties":false}`,
	// The kinds that leaked: pattern and maxLength, required without properties, typeless
	// keywords, keys that must not come back escaped, code-point lengths.
	`{"type":"object","properties":{
		"code":{"type":"string","pattern":"^[a-z]+$","maxLength":3},
		"obj":{"type":"object","required":["foo"]},
		"any":{"minItems":1,"maxLength":2,"required":["k"],"minimum":-1.5},
		"emoji":{"type":"string","minLength":2,"maxLength":2},
		"dot":{"type":"string","pattern":"^.{1,3}$"}},
	  "required":["code","obj","any","emoji","dot"],"additionalProperties":{"type":"boolean"}}`,
	`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"},"required":["a"]}`,
	`{"enum":["R&D","<b>",1,1.5,null,{"k":[true]}],"type":["string","number","object"]}`,
	`{"allOf":[{"$ref":"#/$defs/s"},{"maxLength":4}],"$defs":{"s":{"type":"string","pattern":"^ab"}}}`,
	`{"type":"array","prefixItems":[{"type":"integer","exclusiveMaximum":0},{"type":"string","format":"time"}],"items":{"type":"boolean"},"maxItems":4}`,
}

// sample walks the grammar from its start, a byte at a time, picking uniformly among the bytes
// the matcher allows, and stops at a complete document with probability 1/8 per step (always
// past half of maxLen). false: no complete document within maxLen bytes.
func sample(m *Matcher, rng *rand.Rand, maxLen int) ([]byte, bool) {
	s := m.Start()
	var out []byte
	var allowed []int32
	for len(out) < maxLen {
		if m.Complete(s) && (rng.IntN(8) == 0 || len(out) > maxLen/2) {
			return out, true
		}
		allowed = m.Allowed(allowed[:0], s)
		if len(allowed) == 0 {
			return out, m.Complete(s)
		}
		t := allowed[rng.IntN(len(allowed))]
		out = append(out, byte(t))
		s = m.Accept(s, t)
	}
	return out, false
}

// TestSampledDocumentsAreValid samples documents from the grammar of each schema above and of
// every JSON-Schema-Test-Suite schema that converts, and checks each against the schema with an
// independent validator (santhosh-tekuri/jsonschema, which passes the suite, formats asserted):
// none may be invalid.
func TestSampledDocumentsAreValid(t *testing.T) {
	type schemaCase struct {
		name   string
		schema []byte
		draft  *jsonschema.Draft
		n      int
	}
	var cases []schemaCase
	for i, s := range realSchemas {
		cases = append(cases, schemaCase{"real-" + string(rune('0'+i)), []byte(s), jsonschema.Draft2020, 300})
	}
	files, err := filepath.Glob(suiteDir + "/*/*.json")
	require.NoError(t, err)
	more, err := filepath.Glob(suiteDir + "/*/optional/format/*.json")
	require.NoError(t, err)
	for _, file := range append(files, more...) {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		var groups []suiteGroup
		require.NoError(t, json.Unmarshal(data, &groups))
		draft := jsonschema.Draft2020
		if strings.Contains(file, "draft7") {
			draft = jsonschema.Draft7
		}
		for _, g := range groups {
			cases = append(cases, schemaCase{file + ": " + g.Description, g.Schema, draft, 30})
		}
	}
	if testing.Short() {
		for i := range cases {
			cases[i].n = max(3, cases[i].n/10)
		}
	}
	v := byteVocabulary()
	seed := uint64(1)
	if sd := os.Getenv("SAMPLED_SEED"); sd != "" { // another run, for a longer search
		seed, _ = strconv.ParseUint(sd, 10, 64)
	}
	rng := rand.New(rand.NewPCG(27, seed))
	converted, documents, incomplete := 0, 0, 0
	for _, c := range cases {
		g, err := FromJSONSchema(c.schema)
		if err != nil {
			require.False(t, strings.HasPrefix(c.name, "real-"), "%s: %v", c.name, err)
			continue
		}
		converted++
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(c.schema)))
		require.NoError(t, err, c.name)
		comp := jsonschema.NewCompiler()
		comp.DefaultDraft(c.draft)
		comp.AssertFormat()
		require.NoError(t, comp.AddResource("schema.json", doc), c.name)
		sch, err := comp.Compile("schema.json")
		require.NoError(t, err, c.name)
		m := NewMatcher(g, v)
		for range c.n {
			out, ok := sample(m, rng, 3000)
			if !ok {
				incomplete++
				continue
			}
			documents++
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(out)))
			if !assert.NoError(t, err, "%s: not JSON: %q", c.name, out) {
				continue
			}
			if err, ok := validate(sch, inst); ok {
				assert.NoError(t, err, "%s: the grammar produced an invalid document %q\nschema: %s", c.name, out, c.schema)
			}
		}
	}
	t.Logf("%d schemas converted of %d, %d documents sampled and validated (%d walks cut at 3000 bytes)", converted, len(cases), documents, incomplete)
	assert.Greater(t, documents, 1000)
}

// validate runs the validator, which panics on a number whose exponent big.Rat cannot hold
// (1e1234567890123456 is valid JSON): false then.
func validate(sch *jsonschema.Schema, inst any) (err error, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return sch.Validate(inst), true
}

// randomSchema builds a random schema of the keywords the converter knows, nested to depth, with
// $refs to the names in defs.
func randomSchema(rng *rand.Rand, depth int, defs []string) any {
	if rng.IntN(12) == 0 {
		return rng.IntN(3) != 0
	}
	pick := func(vals ...any) any { return vals[rng.IntN(len(vals))] }
	values := []any{1, "a", nil, true, 2.5, map[string]any{"a": 1}, []any{1}, "b", 0, "R&D", -3, "x\u2028"}
	s := map[string]any{}
	types := []string{"null", "boolean", "object", "array", "string", "integer", "number"}
	if rng.IntN(2) == 0 {
		if rng.IntN(3) == 0 {
			i, j := rng.IntN(len(types)), rng.IntN(len(types)-1)
			if j >= i {
				j++
			}
			s["type"] = []any{types[i], types[j]}
		} else {
			s["type"] = pick(anySlice(types)...)
		}
	}
	sub := func() any {
		if depth <= 0 {
			return pick(true, map[string]any{"type": pick("string", "integer", "boolean")}, map[string]any{"enum": []any{1, "a"}})
		}
		return randomSchema(rng, depth-1, defs)
	}
	for range rng.IntN(4) {
		switch rng.IntN(20) {
		case 0:
			s["minLength"] = rng.IntN(4)
		case 1:
			s["maxLength"] = rng.IntN(6)
		case 2:
			s["pattern"] = pick("^a+$", "^[a-c]{1,3}$", "b", "^x", "y$", "^.$", "^(ab|cd)*$", "^\\d{2}$", "^[^a]*$", "^é.?$")
		case 3:
			s["format"] = pick("date", "uuid", "email", "ipv4", "time", "date-time", "hostname", "uri")
		case 4:
			s[pick("minimum", "exclusiveMinimum").(string)] = pick(-3, -1.5, 0, 0.25, 2)
		case 5:
			s[pick("maximum", "exclusiveMaximum").(string)] = pick(-1, 0, 0.5, 7.5, 10)
		case 6:
			s["items"] = sub()
		case 7:
			s["prefixItems"] = []any{sub(), sub()}[:1+rng.IntN(2)]
		case 8:
			s[pick("minItems", "maxItems").(string)] = rng.IntN(3)
		case 9:
			props := map[string]any{}
			for _, k := range []string{"a", "b", "\"q", "ü"}[:1+rng.IntN(4)] {
				props[k] = sub()
			}
			s["properties"] = props
		case 10:
			s["required"] = []any{"a", "b", "c"}[:1+rng.IntN(3)]
		case 11:
			s["additionalProperties"] = pick(false, true, sub())
		case 12:
			var e []any
			for range 1 + rng.IntN(4) {
				e = append(e, values[rng.IntN(len(values))])
			}
			s["enum"] = e
		case 13:
			s["const"] = values[rng.IntN(len(values))]
		case 14, 15, 16:
			kw := []string{"anyOf", "oneOf", "allOf"}[rng.IntN(3)]
			var alts []any
			for range 1 + rng.IntN(3) {
				alts = append(alts, sub())
			}
			s[kw] = alts
		case 17:
			if len(defs) > 0 {
				s["$ref"] = "#/$defs/" + defs[rng.IntN(len(defs))]
			}
		case 18:
			s["description"] = "an annotation"
		case 19:
			s["multipleOf"] = pick(2, 3, 0.5, 0.01, 1, 0.1)
		}
	}
	return s
}

// randomValue builds a random JSON value of the words and numbers that randomSchema uses.
func randomValue(rng *rand.Rand, depth int) any {
	scalars := []any{1, 0, -3, 2.5, 0.25, 7.5, 10, 11, "a", "b", "aa", "abc", "ab", "cd", "x", "y", "xy", "12", "é", "éé", "😀", "x\u2028", "R&D", "\"q",
		"2024-02-29", "2023-02-29", "12:00:00Z", "a@b.c", "1.2.3.4", "0123abcd-0000-1111-2222-abcdefABCDEF", "http://x.y/z", "", nil, true, false}
	if depth <= 0 || rng.IntN(3) == 0 {
		return scalars[rng.IntN(len(scalars))]
	}
	if rng.IntN(2) == 0 {
		var a []any
		for range rng.IntN(4) {
			a = append(a, randomValue(rng, depth-1))
		}
		return a
	}
	o := map[string]any{}
	for _, k := range []string{"a", "b", "c", "\"q", "ü", "d"} {
		if rng.IntN(2) == 0 {
			o[k] = randomValue(rng, depth-1)
		}
	}
	return o
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// TestRandomSchemasAreSound converts random schemas of the known keywords in every combination
// (intersections, oneOf, typeless keywords, recursive $refs) and checks documents sampled from
// each grammar with the independent validator: every document must be valid, and every refusal
// must name its keyword.
func TestRandomSchemasAreSound(t *testing.T) {
	seed, schemas, samples := uint64(2), 3000, 8
	if testing.Short() {
		schemas = 300
	}
	// RANDOM_SCHEMAS=N,SEED runs N other schemas, for a longer search.
	if n, sd, ok := strings.Cut(os.Getenv("RANDOM_SCHEMAS"), ","); ok {
		schemas, _ = strconv.Atoi(n)
		seed, _ = strconv.ParseUint(sd, 10, 64)
	}
	rng := rand.New(rand.NewPCG(27, seed))
	v := byteVocabulary()
	converted, refused, documents, skipped, accepted := 0, 0, 0, 0, 0
	for i := range schemas {
		defs := []string{"d0", "d1"}
		root := randomSchema(rng, 3, defs)
		obj, ok := root.(map[string]any)
		if !ok {
			obj = map[string]any{"allOf": []any{root}}
		}
		obj["$defs"] = map[string]any{"d0": randomSchema(rng, 2, defs), "d1": randomSchema(rng, 1, nil)}
		text, err := json.Marshal(obj)
		require.NoError(t, err)
		if os.Getenv("RANDOM_SCHEMA_DEBUG") != "" {
			t.Logf("schema %d: %s", i, text)
		}
		g, err := FromJSONSchema(text)
		if err != nil {
			refused++
			var se *SchemaError
			require.ErrorAs(t, err, &se, "%s", text)
			if se.Keyword == "" && se.Reason != "the schema matches no value" && !strings.Contains(se.Reason, "cannot be built") {
				t.Errorf("schema %d: a refusal without a keyword: %v\n%s", i, err, text)
			}
			continue
		}
		converted++
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(text)))
		require.NoError(t, err)
		comp := jsonschema.NewCompiler()
		comp.DefaultDraft(jsonschema.Draft2020)
		comp.AssertFormat()
		require.NoError(t, comp.AddResource("schema.json", doc))
		sch, err := comp.Compile("schema.json")
		require.NoError(t, err, "%s", text)
		m := NewMatcher(g, v)
		// Random values of the schemas' own vocabulary, in every spelling: each one the grammar
		// accepts must be valid.
		for range samples {
			val, err := json.Marshal(randomValue(rng, 3))
			require.NoError(t, err)
			inst, err := decodeOrdered(val)
			require.NoError(t, err)
			for _, sp := range spellings {
				doc := spell(inst, sp, 0)
				st := m.AcceptBytes(m.Start(), []byte(doc))
				if m.Dead(st) || !m.Complete(st) {
					continue
				}
				accepted++
				parsed, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
				require.NoError(t, err, doc)
				if err, ok := validate(sch, parsed); ok && err != nil {
					t.Errorf("schema %d: the grammar accepts the invalid document %s: %v\nschema: %s", i, doc, err, text)
				}
			}
		}
		for range samples {
			out, ok := sample(m, rng, 2000)
			if !ok {
				continue
			}
			documents++
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(out)))
			if !assert.NoError(t, err, "not JSON: %q", out) {
				continue
			}
			err, ok = validate(sch, inst)
			if !ok {
				skipped++
				continue
			}
			if err != nil {
				t.Errorf("schema %d: the grammar produced an invalid document %q: %v\nschema: %s", i, out, err, text)
			}
		}
	}
	t.Logf("%d random schemas: %d converted, %d refused; %d sampled documents validated (%d with a number the validator cannot read); %d random values accepted by a grammar and validated",
		schemas, converted, refused, documents-skipped, skipped, accepted)
}
