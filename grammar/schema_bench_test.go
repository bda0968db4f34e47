package grammar

import (
	"math/rand/v2"
	"testing"
)

// benchSchemaDoc is internal/testkit/nativesampler's benchmark schema (an object with a nested object,
// an array and a pattern) and a document of it.
const (
	benchSchemaText = `{"type": "object", "properties": {
	"name": {"type": "string"},
	"age": {"type": "integer"},
	"email": {"type": "string"},
	"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
	"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["city"]},
	"active": {"type": "boolean"}
}, "required": ["name", "age", "address"]}`
	benchSchemaDoc = `{"name": "Ada Lovelace", "age": 36, "address": {"city": "London", "street": "St James's Square", "zip": "12345"}, "email": "ada@example.org", "tags": ["math", "engines"], "active": true}`
)

// benchVocab is a synthetic vocabulary of n tokens: every byte, then random pieces of JSON
// fragments, words with and without a leading space, digits and multi-byte characters.
func benchVocab(b *testing.B, n int) *Vocabulary {
	rng := rand.New(rand.NewPCG(7, 8))
	frags := []string{`{"`, `":`, `", "`, `"}`, `"]`, `},`, `[`, `"`, ` "`, ",", ":", " ", "\n", "  ", "true", "false", "null",
		"name", "age", "city", "zip", "street", "tags", "email", "active", "address", "the", "an", "ing", "er", "é", "😀", "中", "\\n", "\\\"", "\\u00"}
	letters := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_@'"
	seen := map[string]bool{}
	var toks [][]byte
	for c := range 256 {
		toks = append(toks, []byte{byte(c)})
		seen[string(rune(c))] = true
	}
	for len(toks) < n-1 {
		var s []byte
		switch rng.IntN(3) {
		case 0:
			s = append(s, frags[rng.IntN(len(frags))]...)
			s = append(s, frags[rng.IntN(len(frags))]...)
		default:
			if rng.IntN(2) == 0 {
				s = append(s, ' ')
			}
			for range 1 + rng.IntN(8) {
				s = append(s, letters[rng.IntN(len(letters))])
			}
		}
		if !seen[string(s)] {
			seen[string(s)] = true
			toks = append(toks, s)
		}
	}
	toks = append(toks, nil)
	v, err := NewVocabulary(toks, []int32{int32(len(toks) - 1)})
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// BenchmarkSchemaMasks times the masking of one row per byte of a document under the grammar of
// its schema, over a synthetic vocabulary of 32000 tokens: warm (the matcher has met every state)
// and cold (a fresh matcher, which computes every mask). The figure is per masked row.
func BenchmarkSchemaMasks(b *testing.B) {
	v := benchVocab(b, 32000)
	b.Run("bench-schema", func(b *testing.B) { benchSchemaMasks(b, v, benchSchemaText, benchSchemaDoc) })
	// The keywords that the converter now enforces: code-point lengths, keys other than the
	// declared ones, an enum, a bounded decimal and a date.
	b.Run("strict-schema", func(b *testing.B) { benchSchemaMasks(b, v, strictSchemaText, strictSchemaDoc) })
}

const (
	strictSchemaText = `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":40},"role":{"enum":["admin","user"]},
		"score":{"type":"number","minimum":0,"maximum":1},"born":{"type":"string","format":"date"}},
		"required":["name","role"],"additionalProperties":{"type":"string","maxLength":20}}`
	strictSchemaDoc = `{"name": "Ada Lovelace", "role": "admin", "score": 0.875, "born": "1815-12-10", "city": "London", "street": "St James's Square"}`
)

func benchSchemaMasks(b *testing.B, v *Vocabulary, schema, doc string) {
	g, err := FromJSONSchema([]byte(schema))
	if err != nil {
		b.Fatal(err)
	}
	row := make([]float32, v.Size())
	run := func(m *Matcher) {
		s := m.Start()
		for i := range len(doc) {
			m.Apply(s, row)
			s = m.AcceptBytes(s, []byte{doc[i]})
		}
		if !m.Complete(s) {
			b.Fatal("the document is not a sentence of the grammar")
		}
	}
	benchSchemaDoc := doc
	b.Run("warm", func(b *testing.B) {
		m := NewMatcher(g, v)
		run(m)
		b.ResetTimer()
		for b.Loop() {
			run(m)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(benchSchemaDoc))/1000, "µs/row")
	})
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			run(NewMatcher(g, v))
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(benchSchemaDoc))/1000, "µs/row")
	})
}
