package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// result runs llamagen with --json output and returns its one result object.
func result(t *testing.T, args ...string) map[string]any {
	t.Helper()
	res := run(t, "", append(args, "--json", "--quiet")...)
	require.Equal(t, 0, res.Code, res.Stderr)
	results := ofType(jsonLines(t, res.Stdout), "result")
	require.Len(t, results, 1)
	return results[0]
}

// The tiny random model writes nonsense; under a grammar every output is a sentence.
func TestGrammarConstrainsOutput(t *testing.T) {
	g := writeFile(t, "answers.gbnf", `root ::= answer ("," " "? answer){0,3} "."
answer ::= "yes" | "no" | [0-9]{1,2}   # a short list`)
	re := regexp.MustCompile(`^(yes|no|[0-9]{1,2})(, ?(yes|no|[0-9]{1,2})){0,3}\.$`)
	for _, seed := range []string{"1", "2", "3"} {
		r := result(t, "-m", tinyModel, "-p", "Hello", "--grammar", g, "--max-new-tokens", "64", "--do-sample", "--temperature", "1.5", "--seed", seed)
		assert.Equal(t, "eos", r["finish"], "seed %s", seed)
		assert.Regexp(t, re, r["text"], "seed %s", seed)
	}
	// Greedy and Mirostat too.
	r := result(t, "-m", tinyModel, "-p", "Hello", "--grammar", g, "--max-new-tokens", "64")
	assert.Regexp(t, re, r["text"])
	r = result(t, "-m", tinyModel, "-p", "Hello", "--grammar", g, "--max-new-tokens", "64", "--mirostat", "2", "--seed", "4")
	assert.Regexp(t, re, r["text"])
}

func TestJSONSchemaConstrainsOutput(t *testing.T) {
	schema := writeFile(t, "schema.json", `{"type":"object","properties":{
		"name":{"type":"string","maxLength":5},
		"n":{"type":"integer"},
		"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2}},
		"required":["name","n"],"additionalProperties":false}`)
	for _, seed := range []string{"1", "2", "3", "4"} {
		r := result(t, "-m", tinyModel, "-p", "Hello", "--json-schema", schema, "--max-new-tokens", "200", "--do-sample", "--seed", seed)
		require.Equal(t, "eos", r["finish"], "seed %s", seed)
		var v struct {
			Name *string        `json:"name"`
			N    *json.Number   `json:"n"`
			Tags []string       `json:"tags"`
			Rest map[string]any `json:"-"`
		}
		text := r["text"].(string)
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&v), "seed %s: %q", seed, text)
		require.NotNil(t, v.Name)
		require.NotNil(t, v.N)
		assert.LessOrEqual(t, len([]rune(*v.Name)), 5)
		_, err := v.N.Int64()
		assert.NoError(t, err)
		assert.LessOrEqual(t, len(v.Tags), 2)
		for _, tag := range v.Tags {
			assert.Contains(t, []string{"a", "b"}, tag)
		}
	}
}

func TestAnyJSONAndBeamSearch(t *testing.T) {
	r := result(t, "-m", tinyModel, "-p", "Hello", "--any-json", "--max-new-tokens", "100", "--do-sample", "--seed", "7")
	if r["finish"] == "eos" {
		assert.True(t, json.Valid([]byte(r["text"].(string))), "%q", r["text"])
	}
	g := writeFile(t, "yn.gbnf", `root ::= ("yes" | "no") "!"`)
	res := run(t, "", "-m", tinyModel, "-p", "Hello", "--grammar", g, "--num-beams", "3", "--num-return-sequences", "2", "--max-new-tokens", "20", "--json", "--quiet")
	require.Equal(t, 0, res.Code, res.Stderr)
	results := ofType(jsonLines(t, res.Stdout), "result")
	require.Len(t, results, 2)
	for _, r := range results {
		assert.Equal(t, "eos", r["finish"])
		assert.Contains(t, []any{"yes!", "no!"}, r["text"])
	}
}

func TestGrammarErrors(t *testing.T) {
	bad := writeFile(t, "bad.gbnf", "root ::= \"a\"\nitem ::= [a-")
	res := run(t, "", "-m", tinyModel, "-p", "x", "--grammar", bad)
	assert.NotEqual(t, 0, res.Code)
	assert.Contains(t, res.Stderr, "bad.gbnf: grammar: line 2, column 10: unterminated character class")
	schema := writeFile(t, "s.json", `{"type":"integer","not":{"const":2}}`)
	res = run(t, "", "-m", tinyModel, "-p", "x", "--json-schema", schema)
	assert.NotEqual(t, 0, res.Code)
	assert.Contains(t, res.Stderr, `json schema at /: keyword "not" is not supported`)
	res = run(t, "", "-m", tinyModel, "-p", "x", "--any-json", "--grammar", bad)
	assert.Equal(t, 2, res.Code)
	assert.Contains(t, res.Stderr, "--grammar, --json-schema and --any-json exclude each other")
}

// TestAmbiguousGrammarRuns runs the 47-byte grammar of issue 26, whose
// stacks double with every "a" (it exhausted memory after 22 tokens), with
// "a" favoured: 300 tokens of it finish at the length limit, and the text is
// a sentence prefix of its language (a run of "a" and nothing else).
func TestAmbiguousGrammarRuns(t *testing.T) {
	g := writeFile(t, "ambiguous.gbnf", "root ::= x\nx ::= \"a\" x \"b\"? | \"a\" x \"c\"? | \"a\"\n")
	a, ok := testmodel.TinyVocab(true).ID("a")
	require.True(t, ok)
	res := run(t, "", "-m", tinyModel, "-p", "Hello", "--grammar", g, "--max-new-tokens", "300",
		"--sequence-bias", fmt.Sprintf("[[[%d],50.0]]", a), "--json", "--quiet")
	require.Equal(t, 0, res.Code, res.Stderr)
	results := ofType(jsonLines(t, res.Stdout), "result")
	require.Len(t, results, 1)
	r := results[0]
	assert.Equal(t, "length", r["finish"])
	assert.Equal(t, strings.Repeat("a", 300), r["text"])
	// Memory, not time: stacks doubling per "a" would need 2^300 of them.
	if res.MaxRSSKiB > 0 {
		assert.Less(t, res.MaxRSSKiB, int64(1<<20), "peak memory in KiB")
	}
	t.Logf("peak memory %d KiB", res.MaxRSSKiB)
}
