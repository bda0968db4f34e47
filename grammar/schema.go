package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
)

// SchemaError is a JSON Schema that FromJSONSchema cannot or will not turn into a grammar; Path is
// the JSON pointer of the offending schema ("" for the root).
type SchemaError struct {
	Path   string
	Reason string
}

// Error returns "json schema at PATH: reason".
func (e *SchemaError) Error() string {
	p := e.Path
	if p == "" {
		p = "/"
	}
	return fmt.Sprintf("json schema at %s: %s", p, e.Reason)
}

// SchemaToGBNF converts a JSON Schema to GBNF text, as far as llama.cpp's json-schema-to-grammar
// goes and no further:
//
//   - type (a name or a list), enum, const, anyOf, oneOf (as anyOf), local $ref to #/$defs/... or
//     #/definitions/... (recursion allowed), true/false sub-schemas;
//   - objects: properties, required (required properties first, then the optional ones, each in
//     the order of properties, as llama.cpp emits them), additionalProperties (false or absent:
//     no other keys; true or a schema: other keys, never one of the declared names); an object
//     without properties nor additionalProperties is any object;
//   - allOf of one schema (an annotated $ref), or of object schemas, whose properties and
//     required lists merge into one object without other keys;
//   - arrays: items (one schema), minItems, maxItems; tuples (prefixItems, or items as a list
//     with additionalItems): exactly the listed items, then more of items/additionalItems when
//     given, as llama.cpp emits them;
//   - strings: minLength, maxLength, pattern (a regular expression anchored with ^ and $, of
//     literals, classes, groups, alternation and repetition), format date, time, date-time and
//     uuid; other formats are annotations and ignored, as JSON Schema allows;
//   - integers and numbers of at most 16 digits per part; integers bounded by minimum, maximum,
//     exclusiveMinimum and exclusiveMaximum (not numbers: a decimal range has no finite
//     grammar worth emitting); null, boolean.
//
// Annotations (title, description, default, examples, $schema, $id, $comment, ...) are ignored.
// Keywords that constrain values in a way the grammar does not express are refused with a
// [SchemaError]: not, if/then/else, multipleOf, patternProperties, propertyNames, contains,
// uniqueItems, min/maxProperties, dependentRequired, dependentSchemas, unevaluated*, remote $ref.
func SchemaToGBNF(schema []byte) (string, error) {
	src, _, err := convertSchema(schema)
	return src, err
}

// convertSchema returns the GBNF of schema and its parsed grammar.
func convertSchema(schema []byte) (string, *Grammar, error) {
	src, err := schemaText(schema)
	if err != nil {
		return "", nil, err
	}
	g, err := Parse(src)
	if err != nil {
		// Only a $ref cycle that consumes nothing (left recursion) gets here.
		return "", nil, &SchemaError{Reason: "the schema cannot be matched: " + err.Error()}
	}
	return src, g, nil
}

func schemaText(schema []byte) (string, error) {
	root, err := decodeOrdered(schema)
	if err != nil {
		return "", &SchemaError{Reason: "not JSON: " + err.Error()}
	}
	c := &converter{root: root, rules: map[string]string{}, refs: map[string]string{}}
	expr, err := c.visit(root, "")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("root ::= " + expr + "\n")
	for _, name := range c.order {
		b.WriteString(name + " ::= " + c.rules[name] + "\n")
	}
	b.WriteString(jsonPrimitives)
	return b.String(), nil
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
	raw  json.RawMessage // scalars (and the whole value for const/enum)
	kind byte            // 'o', 'a', 's', 'n', 'b', 'z' (null)
}

func (n *node) get(k string) *node {
	if n == nil || n.kind != 'o' {
		return nil
	}
	for i, key := range n.keys {
		if key == k {
			return n.vals[i]
		}
	}
	return nil
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
		b, _ := json.Marshal(t)
		return &node{kind: 's', raw: b}, nil
	case json.Number:
		return &node{kind: 'n', raw: json.RawMessage(t.String())}, nil
	case bool:
		return &node{kind: 'b', raw: json.RawMessage(strconv.FormatBool(t))}, nil
	default:
		return &node{kind: 'z', raw: json.RawMessage("null")}, nil
	}
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
			kb, _ := json.Marshal(k)
			b = append(append(append(b, kb...), ':'), n.vals[i].raw...)
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

func (n *node) str() (string, bool) {
	if n == nil || n.kind != 's' {
		return "", false
	}
	var s string
	return s, json.Unmarshal(n.raw, &s) == nil
}

func (n *node) integer() (int, bool) {
	if n == nil || n.kind != 'n' {
		return 0, false
	}
	v, err := strconv.Atoi(string(n.raw))
	return v, err == nil && v >= 0
}

type converter struct {
	root  *node
	rules map[string]string // name -> expression
	order []string
	refs  map[string]string // $ref -> rule name
	n     int
}

// rule adds a named rule for expr (sharing an identical one) and returns its name.
func (c *converter) rule(hint, expr string) string {
	for _, name := range c.order {
		if c.rules[name] == expr {
			return name
		}
	}
	c.n++
	name := fmt.Sprintf("%s-%d", hint, c.n)
	c.rules[name] = expr
	c.order = append(c.order, name)
	return name
}

var (
	annotations = []string{"title", "description", "default", "examples", "$schema", "$id", "$comment",
		"deprecated", "readOnly", "writeOnly", "$defs", "definitions", "contentEncoding", "contentMediaType", "$anchor"}
	unsupported = []string{"not", "if", "then", "else", "multipleOf", "patternProperties", "propertyNames", "contains",
		"minContains", "maxContains", "uniqueItems", "minProperties", "maxProperties", "dependentRequired",
		"dependentSchemas", "dependencies", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef"}
	known = []string{"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "required",
		"additionalProperties", "items", "prefixItems", "additionalItems", "minItems", "maxItems", "minLength",
		"maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
)

func fail(path, format string, args ...any) error {
	return &SchemaError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// literal returns the GBNF literal of raw bytes (a JSON text).
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

// visit returns a GBNF expression for the values valid under schema s at path.
func (c *converter) visit(s *node, path string) (string, error) {
	switch {
	case s.kind == 'b' && string(s.raw) == "true":
		return "value", nil
	case s.kind == 'b':
		return "", fail(path, "the schema false matches no value")
	case s.kind != 'o':
		return "", fail(path, "a schema must be an object or a boolean")
	}
	for _, k := range s.keys {
		switch {
		case slices.Contains(unsupported, k):
			return "", fail(path, "keyword %q is not supported (the grammar cannot express it)", k)
		case !slices.Contains(known, k) && !slices.Contains(annotations, k) && !strings.HasPrefix(k, "x-"):
			return "", fail(path, "unknown keyword %q", k)
		}
	}
	if s.get("allOf") != nil {
		return c.allOf(s, path)
	}
	if ref := s.get("$ref"); ref != nil {
		return c.ref(ref, path)
	}
	if v := s.get("const"); v != nil {
		return literal(string(v.raw)) + " space", nil
	}
	if v := s.get("enum"); v != nil {
		if v.kind != 'a' || len(v.arr) == 0 {
			return "", fail(path+"/enum", "enum must be a non-empty array")
		}
		alts := make([]string, len(v.arr))
		for i, e := range v.arr {
			alts[i] = literal(string(e.raw))
		}
		return "(" + strings.Join(alts, " | ") + ") space", nil
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if v := s.get(kw); v != nil {
			if v.kind != 'a' || len(v.arr) == 0 {
				return "", fail(path+"/"+kw, "%s must be a non-empty array", kw)
			}
			alts := make([]string, len(v.arr))
			for i, sub := range v.arr {
				e, err := c.visit(sub, fmt.Sprintf("%s/%s/%d", path, kw, i))
				if err != nil {
					return "", err
				}
				alts[i] = e
			}
			return c.rule("alt", strings.Join(alts, " | ")), nil
		}
	}
	t := s.get("type")
	switch {
	case t == nil:
		switch {
		case s.get("properties") != nil || s.get("additionalProperties") != nil:
			return c.object(s, path)
		case s.get("items") != nil || s.get("prefixItems") != nil:
			return c.array(s, path)
		case hasNumericBounds(s):
			return "", fail(path, "minimum and maximum are supported with type integer only")
		case s.get("pattern") != nil || s.get("format") != nil || s.get("minLength") != nil || s.get("maxLength") != nil:
			return c.str(s, path)
		}
		return "value", nil
	case t.kind == 'a':
		alts := make([]string, len(t.arr))
		for i, tn := range t.arr {
			name, ok := tn.str()
			if !ok {
				return "", fail(path+"/type", "type must be a name or a list of names")
			}
			e, err := c.typed(name, s, path)
			if err != nil {
				return "", err
			}
			alts[i] = e
		}
		if len(alts) == 0 {
			return "", fail(path+"/type", "empty list of types")
		}
		return "(" + strings.Join(alts, " | ") + ")", nil
	}
	name, ok := t.str()
	if !ok {
		return "", fail(path+"/type", "type must be a name or a list of names")
	}
	return c.typed(name, s, path)
}

func (c *converter) typed(name string, s *node, path string) (string, error) {
	switch name {
	case "object":
		return c.object(s, path)
	case "array":
		return c.array(s, path)
	case "string":
		return c.str(s, path)
	case "integer":
		return c.integer(s, path)
	case "number":
		if hasNumericBounds(s) {
			return "", fail(path, "minimum and maximum are supported with type integer only, not number")
		}
		return name, nil
	case "boolean", "null":
		return name, nil
	}
	return "", fail(path+"/type", "unknown type %q", name)
}

func (c *converter) ref(ref *node, path string) (string, error) {
	r, ok := ref.str()
	if !ok {
		return "", fail(path+"/$ref", "$ref must be a string")
	}
	if name, ok := c.refs[r]; ok {
		return name, nil
	}
	target := c.resolve(r)
	if target == nil {
		return "", fail(path+"/$ref", "$ref %q: only local references to #, #/$defs/NAME and #/definitions/NAME are supported, and the target must exist", r)
	}
	// Name the rule before visiting, so that a recursive reference finds it.
	c.n++
	name := fmt.Sprintf("ref-%d", c.n)
	c.refs[r] = name
	c.order = append(c.order, name)
	c.rules[name] = "" // reserved
	e, err := c.visit(target, r[1:])
	if err != nil {
		return "", err
	}
	c.rules[name] = e
	return name, nil
}

// resolve returns the schema that a local $ref names, or nil.
func (c *converter) resolve(r string) *node {
	if r == "#" {
		return c.root
	}
	for _, defs := range []string{"$defs", "definitions"} {
		if key, ok := strings.CutPrefix(r, "#/"+defs+"/"); ok {
			return c.root.get(defs).get(key)
		}
	}
	return nil
}

func (c *converter) object(s *node, path string) (string, error) {
	props := s.get("properties")
	addl := s.get("additionalProperties")
	if props == nil && addl == nil {
		return "object", nil
	}
	if props != nil && props.kind != 'o' {
		return "", fail(path+"/properties", "properties must be an object")
	}
	required := map[string]bool{}
	if req := s.get("required"); req != nil {
		if req.kind != 'a' {
			return "", fail(path+"/required", "required must be an array of names")
		}
		for _, r := range req.arr {
			name, ok := r.str()
			if !ok {
				return "", fail(path+"/required", "required must be an array of names")
			}
			if props.get(name) == nil {
				return "", fail(path+"/required", "required property %q is not in properties", name)
			}
			required[name] = true
		}
	}
	var req, opt []string // key-value expressions
	var names []string
	if props != nil {
		for i, k := range props.keys {
			e, err := c.visit(props.vals[i], path+"/properties/"+k)
			if err != nil {
				return "", err
			}
			kb, _ := json.Marshal(k)
			kv := c.rule("kv", literal(string(kb))+" space \":\" space "+e)
			names = append(names, k)
			if required[k] {
				req = append(req, kv)
			} else {
				opt = append(opt, kv)
			}
		}
	}
	extra := ""
	if addl != nil && !(addl.kind == 'b' && string(addl.raw) == "false") {
		e, err := c.visit(addl, path+"/additionalProperties")
		if err != nil {
			return "", err
		}
		extra = c.rule("extra", c.notStrings(names)+" \":\" space "+e)
	}
	extras := ""
	if extra != "" {
		extras = ` ("," space ` + extra + ")*"
	}
	// tail(i): any subset of the optional properties from i on, in order, each after a comma.
	tail := func(i int) string {
		var b strings.Builder
		for _, kv := range opt[i:] {
			b.WriteString(` ("," space ` + kv + ")?")
		}
		return b.String()
	}
	var body string
	if len(req) > 0 {
		body = strings.Join(req, ` "," space `) + tail(0) + extras
	} else {
		var alts []string
		for i, kv := range opt {
			alts = append(alts, kv+tail(i+1)+extras)
		}
		if extra != "" {
			alts = append(alts, extra+extras)
		}
		if len(alts) > 0 {
			body = "(" + strings.Join(alts, " | ") + ")?"
		}
	}
	return c.rule("object", `"{" space `+body+` "}" space`), nil
}

// notStrings returns a string rule (quotes and trailing space included) for every JSON string
// that is none of words: a walk down the trie of the words, leaving it at the first character
// that no word continues with, or ending where no word ends.
func (c *converter) notStrings(words []string) string {
	if len(words) == 0 {
		return "string"
	}
	type trie struct {
		kids map[rune]*trie
		keys []rune
		end  bool
	}
	root := &trie{kids: map[rune]*trie{}}
	for _, w := range words {
		t := root
		for _, r := range w {
			k, ok := t.kids[r]
			if !ok {
				k = &trie{kids: map[rune]*trie{}}
				t.kids[r] = k
				t.keys = append(t.keys, r)
			}
			t = k
		}
		t.end = true
	}
	var walk func(t *trie) string
	walk = func(t *trie) string {
		var alts []string
		var class strings.Builder
		for _, r := range t.keys {
			alts = append(alts, literal(string(r))+" "+walk(t.kids[r]))
			class.WriteString(classChar(r))
		}
		// Any other character, or an escape, leaves every word: the rest is free.
		alts = append(alts, `([^"\\\x7F\x00-\x1F`+class.String()+`] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4})) char*`)
		if !t.end {
			alts = append(alts, `""`)
		}
		return "(" + strings.Join(alts, " | ") + ")"
	}
	return c.rule("key", `"\"" `+walk(root)+` "\"" space`)
}

// classChar escapes r for use inside a GBNF character class.
func classChar(r rune) string {
	switch r {
	case ']', '[', '\\', '-', '^', '"':
		return `\` + string(r)
	}
	if r < 0x20 || r == 0x7F {
		return fmt.Sprintf(`\x%02X`, r)
	}
	return string(r)
}

func (c *converter) array(s *node, path string) (string, error) {
	if p := s.get("prefixItems"); p != nil {
		return c.tuple(s, p, s.get("items"), path, "prefixItems")
	}
	if it := s.get("items"); it != nil && it.kind == 'a' {
		return c.tuple(s, it, s.get("additionalItems"), path, "items")
	}
	if s.get("additionalItems") != nil {
		return "", fail(path+"/additionalItems", "additionalItems needs items as an array")
	}
	item := "value"
	if it := s.get("items"); it != nil {
		e, err := c.visit(it, path+"/items")
		if err != nil {
			return "", err
		}
		item = e
	}
	lo, hi, err := sizeBounds(s, path, "minItems", "maxItems")
	if err != nil {
		return "", err
	}
	var body string
	switch {
	case hi == 0:
		body = ""
	case lo == 0:
		body = "(" + item + ` ("," space ` + item + ")" + repeatSuffix(0, hi-1) + ")?"
	default:
		body = item + ` ("," space ` + item + ")" + repeatSuffix(lo-1, hi-1)
	}
	return c.rule("array", `"[" space `+body+` "]" space`), nil
}

// sizeBounds reads a pair of count keywords (minItems and maxItems, minLength and maxLength):
// lo defaults to 0 and hi to -1, unbounded.
func sizeBounds(s *node, path, minKey, maxKey string) (lo, hi int, err error) {
	lo, hi = 0, -1
	for _, k := range []string{minKey, maxKey} {
		v := s.get(k)
		if v == nil {
			continue
		}
		n, ok := v.integer()
		if !ok {
			return 0, 0, fail(path+"/"+k, "%s must be a non-negative integer", k)
		}
		if k == minKey {
			lo = n
		} else {
			hi = n
		}
	}
	if hi >= 0 && hi < lo {
		return 0, 0, fail(path, "%s %d below %s %d", maxKey, hi, minKey, lo)
	}
	return lo, hi, nil
}

// repeatSuffix returns the GBNF repetition of lo to hi (hi < 0: unbounded) times.
func repeatSuffix(lo, hi int) string {
	switch {
	case hi < 0 && lo == 0:
		return "*"
	case hi < 0:
		return fmt.Sprintf("{%d,}", lo)
	case lo == hi:
		return fmt.Sprintf("{%d}", lo)
	}
	return fmt.Sprintf("{%d,%d}", lo, hi)
}

// stringFormats are llama.cpp's rules for the formats it knows.
var stringFormats = map[string]string{
	"date":      `[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )`,
	"time":      `([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`,
	"date-time": "",
	"uuid":      `[0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}`,
}

func (c *converter) str(s *node, path string) (string, error) {
	if p := s.get("pattern"); p != nil {
		pat, ok := p.str()
		if !ok {
			return "", fail(path+"/pattern", "pattern must be a string")
		}
		e, err := patternToGBNF(pat)
		if err != nil {
			return "", fail(path+"/pattern", "%v", err)
		}
		return c.rule("pattern", `"\"" `+e+` "\"" space`), nil
	}
	if f, ok := s.get("format").str(); ok {
		if rule, known := stringFormats[f]; known {
			if f == "date-time" {
				rule = "(" + stringFormats["date"] + `) "T" (` + stringFormats["time"] + ")"
			}
			return c.rule(f, `"\"" `+rule+` "\"" space`), nil
		}
	}
	lo, hi, err := sizeBounds(s, path, "minLength", "maxLength")
	if err != nil {
		return "", err
	}
	if lo == 0 && hi < 0 {
		return "string", nil
	}
	return c.rule("string", `"\"" char`+repeatSuffix(lo, hi)+` "\"" space`), nil
}

// patternToGBNF converts a regular expression anchored with ^ and $ to a GBNF expression over
// the characters of a JSON string's content (quotes, backslashes and control characters, which
// JSON would escape, are left out of classes; in literals they are written escaped).
func patternToGBNF(pat string) (string, error) {
	if !strings.HasPrefix(pat, "^") || !strings.HasSuffix(pat, "$") {
		return "", fmt.Errorf("pattern %q must start with ^ and end with $ (as llama.cpp requires)", pat)
	}
	re, err := syntax.Parse(pat[1:len(pat)-1], syntax.Perl)
	if err != nil {
		return "", fmt.Errorf("pattern %q: %v", pat, err)
	}
	return regexpToGBNF(re.Simplify())
}

func regexpToGBNF(re *syntax.Regexp) (string, error) {
	sub := func() ([]string, error) {
		out := make([]string, len(re.Sub))
		for i, s := range re.Sub {
			e, err := regexpToGBNF(s)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	switch re.Op {
	case syntax.OpEmptyMatch:
		return `""`, nil
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return "", errors.New("case-insensitive patterns are not supported")
		}
		b, _ := json.Marshal(string(re.Rune))
		return literal(string(b[1 : len(b)-1])), nil
	case syntax.OpCharClass:
		var b strings.Builder
		b.WriteByte('[')
		n := 0
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			// Split around what JSON escapes: controls, '"', '\\'.
			for _, r := range [][2]rune{{lo, min(hi, 0x21)}, {max(lo, 0x23), min(hi, 0x5B)}, {max(lo, 0x5D), min(hi, 0x7E)}, {max(lo, 0x80), hi}} {
				r[0] = max(r[0], 0x20)
				if r[0] > r[1] {
					continue
				}
				b.WriteString(classChar(r[0]))
				if r[1] > r[0] {
					b.WriteString("-" + classChar(r[1]))
				}
				n++
			}
		}
		if n == 0 {
			return "", errors.New("a character class holds only characters that JSON escapes")
		}
		b.WriteByte(']')
		return b.String(), nil
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		return `[^"\\\x7F\x00-\x1F]`, nil
	case syntax.OpCapture:
		s, err := sub()
		if err != nil {
			return "", err
		}
		return "(" + s[0] + ")", nil
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		s, err := sub()
		if err != nil {
			return "", err
		}
		op := map[syntax.Op]string{syntax.OpStar: "*", syntax.OpPlus: "+", syntax.OpQuest: "?"}[re.Op]
		if re.Op == syntax.OpRepeat {
			op = repeatSuffix(re.Min, re.Max)
		}
		return "(" + s[0] + ")" + op, nil
	case syntax.OpConcat:
		s, err := sub()
		if err != nil {
			return "", err
		}
		return "(" + strings.Join(s, " ") + ")", nil
	case syntax.OpAlternate:
		s, err := sub()
		if err != nil {
			return "", err
		}
		return "(" + strings.Join(s, " | ") + ")", nil
	}
	return "", fmt.Errorf("regular expression operator %v is not supported (anchors only at the ends)", re.Op)
}
