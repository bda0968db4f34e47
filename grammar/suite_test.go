package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// debugSuite (JSON_SCHEMA_SUITE_DEBUG=1) logs every refusal and every valid instance rejected.
var debugSuite = os.Getenv("JSON_SCHEMA_SUITE_DEBUG") == "1"

// suiteDir holds the vendored cases of JSON-Schema-Test-Suite (see its PROVENANCE file).
const suiteDir = "testdata/json-schema-test-suite"

type suiteGroup struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}

// spelling is one way of writing a JSON document.
type spelling struct {
	name    string
	pretty  bool                  // newlines and two-space indentation
	quote   func(s string) string // how strings are written
	complet bool                  // counted for completeness (the others only for soundness)
}

// quoteHTML writes a string as encoding/json does by default: <, >, & and U+2028/9 escaped.
func quoteHTML(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// quoteAll writes every character of a string but ASCII letters and digits as a \u escape,
// surrogate pairs for those past the BMP: the spelling that a grammar counting characters or
// telling keys apart by their bytes gets wrong.
func quoteAll(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') && len(s) > 3:
			b.WriteRune(r)
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

var spellings = []spelling{
	{"compact", false, jsonQuote, true},
	{"pretty", true, jsonQuote, true},
	{"html-escaped", false, quoteHTML, false},
	{"all-escaped", true, quoteAll, false},
}

// spell writes v (a decoded instance, keys in their order) in spelling sp.
func spell(v *node, sp spelling, depth int) string {
	nl := func(d int) string {
		if !sp.pretty {
			return ""
		}
		return "\n" + strings.Repeat("  ", d)
	}
	colon := ":"
	if sp.pretty {
		colon = ": "
	}
	switch v.kind {
	case 'o':
		if len(v.keys) == 0 {
			return "{}"
		}
		var parts []string
		for i, k := range v.keys {
			parts = append(parts, nl(depth+1)+sp.quote(k)+colon+spell(v.vals[i], sp, depth+1))
		}
		return "{" + strings.Join(parts, ",") + nl(depth) + "}"
	case 'a':
		if len(v.arr) == 0 {
			return "[]"
		}
		var parts []string
		for _, e := range v.arr {
			parts = append(parts, nl(depth+1)+spell(e, sp, depth+1))
		}
		return "[" + strings.Join(parts, ",") + nl(depth) + "]"
	case 's':
		return sp.quote(v.s)
	}
	return string(v.raw)
}

type suiteFigures struct {
	schemas, refused            int
	valid, validAccepted        int // compact spelling
	validPretty, prettyAccepted int
	invalid, invalidAccepted    int // any spelling
	refusalsByKeyword           map[string]int
	refusedWithValidInstances   int
}

// TestJSONSchemaTestSuite runs the vendored JSON-Schema-Test-Suite cases: every schema is
// converted or refused with an error naming its path and keyword; the grammar of every converted
// schema rejects every instance that the suite marks invalid, in each of four spellings (a hard
// failure); and the share of valid instances it accepts is logged per file.
func TestJSONSchemaTestSuite(t *testing.T) {
	var files []string
	require.NoError(t, filepath.WalkDir(suiteDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			files = append(files, path)
		}
		return err
	}))
	require.NotEmpty(t, files)
	sort.Strings(files)
	v := byteVocabulary()
	var total suiteFigures
	total.refusalsByKeyword = map[string]int{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		var groups []suiteGroup
		require.NoError(t, json.Unmarshal(data, &groups), file)
		name := strings.TrimSuffix(strings.TrimPrefix(file, suiteDir+"/"), ".json")
		var f suiteFigures
		f.refusalsByKeyword = map[string]int{}
		for _, g := range groups {
			f.schemas++
			schema := g.Schema
			if strings.HasPrefix(name, "draft7/") {
				schema = withDialect(schema, "http://json-schema.org/draft-07/schema#")
			}
			gram, err := FromJSONSchema(schema)
			if err != nil {
				f.refused++
				if debugSuite {
					t.Logf("%s: %s: refused: %v", name, g.Description, err)
				}
				var se *SchemaError
				if assert.True(t, errors.As(err, &se), "%s: %s: not a SchemaError: %v", name, g.Description, err) {
					assert.True(t, se.Keyword != "" || se.Reason == "the schema matches no value",
						"%s: %s: the refusal names no keyword: %v", name, g.Description, err)
					assert.Contains(t, err.Error(), "json schema at ", "%s: %s", name, g.Description)
					f.refusalsByKeyword[se.Keyword]++
				}
				continue
			}
			m := NewMatcher(gram, v)
			for _, tc := range g.Tests {
				inst, err := decodeOrdered(tc.Data)
				require.NoError(t, err, "%s: %s: %s", name, g.Description, tc.Description)
				if tc.Valid {
					f.valid++
					f.validPretty++
				} else {
					f.invalid++
				}
				leaked := false
				for _, sp := range spellings {
					doc := spell(inst, sp, 0)
					st := m.AcceptBytes(m.Start(), []byte(doc))
					ok := !m.Dead(st) && m.Complete(st)
					switch {
					case !tc.Valid && ok:
						leaked = true
						t.Errorf("%s: %s: %s: the grammar accepts the invalid instance %s (%s)\nschema: %s", name, g.Description, tc.Description, doc, sp.name, g.Schema)
					case tc.Valid && !ok && sp.name == "compact" && debugSuite:
						t.Logf("%s: %s: %s: valid instance rejected: %s", name, g.Description, tc.Description, doc)
					case tc.Valid && ok && sp.name == "compact":
						f.validAccepted++
					case tc.Valid && ok && sp.name == "pretty":
						f.prettyAccepted++
					}
				}
				if leaked {
					f.invalidAccepted++
				}
			}
		}
		t.Logf("%-38s schemas %3d converted %3d refused %3d | valid accepted %3d/%3d (pretty %3d/%3d) | invalid rejected %3d/%3d",
			name, f.schemas, f.schemas-f.refused, f.refused, f.validAccepted, f.valid, f.prettyAccepted, f.validPretty, f.invalid-f.invalidAccepted, f.invalid)
		total.schemas += f.schemas
		total.refused += f.refused
		total.valid += f.valid
		total.validAccepted += f.validAccepted
		total.validPretty += f.validPretty
		total.prettyAccepted += f.prettyAccepted
		total.invalid += f.invalid
		total.invalidAccepted += f.invalidAccepted
		for k, n := range f.refusalsByKeyword {
			total.refusalsByKeyword[k] += n
		}
	}
	t.Logf("TOTAL: schemas %d, converted %d, refused %d | valid instances accepted %d/%d (pretty %d/%d) | invalid instances accepted %d of %d",
		total.schemas, total.schemas-total.refused, total.refused, total.validAccepted, total.valid, total.prettyAccepted, total.validPretty, total.invalidAccepted, total.invalid)
	var kws []string
	for k, n := range total.refusalsByKeyword {
		kws = append(kws, fmt.Sprintf("%s %d", cmpOr(k, "(none)"), n))
	}
	sort.Strings(kws)
	t.Logf("refusals by keyword: %s", strings.Join(kws, ", "))
	assert.Zero(t, total.invalidAccepted, "invalid instances accepted by a converted grammar")
}

// withDialect gives an object schema without $schema the one of its directory's draft: the
// suite's files leave it to the reader, and draft 7 asserts what 2020-12 annotates.
func withDialect(schema json.RawMessage, id string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(schema, &obj) != nil || obj["$schema"] != nil {
		return schema
	}
	rest := strings.TrimPrefix(strings.TrimSpace(string(schema)), "{")
	if strings.TrimSpace(rest) != "}" {
		rest = "," + rest
	}
	return json.RawMessage(`{"$schema":` + quoteHTML(id) + rest)
}

func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
