package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/llamaloop/llamaloop/internal/quote"
	"math/big"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// SchemaError is a JSON Schema that FromJSONSchema cannot or will not turn into a grammar. Path
// is the JSON pointer of the offending schema ("" for the root), Keyword the keyword refused or
// in error there ("" when the schema as a whole is).
type SchemaError struct {
	Path    string
	Keyword string
	Reason  string
}

// Error returns "json schema at PATH: keyword "KEYWORD": reason" (without the colon after the
// keyword when the reason is a predicate, "is not supported ...").
func (e *SchemaError) Error() string {
	p := e.Path
	if p == "" {
		p = "/"
	}
	if e.Keyword != "" {
		if strings.HasPrefix(e.Reason, "is ") {
			return fmt.Sprintf("json schema at %s: keyword %s %s", p, quote.String(e.Keyword), e.Reason)
		}
		return fmt.Sprintf("json schema at %s: keyword %s: %s", p, quote.String(e.Keyword), e.Reason)
	}
	return fmt.Sprintf("json schema at %s: %s", p, e.Reason)
}

// SchemaToGBNF converts a JSON Schema to GBNF text. Every keyword of the schema is either
// enforced by the grammar or refused with a [SchemaError] naming its path and the keyword: a
// document the grammar accepts is valid under the schema. The grammar accepts a subset of the
// valid documents (fixed key order, canonical escapes, bounded whitespace and digits; see the
// README's grammar section for the exact list).
//
//   - type (a name or a list), enum, const (values of a listed type only, and only those that
//     satisfy the keywords beside them), true/false sub-schemas;
//   - anyOf; oneOf where its branches are provably disjoint (different types, disjoint enum or
//     const values, or a required property whose const/enum values differ), refused otherwise;
//     allOf and $ref with sibling keywords, intersected into one schema (or refused where the
//     intersection is not expressible: two patterns, two formats, two prefixItems lists);
//     local $ref to a JSON pointer in the document (#, #/$defs/NAME, ...; recursion allowed);
//   - every type-specific keyword applies to its own type only: {"minItems":1} accepts "foo";
//   - objects: properties, required (required properties first, then the optional ones, each
//     in the order of properties, as llama.cpp emits them), additionalProperties (absent or
//     false: no other keys; true or a schema: other keys, never one of the declared names,
//     written without escapes);
//   - arrays: items, prefixItems (draft 7: items as a list, additionalItems), minItems,
//     maxItems, uniqueItems false;
//   - strings: minLength, maxLength (in code points, an escaped surrogate pair being one),
//     pattern (ECMA-262 with Unicode semantics: literals, classes, groups, alternation,
//     repetition, ^ and $ at the ends, unanchored otherwise; the length keywords beside it only
//     where they fold into it), format: date, time, date-time (calendar-exact), uuid, and sound
//     subsets of the other formats JSON Schema defines (email, hostname, ipv4, ipv6, uri, ...);
//     a format name that JSON Schema does not define is an annotation;
//   - numbers and integers bounded by minimum, maximum, exclusiveMinimum and exclusiveMaximum
//     (bounded numbers written without an exponent).
//
// Annotations (title, description, default, examples, $schema, $comment, OpenAPI's
// discriminator and example, ...) are ignored; so are contentMediaType and contentEncoding,
// unless the root's $schema is draft 7's, which asserts them: they are refused there. Refused: not, if/then/else, multipleOf,
// patternProperties, propertyNames, contains, uniqueItems true, min/maxProperties,
// dependentRequired, dependentSchemas, unevaluated*, remote and $anchor $refs, $dynamicRef,
// patterns with lookarounds, backreferences, \b or \p, and unknown keywords.
func SchemaToGBNF(schema []byte) (string, error) {
	src, _, err := convertSchema(schema)
	return src, err
}

// convertSchema returns the GBNF of schema and its parsed grammar.
func convertSchema(schema []byte) (string, *Grammar, error) {
	root, err := decodeOrdered(schema)
	if err != nil {
		return "", nil, &SchemaError{Reason: "not JSON: " + err.Error()}
	}
	return convertNode(&converter{root: root, steps: new(int)}, root, "")
}

// convertNode returns the GBNF of schema s, a part of the document c.root found at path, with
// a fresh converter that shares c's root, step budget and nesting of enum checks.
func convertNode(c *converter, s *node, path string) (string, *Grammar, error) {
	c = &converter{root: c.root, rules: map[string]string{}, refs: map[string]string{}, memo: map[string]string{},
		memoUsed: map[string]bool{}, steps: c.steps, enumDepth: c.enumDepth}
	expr, err := c.visit(s, path)
	if err != nil {
		return "", nil, err
	}
	if expr == "" {
		return "", nil, fail(path, "", "the schema matches no value")
	}
	var b strings.Builder
	b.WriteString("root ::= " + expr + "\n")
	for _, name := range c.order {
		b.WriteString(name + " ::= " + c.rules[name] + "\n")
	}
	b.WriteString(jsonPrimitives)
	src := b.String()
	g, err := Parse(src)
	switch {
	case err != nil && strings.Contains(err.Error(), "left recursion"):
		return "", nil, fail(path, "$ref", "the schema cannot be matched: %v", err)
	case err != nil:
		return "", nil, fail(path, "", "the grammar of the schema cannot be built: %v", err)
	}
	return src, g, nil
}

// FromJSONSchema returns the grammar of the JSON values that satisfy schema (see [SchemaToGBNF]).
func FromJSONSchema(schema []byte) (*Grammar, error) {
	_, g, err := convertSchema(schema)
	return g, err
}

// node is a decoded JSON value that keeps the order of object keys, which fixes the order of
// the properties in the output.
type node struct {
	keys []string
	vals []*node
	arr  []*node
	s    string          // the value of a string
	raw  json.RawMessage // compact JSON of the value, strings written by jsonQuote
	kind byte            // 'o', 'a', 's', 'n', 'b', 'z' (null)
	// index finds a key of a large object (its first occurrence) without a scan of keys,
	// which made a schema of many properties cost the square of their number; built by get.
	index   map[string]int
	indexed int // the keys that index covers: an object that grew since is indexed again
}

// indexedKeys is the number of keys from which get indexes an object.
const indexedKeys = 16

var (
	trueNode  = &node{kind: 'b', raw: json.RawMessage("true")}
	falseNode = &node{kind: 'b', raw: json.RawMessage("false")}
)

func isFalse(n *node) bool { return n != nil && n.kind == 'b' && string(n.raw) == "false" }
func isTrue(n *node) bool  { return n != nil && n.kind == 'b' && string(n.raw) == "true" }

func (n *node) get(k string) *node {
	if n == nil || n.kind != 'o' {
		return nil
	}
	if len(n.keys) > indexedKeys {
		if n.index == nil || n.indexed != len(n.keys) {
			n.index, n.indexed = make(map[string]int, len(n.keys)), len(n.keys)
			for i, key := range n.keys {
				if _, dup := n.index[key]; !dup {
					n.index[key] = i
				}
			}
		}
		if i, ok := n.index[k]; ok {
			return n.vals[i]
		}
		return nil
	}
	for i, key := range n.keys {
		if key == k {
			return n.vals[i]
		}
	}
	return nil
}

// with returns a copy of object n with key k set to v (removed when v is nil).
func (n *node) with(k string, v *node) *node {
	out := &node{kind: 'o'}
	done := false
	for i, key := range n.keys {
		if key == k {
			done = true
			if v == nil {
				continue
			}
			out.keys, out.vals = append(out.keys, k), append(out.vals, v)
			continue
		}
		out.keys, out.vals = append(out.keys, key), append(out.vals, n.vals[i])
	}
	if !done && v != nil {
		out.keys, out.vals = append(out.keys, k), append(out.vals, v)
	}
	out.raw = out.encode()
	return out
}

func decodeOrdered(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := decodeNode(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("text after the schema")
	}
	return n, nil
}

func decodeNode(dec *json.Decoder, depth int) (*node, error) {
	if depth > 200 {
		return nil, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &node{}
		if t == '{' {
			n.kind = 'o'
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeNode(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, kt.(string))
				n.vals = append(n.vals, v)
			}
		} else {
			n.kind = 'a'
			for dec.More() {
				v, err := decodeNode(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.arr = append(n.arr, v)
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		n.raw = n.encode()
		return n, nil
	case string:
		return strNode(t), nil
	case json.Number:
		return &node{kind: 'n', raw: json.RawMessage(t.String())}, nil
	case bool:
		return &node{kind: 'b', raw: json.RawMessage(strconv.FormatBool(t))}, nil
	default:
		return &node{kind: 'z', raw: json.RawMessage("null")}, nil
	}
}

func strNode(s string) *node { return &node{kind: 's', s: s, raw: json.RawMessage(jsonQuote(s))} }

func arrNode(vals []*node) *node {
	n := &node{kind: 'a', arr: vals}
	n.raw = n.encode()
	return n
}

// encode writes the node as compact JSON, keys in their order.
func (n *node) encode() []byte {
	var b []byte
	switch n.kind {
	case 'o':
		b = append(b, '{')
		for i, k := range n.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(append(append(b, jsonQuote(k)...), ':'), n.vals[i].raw...)
		}
		return append(b, '}')
	case 'a':
		b = append(b, '[')
		for i, v := range n.arr {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, v.raw...)
		}
		return append(b, ']')
	}
	return n.raw
}

// canon returns a key that is equal for two values exactly when JSON Schema deems them equal:
// numbers by value, objects whatever the order of their keys.
func (n *node) canon() string {
	switch n.kind {
	case 'n':
		if r, ok := new(big.Rat).SetString(string(n.raw)); ok {
			return "n" + r.RatString()
		}
	case 'o':
		idx := make([]int, len(n.keys))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return n.keys[idx[a]] < n.keys[idx[b]] })
		var b strings.Builder
		b.WriteString("{")
		for _, i := range idx {
			b.WriteString(jsonQuote(n.keys[i]) + ":" + n.vals[i].canon() + ",")
		}
		return b.String() + "}"
	case 'a':
		var b strings.Builder
		b.WriteString("[")
		for _, v := range n.arr {
			b.WriteString(v.canon() + ",")
		}
		return b.String() + "]"
	}
	return string(n.raw)
}

// isInteger reports whether n is a number with an integral value (1.0 is one, as JSON Schema
// counts it).
func (n *node) isInteger() bool {
	if n == nil || n.kind != 'n' {
		return false
	}
	r, ok := new(big.Rat).SetString(string(n.raw))
	return ok && r.IsInt()
}

func (n *node) str() (string, bool) {
	if n == nil || n.kind != 's' {
		return "", false
	}
	return n.s, true
}

// integer returns the value of a non-negative integral number (2.0 included) that fits an int.
func (n *node) integer() (int, bool) {
	if !n.isInteger() {
		return 0, false
	}
	r, _ := new(big.Rat).SetString(string(n.raw))
	if r.Sign() < 0 || !r.Num().IsInt64() || r.Num().Int64() > 1<<30 {
		return 0, false
	}
	return int(r.Num().Int64()), true
}

// jsonQuote writes s as a JSON string the way the grammars here do: only '"', '\\', control
// characters and DEL escaped (the short escapes where JSON has them, else \u00XX), everything
// else, '&', '<', '>', U+2028 and U+2029 included, as itself. Each character has then exactly
// one spelling in the grammar, which keeps declared object keys apart from the others.
func jsonQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, u := range jsonUnits(s) {
		b.WriteString(u)
	}
	b.WriteByte('"')
	return b.String()
}

// jsonUnits splits the JSON spelling of s (without its quotes) into one unit per character.
func jsonUnits(s string) []string {
	var out []string
	for _, r := range s {
		switch {
		case r == '"':
			out = append(out, `\"`)
		case r == '\\':
			out = append(out, `\\`)
		case r == '\n':
			out = append(out, `\n`)
		case r == '\r':
			out = append(out, `\r`)
		case r == '\t':
			out = append(out, `\t`)
		case r == '\b':
			out = append(out, `\b`)
		case r == '\f':
			out = append(out, `\f`)
		case r < 0x20 || r == 0x7F:
			out = append(out, fmt.Sprintf(`\u%04x`, r))
		default:
			out = append(out, string(r))
		}
	}
	return out
}

type converter struct {
	root   *node
	rules  map[string]string // name -> expression
	byExpr map[string]string // expression -> name, for the rules that rule made
	order  []string
	refs   map[string]string // $ref -> rule name
	n      int
	// memo: the rule of each flattened schema by its JSON text; memoUsed: those referred to
	// while being built (recursion).
	memo     map[string]string
	memoUsed map[string]bool
	steps    *int // intersections built, by this conversion and its enum checks: at most maxSteps
	// enumDepth counts the enum checks (each a conversion of its own) that this one is inside.
	enumDepth int
}

// maxEnumDepth bounds the nesting of enum checks: an enum beside keywords is checked against a
// grammar of those keywords, which may hold enums of their own.
const maxEnumDepth = 4

// maxSteps bounds the intersections that one conversion builds, which distributing anyOf and
// oneOf over their siblings can multiply.
const maxSteps = 20000

// rule adds a named rule for expr (sharing an identical one) and returns its name.
func (c *converter) rule(hint, expr string) string {
	if name, ok := c.byExpr[expr]; ok {
		return name
	}
	c.n++
	name := fmt.Sprintf("%s-%d", hint, c.n)
	c.rules[name] = expr
	c.order = append(c.order, name)
	if c.byExpr == nil {
		c.byExpr = map[string]string{}
	}
	c.byExpr[expr] = name
	return name
}

var (
	annotations = []string{"title", "description", "default", "examples", "$schema", "$id", "$comment",
		"deprecated", "readOnly", "writeOnly", "$defs", "definitions", "contentEncoding", "contentMediaType",
		"contentSchema", "$anchor", "$dynamicAnchor", "$vocabulary",
		// OpenAPI's annotations
		"discriminator", "example", "externalDocs", "xml"}
	unsupported = []string{"not", "if", "then", "else", "patternProperties", "propertyNames", "contains",
		"minContains", "maxContains", "uniqueItems", "minProperties", "maxProperties", "dependentRequired",
		"dependentSchemas", "dependencies", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
		"$recursiveRef", "$recursiveAnchor", "divisibleBy", "disallow", "extends"}
	known = []string{"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "required",
		"additionalProperties", "items", "prefixItems", "additionalItems", "minItems", "maxItems", "minLength",
		"maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)

func isAnnotation(k string) bool {
	return slices.Contains(annotations, k) || strings.HasPrefix(k, "x-")
}

// isAnnotationIn reports whether key k of s constrains nothing: an annotation, or uniqueItems
// false.
func isAnnotationIn(s *node, k string) bool {
	return isAnnotation(k) || k == "uniqueItems" && isFalse(s.get(k))
}

func fail(path, keyword, format string, args ...any) error {
	return &SchemaError{Path: path, Keyword: keyword, Reason: fmt.Sprintf(format, args...)}
}

// ptr appends key k to JSON pointer path.
func ptr(path, k string) string {
	return path + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// literal returns the GBNF literal of s, which is JSON text as the grammar spells it.
func literal(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7F:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// contentKeywords are annotations since 2019-09 and assertions in draft 7 (whose optional
// test suite asserts them): a string's media type and its encoding.
var contentKeywords = []string{"contentMediaType", "contentEncoding"}

// draft7 reports whether the document's root declares draft 7 in $schema.
func draft7(root *node) bool {
	id, ok := root.get("$schema").str()
	if !ok {
		return false
	}
	id = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(id, "http://"), "https://"), "#")
	return id == "json-schema.org/draft-07/schema"
}

// checkDialect refuses what the document's draft asserts and the grammar cannot enforce: the
// content keywords under draft 7.
func (c *converter) checkDialect(s *node, path string) error {
	for _, k := range contentKeywords {
		if s.get(k) != nil && draft7(c.root) {
			return fail(path, k, "is an assertion under draft 7 (the $schema of the document), which the grammar "+
				"cannot enforce; under 2019-09 and 2020-12 (or without $schema) it is an annotation")
		}
	}
	return nil
}

// check refuses the keywords of s that the converter does not know or cannot express.
func check(s *node, path string) error {
	for i, k := range s.keys {
		switch {
		case k == "uniqueItems" && isFalse(s.vals[i]):
			// No constraint: an annotation.
		case slices.Contains(unsupported, k):
			return fail(path, k, "is not supported (the grammar cannot express it)")
		case !slices.Contains(known, k) && !isAnnotation(k):
			return fail(path, k, "is unknown")
		}
	}
	if path != "" && s.get("$id") != nil && hasRef(s) {
		return fail(path, "$id", "an $id below the root changes what the $ref under it name: not supported")
	}
	return nil
}

// hasRef reports whether a $ref appears anywhere in n.
func hasRef(n *node) bool {
	if n.get("$ref") != nil {
		return true
	}
	return slices.ContainsFunc(n.vals, hasRef) || slices.ContainsFunc(n.arr, hasRef)
}

// constraining reports whether s has a keyword that is not an annotation.
func constraining(s *node) bool {
	return slices.ContainsFunc(s.keys, func(k string) bool { return !isAnnotationIn(s, k) })
}

// visit returns a GBNF expression for the values valid under schema s at path, or "" when no
// value is.
func (c *converter) visit(s *node, path string) (string, error) {
	switch {
	case isTrue(s):
		return "value", nil
	case isFalse(s):
		return "", nil
	case s.kind != 'o':
		return "", fail(path, "", "a schema must be an object or a boolean")
	}
	if err := check(s, path); err != nil {
		return "", err
	}
	if err := c.checkDialect(s, path); err != nil {
		return "", err
	}
	if ref := s.get("$ref"); ref != nil && !constraining(s.with("$ref", nil)) {
		return c.ref(ref, path)
	}
	if s.get("$ref") != nil || s.get("allOf") != nil {
		return c.shared(s, path)
	} else {
		var err error
		if s, err = normalizeTuples(s, path); err != nil {
			return "", err
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if s.get(kw) != nil {
			return c.alternatives(s, kw, path)
		}
	}
	return c.typed(s, path)
}

// shared returns the rule of a schema with allOf, or $ref beside other keywords: its
// intersection, flattened, under a rule shared by every identical schema. The rule is named before
// the intersection is visited, so that a recursive $ref under it, which flattening meets again
// as the same schema, ends there.
func (c *converter) shared(s *node, path string) (string, error) {
	return c.memoized(s, path, func() (string, error) {
		f, err := c.flat(s, path, 0)
		if err != nil || isFalse(f) {
			return "", err
		}
		return c.visit(f, path)
	})
}

// memoized returns the rule of schema s, built by build under a name shared by every identical
// schema and reserved while it is built: a schema that meets itself again (a recursive $ref
// met through an intersection) refers to the rule, which ends the recursion, in a value or, when
// it consumes nothing first, as the left recursion that the grammar refuses.
func (c *converter) memoized(s *node, path string, build func() (string, error)) (string, error) {
	key := string(s.raw)
	if name, ok := c.memo[key]; ok {
		if c.rules[name] == "" {
			c.memoUsed[name] = true
		}
		return name, nil
	}
	c.n++
	name := fmt.Sprintf("all-%d", c.n)
	c.memo[key] = name
	c.order = append(c.order, name)
	c.rules[name] = "" // reserved
	drop := func() {
		delete(c.memo, key)
		c.order = slices.DeleteFunc(c.order, func(n string) bool { return n == name })
		delete(c.rules, name)
	}
	*c.steps++
	if *c.steps > maxSteps {
		drop()
		return "", fail(path, "", "the schema needs more than %d intersections: too complex", maxSteps)
	}
	e, err := build()
	switch {
	case err != nil:
		drop()
		return "", err
	case e == "" && c.memoUsed[name]:
		return "", fail(path, "allOf", "a recursive schema that matches no value")
	case e == "":
		drop()
		return "", nil
	}
	c.rules[name] = e
	return name, nil
}

// normalizeTuples rewrites draft 7's tuples (items as a list, additionalItems) as prefixItems and
// items, and drops additionalItems where it has no effect (items absent or a schema).
func normalizeTuples(s *node, path string) (*node, error) {
	items := s.get("items")
	if items != nil && items.kind == 'a' {
		if s.get("prefixItems") != nil {
			return nil, fail(path, "items", "items as a list beside prefixItems")
		}
		s = s.with("prefixItems", items).with("items", s.get("additionalItems")).with("additionalItems", nil)
	} else if s.get("additionalItems") != nil {
		s = s.with("additionalItems", nil)
	}
	return s, nil
}

// ref returns the rule of a $ref, shared by every reference to the same target.
func (c *converter) ref(ref *node, path string) (string, error) {
	r, ok := ref.str()
	if !ok {
		return "", fail(path, "$ref", "$ref must be a string")
	}
	if name, ok := c.refs[r]; ok {
		return name, nil
	}
	target, at, err := c.resolve(r, path)
	if err != nil {
		return "", err
	}
	// Name the rule before visiting, so that a recursive reference finds it.
	c.n++
	name := fmt.Sprintf("ref-%d", c.n)
	c.refs[r] = name
	c.order = append(c.order, name)
	c.rules[name] = "" // reserved
	e, err := c.visit(target, at)
	if err != nil {
		return "", err
	}
	if e == "" {
		return "", fail(path, "$ref", "$ref %s names a schema that matches no value", quote.String(r))
	}
	c.rules[name] = e
	return name, nil
}

// resolve returns the schema that a local $ref names (a JSON pointer into the document) and its
// path.
func (c *converter) resolve(r, path string) (*node, string, error) {
	bad := func() (*node, string, error) {
		return nil, "", fail(path, "$ref", "$ref %s: only local references (#, #/$defs/NAME, any JSON pointer into the document) are supported, and the target must exist", quote.String(r))
	}
	frag, ok := strings.CutPrefix(r, "#")
	if !ok {
		return bad()
	}
	frag, err := url.PathUnescape(frag)
	if err != nil || frag != "" && !strings.HasPrefix(frag, "/") {
		return bad()
	}
	n, at := c.root, ""
	if frag != "" {
		for _, part := range strings.Split(frag[1:], "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			at = ptr(at, part)
			switch n.kind {
			case 'o':
				n = n.get(part)
			case 'a':
				i, err := strconv.Atoi(part)
				if err != nil || i < 0 || i >= len(n.arr) {
					return bad()
				}
				n = n.arr[i]
			default:
				n = nil
			}
			if n == nil {
				return bad()
			}
		}
	}
	return n, at, nil
}

// typed returns the expression of a flat schema without anyOf and oneOf: the union, over the
// types it allows, of the values of that type that its keywords allow.
func (c *converter) typed(s *node, path string) (string, error) {
	mask, err := typeMask(s, path)
	if err != nil {
		return "", err
	}
	vals, err := enumValues(s, path)
	if err != nil {
		return "", err
	}
	if vals != nil {
		return c.enum(s, vals, mask, path)
	}
	if mask == tAll && !constraining(s) {
		return "value", nil
	}
	var alts []string
	add := func(e string, err error) error {
		if err == nil && e != "" {
			alts = append(alts, e)
		}
		return err
	}
	if mask&tNull != 0 {
		alts = append(alts, "null")
	}
	if mask&tBoolean != 0 {
		alts = append(alts, "boolean")
	}
	if mask&tObject != 0 {
		if err := add(c.object(s, path)); err != nil {
			return "", err
		}
	}
	if mask&tArray != 0 {
		if err := add(c.array(s, path)); err != nil {
			return "", err
		}
	}
	if mask&tString != 0 {
		if err := add(c.str(s, path)); err != nil {
			return "", err
		}
	}
	if mask&tInteger != 0 {
		if err := add(c.number(s, mask&tNumber == 0, path)); err != nil {
			return "", err
		}
	}
	switch len(alts) {
	case 0:
		return "", nil
	case 1:
		return alts[0], nil
	}
	return "(" + strings.Join(alts, " | ") + ")", nil
}

// enum returns the alternation of the values vals that have a type of mask and satisfy the
// other keywords of s, each written compactly with optional whitespace between tokens.
func (c *converter) enum(s *node, vals []*node, mask int, path string) (string, error) {
	rest := s.with("enum", nil).with("const", nil).with("type", nil)
	var m *Matcher
	if constraining(rest) {
		if c.enumDepth >= maxEnumDepth {
			return "", fail(path, "enum", "enum or const beside other keywords, nested in %d others: too deep", maxEnumDepth)
		}
		_, g, err := convertNode(&converter{root: c.root, steps: c.steps, enumDepth: c.enumDepth + 1}, rest, path)
		var se *SchemaError
		switch {
		case errors.As(err, &se) && se.Reason == "the schema matches no value":
			return "", nil
		case err != nil:
			return "", err
		}
		m = NewMatcher(g, byteVocabulary())
	}
	var alts []string
	seen := map[string]bool{}
	for _, v := range vals {
		t := valueType(v)
		if t&mask == 0 && !(t == tNumber && mask&tNumber != 0) {
			continue
		}
		if m != nil {
			st := m.AcceptBytes(m.Start(), v.raw)
			if m.Dead(st) || !m.Complete(st) {
				continue
			}
		}
		if e := valueExpr(v); !seen[e] {
			seen[e] = true
			alts = append(alts, e)
		}
	}
	switch len(alts) {
	case 0:
		return "", nil
	case 1:
		return alts[0], nil
	}
	return "(" + strings.Join(alts, " | ") + ")", nil
}

// valueExpr returns the GBNF of exactly the JSON value v, with the grammar's optional
// whitespace after each token.
func valueExpr(v *node) string {
	switch v.kind {
	case 'o':
		var parts []string
		for i, k := range v.keys {
			parts = append(parts, literal(jsonQuote(k))+` space ":" space `+valueExpr(v.vals[i]))
		}
		return `"{" space ` + strings.Join(parts, ` "," space `) + ` "}" space`
	case 'a':
		var parts []string
		for _, e := range v.arr {
			parts = append(parts, valueExpr(e))
		}
		return `"[" space ` + strings.Join(parts, ` "," space `) + ` "]" space`
	}
	return literal(string(v.raw)) + " space"
}

var (
	byteVocabOnce sync.Once
	byteVocab1    *Vocabulary
)

// byteVocabulary is a vocabulary of the 256 bytes, for matching documents byte by byte.
func byteVocabulary() *Vocabulary {
	byteVocabOnce.Do(func() {
		toks := make([][]byte, 256)
		for i := range toks {
			toks[i] = []byte{byte(i)}
		}
		v, err := NewVocabulary(toks, nil)
		if err != nil {
			panic(err) // a fixed vocabulary
		}
		byteVocab1 = v
	})
	return byteVocab1
}
