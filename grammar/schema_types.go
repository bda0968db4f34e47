package grammar

import (
	"cmp"
	"fmt"
	"github.com/llamaloop/llamaloop/internal/quote"
	"math/big"
	"strings"
)

// object returns the rule of the objects that s allows: its properties (required first, then
// the optional ones, in the order of properties) and, where additionalProperties allows them,
// other keys after them. A required name without a schema in properties may hold any value. ""
// when a required property matches no value.
func (c *converter) object(s *node, path string) (string, error) {
	props := s.get("properties")
	addl := s.get("additionalProperties")
	req := s.get("required")
	if props == nil && addl == nil && req == nil {
		return "object", nil
	}
	var names []string
	var schemas []*node
	if props != nil {
		if props.kind != 'o' {
			return "", fail(path, "properties", "properties must be an object")
		}
		names = append(names, props.keys...)
		schemas = append(schemas, props.vals...)
	}
	required, listed := map[string]bool{}, map[string]bool{}
	if req != nil {
		if req.kind != 'a' {
			return "", fail(path, "required", "required must be an array of names")
		}
		for _, r := range req.arr {
			name, ok := r.str()
			if !ok {
				return "", fail(path, "required", "required must be an array of names")
			}
			required[name] = true
			if props.get(name) == nil && !listed[name] {
				// Not a declared property: its value is an additional one.
				listed[name] = true
				names = append(names, name)
				schemas = append(schemas, cmp.Or(addl, trueNode))
			}
		}
	}
	var reqKV, optKV []string // key-value expressions
	for i, k := range names {
		e, err := c.visit(schemas[i], ptr(path+"/properties", k))
		if err != nil {
			return "", err
		}
		if e == "" {
			if required[k] {
				return "", nil
			}
			continue // the key cannot appear; it stays out of the other keys too
		}
		kv := c.rule("kv", literal(jsonQuote(k))+` space ":" space `+e)
		if required[k] {
			reqKV = append(reqKV, kv)
		} else {
			optKV = append(optKV, kv)
		}
	}
	extra := ""
	if addl != nil && !isFalse(addl) {
		e, err := c.visit(addl, path+"/additionalProperties")
		if err != nil {
			return "", err
		}
		if e != "" {
			extra = c.rule("extra", c.notStrings(names)+` ":" space `+e)
		}
	}
	extras := ""
	if extra != "" {
		extras = ` ("," space ` + extra + ")*"
	}
	// tail(i): any subset of the optional properties from i on, in order, each after a comma.
	tail := func(i int) string {
		var b strings.Builder
		for _, kv := range optKV[i:] {
			b.WriteString(` ("," space ` + kv + ")?")
		}
		return b.String()
	}
	var body string
	if len(reqKV) > 0 {
		body = strings.Join(reqKV, ` "," space `) + tail(0) + extras
	} else {
		var alts []string
		for i, kv := range optKV {
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

// keyChar is a character of a key that is not a declared name: never an escape, so that no
// spelling of a declared name can pass for another key.
const keyChar = `[^"\\\x7F\x00-\x1F]`

// notStrings returns a string rule (quotes and trailing space included) for every JSON string
// that is none of words: a walk down the trie of the words' spellings (one unit per character,
// as jsonQuote writes it), leaving it at the first character that no word continues with, or
// ending where no word ends. Outside the trie a key has no escapes, and jsonQuote spells each
// character one way only, so the keys it accepts decode to strings that are none of words.
func (c *converter) notStrings(words []string) string {
	if len(words) == 0 {
		return "string"
	}
	type trie struct {
		kids map[string]*trie
		keys []string
		end  bool
	}
	root := &trie{kids: map[string]*trie{}}
	for _, w := range words {
		t := root
		for _, u := range jsonUnits(w) {
			k, ok := t.kids[u]
			if !ok {
				k = &trie{kids: map[string]*trie{}}
				t.kids[u] = k
				t.keys = append(t.keys, u)
			}
			t = k
		}
		t.end = true
	}
	var walk func(t *trie) string
	walk = func(t *trie) string {
		var alts []string
		var class strings.Builder
		for _, u := range t.keys {
			alts = append(alts, literal(u)+" "+walk(t.kids[u]))
			if u[0] != '\\' {
				class.WriteString(classChar([]rune(u)[0]))
			}
		}
		// Any other character leaves every word: the rest is free.
		alts = append(alts, `[^"\\\x7F\x00-\x1F`+class.String()+`] `+keyChar+`*`)
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
	case ']', '[', '\\', '"':
		return `\` + string(r)
	case '-', '^':
		return fmt.Sprintf(`\x%02X`, r) // llama.cpp knows no \- nor \^
	}
	if r < 0x20 || r == 0x7F {
		return fmt.Sprintf(`\x%02X`, r)
	}
	return string(r)
}

// array returns the rule of the arrays that s allows: prefixItems in order, then items, within
// minItems and maxItems. "" when none is.
func (c *converter) array(s *node, path string) (string, error) {
	lo, hi, err := sizeBounds(s, path, "minItems", "maxItems")
	if err != nil {
		return "", err
	}
	prefix, items := s.get("prefixItems"), s.get("items")
	if prefix == nil && items == nil && lo == 0 && hi < 0 {
		return "array", nil
	}
	var parts []string
	if prefix != nil {
		if prefix.kind != 'a' {
			return "", fail(path, "prefixItems", "prefixItems must be an array of schemas")
		}
		for i, p := range prefix.arr {
			e, err := c.visit(p, fmt.Sprintf("%s/prefixItems/%d", path, i))
			if err != nil {
				return "", err
			}
			parts = append(parts, e)
		}
	}
	rest := "value"
	if items != nil {
		if items.kind == 'a' {
			return "", fail(path, "items", "items must be a schema")
		}
		if rest, err = c.visit(items, path+"/items"); err != nil {
			return "", err
		}
	}
	// An item that matches nothing ends the arrays before it; so does maxItems.
	for i, p := range parts {
		if p == "" {
			parts, rest = parts[:i], ""
			break
		}
	}
	if hi >= 0 && hi <= len(parts) {
		parts, rest = parts[:hi], ""
	}
	if rest == "" && lo > len(parts) {
		return "", nil
	}
	dec := func(n int) int {
		if n < 0 {
			return -1
		}
		return n - 1
	}
	// build(i): the items from position i on, each after a comma but the first.
	var build func(i int) string
	build = func(i int) string {
		if i == len(parts) {
			mn, mx := max(0, lo-i), -1
			if hi >= 0 {
				mx = hi - i
			}
			switch {
			case rest == "" || mx == 0:
				return ""
			case i > 0:
				return `("," space ` + rest + ")" + repeatSuffix(mn, mx)
			case mn == 0:
				return "(" + rest + ` ("," space ` + rest + ")" + repeatSuffix(0, dec(mx)) + ")?"
			}
			return rest + ` ("," space ` + rest + ")" + repeatSuffix(mn-1, dec(mx))
		}
		elem := parts[i] + " " + build(i+1)
		if i > 0 {
			elem = `"," space ` + elem
		}
		if i >= lo {
			return "(" + elem + ")?"
		}
		return elem
	}
	return c.rule("array", `"[" space `+build(0)+` "]" space`), nil
}

// maxCount bounds minItems, maxItems, minLength and maxLength, which the grammar unrolls.
const maxCount = 1 << 18

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
			return 0, 0, fail(path, k, "%s must be a non-negative integer", k)
		}
		if n > maxCount {
			return 0, 0, fail(path, k, "%s %d is more than the grammar unrolls (at most %d)", k, n, maxCount)
		}
		if k == minKey {
			lo = n
		} else {
			hi = n
		}
	}
	if hi >= 0 && hi < lo {
		return 0, 0, fail(path, maxKey, "%s %d below %s %d", maxKey, hi, minKey, lo)
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

// Calendar-exact RFC 3339 dates: 31-day months, 30-day months, February to the 28th, and the
// 29th of February in leap years (divisible by 4, and by 400 when by 100).
const (
	formatDate = `[0-9]{4} "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) )` +
		` | ( [0-9]{2} ( [02468] [48] | [13579] [26] | [2468] "0" ) | ( [02468] [048] | [13579] [26] ) "00" ) "-02-29"`
	formatTime = `( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( [Zz] | [+\x2D] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`
	formatUUID = `[0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}`
)

// Sound subsets of the other formats of JSON Schema 2020-12: every string they match is valid
// under the format's RFC, though most valid strings are left out (no IP literals in e-mail
// addresses, only absolute URIs with a host name, no Unicode in the IDN formats).
const (
	formatLabel    = `[a-zA-Z0-9]{1,10} ( "-" [a-zA-Z0-9]{1,10} ){0,2}` // no "--", so never an A-label
	formatHostname = formatLabel + ` ( "." ` + formatLabel + ` ){0,3}`
	formatAtext    = "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~\\x2D]{1,16}"
	formatEmail    = formatAtext + ` ( "." ` + formatAtext + ` ){0,2} "@" ( ` + formatHostname + ` )`
	formatOctet    = `( "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9] )`
	formatIPv4     = formatOctet + ` ( "." ` + formatOctet + ` ){3}`
	formatIPv6     = `[0-9a-fA-F]{1,4} ( ":" [0-9a-fA-F]{1,4} ){7}`
	formatURIChar  = `( [a-zA-Z0-9\x2D._~!$&'()*+,;=:@] | "%" [0-9a-fA-F]{2} )`
	formatURI      = `[a-zA-Z] [a-zA-Z0-9+.\x2D]{0,10} "://" ( ` + formatHostname + ` ) ( ":" [1-9] [0-9]{0,3} )? ( "/" ` + formatURIChar + `{0,20} ){0,5}` +
		` ( "?" ( ` + formatURIChar + ` | [/?] ){0,30} )? ( "#" ( ` + formatURIChar + ` | [/?] ){0,30} )?`
	formatPointer  = `( "/" ( [^"\\\x7F\x00-\x1F~/] | "~" [01] ){0,20} ){0,5}`
	formatDuration = `"P" ( [0-9]{1,4} [YMWD] | "T" [0-9]{1,4} [HMS] )`
	formatTemplate = `"/" ( [a-zA-Z0-9\x2D._~/] | "{" [a-zA-Z0-9_]{1,10} "}" ){0,40}` // a path: no scheme to misread
)

// stringFormats are the formats that the grammar enforces, with the least and most characters of
// their strings (bounds of the rules above, checked by TestFormatLengths), so that minLength and
// maxLength beside them are kept when they allow all of those. A format that JSON Schema does not
// define is an annotation, as validators treat it.
var stringFormats = map[string]struct {
	rule     string
	min, max int
}{
	"date":                  {formatDate, 10, 10},
	"time":                  {formatTime, 9, 24},
	"date-time":             {"( " + formatDate + ` ) [Tt] ` + formatTime, 20, 35},
	"uuid":                  {formatUUID, 36, 36},
	"duration":              {formatDuration, 3, 7},
	"email":                 {formatEmail, 3, 182},
	"idn-email":             {formatEmail, 3, 182},
	"hostname":              {formatHostname, 1, 131},
	"idn-hostname":          {formatHostname, 1, 131},
	"ipv4":                  {formatIPv4, 7, 15},
	"ipv6":                  {formatIPv6, 15, 39},
	"uri":                   {formatURI, 5, 637},
	"uri-reference":         {formatURI, 5, 637},
	"iri":                   {formatURI, 5, 637},
	"iri-reference":         {formatURI, 5, 637},
	"uri-template":          {formatTemplate, 1, 481},
	"json-pointer":          {formatPointer, 0, 205},
	"relative-json-pointer": {`( "0" | [1-9] [0-9]{0,3} ) ( "#" | ` + formatPointer + ` )`, 1, 209},
	"regex":                 {`[a-zA-Z0-9 ]{0,20}`, 0, 20},
}

func knownFormat(f *node) bool {
	name, _ := f.str()
	_, ok := stringFormats[name]
	return ok
}

// lenChar is one code point of a JSON string: a character, or an escape, an escaped surrogate
// pair counting as one (a lone surrogate is not allowed).
const lenChar = `[^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2} ) )`

// str returns the rule of the strings that s allows. "" when none is.
func (c *converter) str(s *node, path string) (string, error) {
	lo, hi, err := sizeBounds(s, path, "minLength", "maxLength")
	if err != nil {
		return "", err
	}
	pat := s.get("pattern")
	if pat != nil && pat.kind != 's' {
		return "", fail(path, "pattern", "pattern must be a string")
	}
	if f := s.get("format"); f != nil {
		name, ok := f.str()
		if !ok {
			return "", fail(path, "format", "format must be a string")
		}
		if sf, known := stringFormats[name]; known {
			switch {
			case pat != nil:
				return "", fail(path, "pattern", "pattern beside format %s is not supported", quote.String(name))
			case sf.max >= 0 && sf.max < lo || hi >= 0 && sf.min > hi:
				return "", nil
			case sf.min < lo:
				return "", fail(path, "minLength", "minLength %d beside format %s (%d to %d characters) is not supported", lo, quote.String(name), sf.min, sf.max)
			case hi >= 0 && (sf.max < 0 || sf.max > hi):
				return "", fail(path, "maxLength", "maxLength %d beside format %s (%d to %d characters) is not supported", hi, quote.String(name), sf.min, sf.max)
			}
			return c.rule(name, `"\"" ( `+sf.rule+` ) "\"" space`), nil
		}
	}
	if pat != nil {
		e, err := c.pattern(pat.s, lo, hi, path)
		if err != nil || e == "" {
			return "", err
		}
		return c.rule("pattern", `"\"" `+e+` "\"" space`), nil
	}
	if lo == 0 && hi < 0 {
		return "string", nil
	}
	return c.rule("string", `"\"" `+c.rule("len-char", lenChar)+repeatSuffix(lo, hi)+` "\"" space`), nil
}

// number returns the rule of the numbers that s allows (integers only when intOnly).
func (c *converter) number(s *node, intOnly bool, path string) (string, error) {
	maxFrac, step := maxFractionDigits, (*big.Int)(nil)
	if mo := s.get("multipleOf"); mo != nil {
		r, ok := new(big.Rat).SetString(string(mo.raw))
		if mo.kind != 'n' || !ok || r.Sign() <= 0 {
			return "", fail(path, "multipleOf", "multipleOf must be a number above 0")
		}
		// The integers that are multiples of p/q (in lowest terms) are the multiples of p.
		if p := r.Num(); p.Cmp(big.NewInt(1)) != 0 {
			if !intOnly && !r.IsInt() {
				return "", fail(path, "multipleOf", "multipleOf %s on numbers is supported as 1, 0.1, 0.01, ... only (at most so many fractional digits)", mo.raw)
			}
			intOnly, step = true, p
		} else if q := r.Denom().String(); strings.Trim(q[1:], "0") != "" || q[0] != '1' || len(q)-1 > maxFractionDigits {
			return "", fail(path, "multipleOf", "multipleOf %s on numbers is supported as 1, 0.1, 0.01, ... only (at most so many fractional digits)", mo.raw)
		} else {
			maxFrac = len(q) - 1
			if maxFrac == 0 {
				intOnly = true
			}
		}
	}
	if step != nil {
		return c.multiples(s, step, path)
	}
	if !hasNumericBounds(s) {
		switch {
		case intOnly:
			return "integer", nil
		case maxFrac < maxFractionDigits:
			return c.rule("number", `("-"? integral-part)`+fractionAny(maxFrac)+" space"), nil
		}
		return "number", nil
	}
	if !intOnly {
		lo, loEx, hi, hiEx, err := numberBounds(s, path)
		if err != nil {
			return "", err
		}
		e, ok := numberRange(lo, loEx, hi, hiEx, maxFrac)
		if !ok {
			for _, k := range numericKeywords {
				if s.get(k) != nil {
					return "", fail(path, k, "a bound of a number with more than 64 fractional digits is not supported")
				}
			}
		}
		if e == "" {
			return "", nil
		}
		return c.rule("number", e), nil
	}
	lo, hi, err := integerBounds(s, path)
	if err != nil {
		return "", err
	}
	return c.rule("integer", integerRange(lo, hi)), nil
}

// maxMultiples bounds the multiples of a bounded multipleOf, written out one by one, and
// maxDivisor the divisor of an unbounded one, a rule per remainder and digit.
const (
	maxMultiples = 512
	maxDivisor   = 100
)

// multiples returns the rule of the integers that are multiples of step (above 1) and lie within
// the bounds of s: each one written out when the bounds leave at most maxMultiples, else, without
// bounds, the decimal numerals divisible by step, at most 16 digits long.
func (c *converter) multiples(s *node, step *big.Int, path string) (string, error) {
	if hasNumericBounds(s) {
		lo, hi, err := integerBounds(s, path)
		if err != nil {
			return "", err
		}
		if lo == nil || hi == nil {
			return "", fail(path, "multipleOf", "multipleOf %v with a bound on one side only is not supported", step)
		}
		first := new(big.Int).Mul(new(big.Int).Div(new(big.Int).Add(lo, new(big.Int).Sub(step, big.NewInt(1))), step), step) // ceil(lo/step)*step
		if lo.Sign() < 0 {
			first = new(big.Int).Mul(new(big.Int).Quo(lo, step), step) // truncation rounds a negative bound up
		}
		count := new(big.Int).Sub(hi, first)
		if count.Sign() < 0 {
			return "", nil
		}
		if count.Div(count, step).Cmp(big.NewInt(maxMultiples)) >= 0 {
			return "", fail(path, "multipleOf", "multipleOf %v leaves more than %d values between the bounds: not supported", step, maxMultiples)
		}
		var alts []string
		for x := first; x.Cmp(hi) <= 0; x = new(big.Int).Add(x, step) {
			alts = append(alts, `"`+x.String()+`"`)
		}
		return c.rule("multiples", "("+strings.Join(alts, " | ")+") space"), nil
	}
	if !step.IsInt64() || step.Int64() > maxDivisor {
		return "", fail(path, "multipleOf", "multipleOf %v on integers without both bounds is supported up to %d", step, maxDivisor)
	}
	k := int(step.Int64())
	// div(r, d): the rest of a numeral whose digits so far, d of them, leave remainder r.
	name := func(r, d int) string { return fmt.Sprintf("div%d-%d-%d", k, r, d) }
	var build func(r, d int) string
	built := map[string]bool{}
	build = func(r, d int) string {
		n := name(r, d)
		if built[n] {
			return n
		}
		built[n] = true
		var alts []string
		if r == 0 {
			alts = append(alts, `""`)
		}
		if d < maxIntegerDigits {
			for digit := range 10 {
				alts = append(alts, fmt.Sprintf(`"%d" %s`, digit, build((10*r+digit)%k, d+1)))
			}
		}
		if len(alts) == 0 {
			alts = append(alts, `[^\x00-\U0010FFFF]`) // a dead end: no numeral of this remainder
		}
		c.rules[n] = strings.Join(alts, " | ")
		c.order = append(c.order, n)
		return n
	}
	var first []string
	for digit := 1; digit <= 9; digit++ {
		first = append(first, fmt.Sprintf(`"%d" %s`, digit, build(digit%k, 1)))
	}
	body := "(" + strings.Join(first, " | ") + ")"
	return c.rule("multiples", `("0" | "-"? `+body+") space"), nil
}
