package grammar

import (
	"fmt"
	"github.com/llamaloop/llamaloop/internal/quote"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SyntaxError is a malformed grammar: where (byte offset, 1-based line and column) and why.
type SyntaxError struct {
	Offset, Line, Column int
	Reason               string
}

// Error returns "grammar: line L, column C: reason".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("grammar: line %d, column %d: %s", e.Line, e.Column, e.Reason)
}

// maxElements bounds the compiled size of a grammar, so that a repetition such as x{0,99999999}
// is an error instead of an exhausted memory.
const maxElements = 1 << 20

// elemKind is the kind of one compiled grammar element.
type elemKind uint8

const (
	kEnd      elemKind = iota // end of an alternative
	kByte                     // one byte out of a set (arg indexes Grammar.sets)
	kRule                     // a reference to a rule (arg is the rule id)
	kToken                    // one whole token: <[id]> (arg is the id)
	kTokenNot                 // one whole token other than <[id]>: !<[id]>
)

// elem is one compiled grammar element. The grammar works on bytes: a character class becomes
// the alternatives of its UTF-8 encodings, so a token may end inside a multi-byte character.
type elem struct {
	kind elemKind
	arg  int32
}

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) addRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s[c>>6] |= 1 << (c & 63)
	}
}

// Grammar is a parsed GBNF grammar compiled to byte-level rules. It is immutable and safe for
// concurrent use; a [Matcher] pairs it with a vocabulary.
type Grammar struct {
	elems []elem    // every alternative of every rule, each ending with kEnd
	rules [][]int32 // rules[r] lists the start positions of r's alternatives
	names []string  // rule names ("" for generated rules), for errors
	sets  []byteSet
	root  int32
	src   string
}

// String returns the grammar's source text.
func (g *Grammar) String() string { return g.src }

// Parse parses a GBNF grammar as llama.cpp defines it (grammars/README.md of llama.cpp): rules
// `name ::= alternatives`, a rule named root, alternation `|`, grouping `( )`, repetition `*`
// `+` `?` `{m}` `{m,}` `{m,n}`, literals "..." and character classes [...] / [^...] with ranges
// and the escapes \xHH \uHHHH \UHHHHHHHH \t \n \r \\ \" \[ \], `.` for any character, and
// comments from # to the end of the line. Newlines end a rule except inside parentheses and
// right after `::=` or `|`, and token references <[id]> (that one token, matched by its id
// whatever its text) and !<[id]> (any one token but that one), which a token reaching them
// partway through its bytes cannot match. Left recursion, undefined rules, rules defined twice
// and references by a token's text (<think>) are errors.
//
// Where llama.cpp's parser is lax, Parse follows it or refuses with an error, never reads the
// text another way. The deliberate differences: a rule defined twice is an error (llama.cpp
// keeps the last definition); a reversed range [z-a] is an error (llama.cpp: matches nothing);
// [] and [^] are errors (llama.cpp: the empty string); \U past 10FFFF and surrogate escapes
// are errors (llama.cpp: a code point that never matches); invalid UTF-8 in the grammar is an
// error, and text is matched as strict UTF-8 (llama.cpp decodes malformed bytes leniently);
// repetition counts above 2000 are accepted up to the element budget (llama.cpp refuses them;
// the JSON Schema grammars of long maxLength or maxItems need them). As in llama.cpp, \- \/ and
// \^ are unknown escapes, and a newline may separate the parts of {m,n} inside parentheses.
func Parse(src string) (*Grammar, error) {
	p := &parser{src: src, g: &Grammar{src: src}, ids: map[string]int32{}, defined: map[int32]bool{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return p.g, nil
}

type parser struct {
	src     string
	pos     int
	g       *Grammar
	ids     map[string]int32
	defined map[int32]bool
	firstAt map[int32]int // where an undefined rule was first referenced
	err     *SyntaxError
}

// fail records the first error at offset at.
func (p *parser) fail(at int, format string, args ...any) {
	if p.err != nil {
		return
	}
	line, col := 1, 1
	for _, r := range p.src[:min(at, len(p.src))] {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	p.err = &SyntaxError{Offset: at, Line: line, Column: col, Reason: fmt.Sprintf(format, args...)}
}

func (p *parser) ruleID(name string) int32 {
	if id, ok := p.ids[name]; ok {
		return id
	}
	id := int32(len(p.g.rules))
	p.ids[name] = id
	p.g.rules = append(p.g.rules, nil)
	p.g.names = append(p.g.names, name)
	return id
}

// newRule adds a generated rule.
func (p *parser) newRule() int32 {
	id := int32(len(p.g.rules))
	p.g.rules = append(p.g.rules, nil)
	p.g.names = append(p.g.names, "")
	return id
}

// addAlt appends one alternative of rule r.
func (p *parser) addAlt(r int32, seq []elem) {
	if len(p.g.elems)+len(seq)+1 > maxElements {
		p.fail(p.pos, "grammar too large (over %d elements)", maxElements)
		return
	}
	p.g.rules[r] = append(p.g.rules[r], int32(len(p.g.elems)))
	p.g.elems = append(p.g.elems, seq...)
	p.g.elems = append(p.g.elems, elem{kind: kEnd})
}

func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

// space skips blanks and comments; newlines only when newlineOK.
func (p *parser) space(newlineOK bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\r' && p.src[p.pos] != '\n' {
				p.pos++
			}
		case newlineOK && (c == '\r' || c == '\n'):
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isWordChar(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

func (p *parser) parse() *SyntaxError {
	p.firstAt = map[int32]int{}
	p.space(true)
	for p.pos < len(p.src) && p.err == nil {
		start := p.pos
		name := p.name()
		if name == "" {
			p.fail(p.pos, "expected a rule name, found %s", p.found())
			break
		}
		id := p.ruleID(name)
		if p.defined[id] {
			p.fail(start, "rule %s defined twice", quote.String(name))
			break
		}
		p.defined[id] = true
		p.space(false)
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			p.fail(p.pos, "expected ::= after rule name %s, found %s", quote.String(name), p.found())
			break
		}
		p.pos += 3
		p.space(true)
		p.alternates(id, false)
		if p.err != nil {
			break
		}
		// A rule ends at a newline (or the end of the text).
		if p.pos < len(p.src) {
			if c := p.src[p.pos]; c != '\n' && c != '\r' {
				p.fail(p.pos, "expected the end of the rule, found %s", p.found())
				break
			}
		}
		p.space(true)
	}
	if p.err == nil {
		p.check()
	}
	return p.err
}

// found describes the text at the current position for an error.
func (p *parser) found() string {
	if p.pos >= len(p.src) {
		return "end of grammar"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return strconv.QuoteRune(r)
}

// alternates parses `seq | seq | ...` into rule r.
func (p *parser) alternates(r int32, nested bool) {
	for {
		seq := p.sequence(nested)
		if p.err != nil {
			return
		}
		p.addAlt(r, seq)
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			p.space(true)
			continue
		}
		return
	}
}

// sequence parses elements until `|`, `)` or the end of the rule.
func (p *parser) sequence(nested bool) []elem {
	var seq []elem
	lastStart := -1 // index in seq where the last symbol starts, for repetitions
	for p.pos < len(p.src) && p.err == nil {
		c := p.src[p.pos]
		switch {
		case c == '"':
			lastStart = len(seq)
			var ok bool
			if seq, ok = p.literal(seq); !ok {
				return nil
			}
			if lastStart == len(seq) {
				lastStart = -1 // "" is no symbol to repeat, as in llama.cpp
			}
		case c == '[':
			ranges, negated, ok := p.class()
			if !ok {
				return nil
			}
			lastStart = len(seq)
			seq = append(seq, p.charElems(ranges, negated)...)
		case c == '.':
			p.pos++
			lastStart = len(seq)
			seq = append(seq, p.charElems(nil, true)...)
		case isWordChar(c):
			at := p.pos
			id := p.ruleID(p.name())
			if _, seen := p.firstAt[id]; !seen {
				p.firstAt[id] = at
			}
			lastStart = len(seq)
			seq = append(seq, elem{kind: kRule, arg: id})
		case c == '(':
			p.pos++
			p.space(true)
			sub := p.newRule()
			p.alternates(sub, true)
			if p.err != nil {
				return nil
			}
			if p.pos >= len(p.src) || p.src[p.pos] != ')' {
				p.fail(p.pos, "expected ) to close the group, found %s", p.found())
				return nil
			}
			p.pos++
			lastStart = len(seq)
			seq = append(seq, elem{kind: kRule, arg: sub})
		case c == '<' || c == '!':
			e, ok := p.tokenRef()
			if !ok {
				return nil
			}
			lastStart = len(seq)
			seq = append(seq, e)
		case c == '*' || c == '+' || c == '?' || c == '{':
			if lastStart < 0 {
				p.fail(p.pos, "repetition %q without a preceding symbol", c)
				return nil
			}
			lo, hi, ok := p.repetition(c, nested)
			if !ok {
				return nil
			}
			item := slices.Clone(seq[lastStart:])
			seq = append(seq[:lastStart], p.repeat(item, lo, hi)...)
			lastStart = -1
		default:
			p.space(nested)
			return seq
		}
		p.space(nested)
	}
	return seq
}

// literal appends the elements of the quoted literal at p.pos to seq: one byte set per byte of
// its UTF-8 encoding.
func (p *parser) literal(seq []elem) ([]elem, bool) {
	p.pos++
	for {
		if p.pos >= len(p.src) {
			p.fail(p.pos, "unterminated literal")
			return nil, false
		}
		if p.src[p.pos] == '"' {
			p.pos++
			return seq, true
		}
		r, ok := p.char()
		if !ok {
			return nil, false
		}
		var buf [utf8.UTFMax]byte
		for _, b := range buf[:utf8.EncodeRune(buf[:], r)] {
			var set byteSet
			set.addRange(b, b)
			seq = append(seq, p.setElem(set))
		}
	}
}

// class reads the character class at p.pos: its ranges and whether it is negated.
func (p *parser) class() (ranges [][2]rune, negated, ok bool) {
	start := p.pos
	p.pos++
	if p.pos < len(p.src) && p.src[p.pos] == '^' {
		negated = true
		p.pos++
	}
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		// llama.cpp reads [] and [^] as no element at all, the empty string.
		p.fail(start, "empty character class %s (llama.cpp reads it as the empty string: write \"\" for that)", p.src[start:p.pos+1])
		return nil, false, false
	}
	for {
		if p.pos >= len(p.src) {
			p.fail(start, "unterminated character class")
			return nil, false, false
		}
		if p.src[p.pos] == ']' {
			p.pos++
			return ranges, negated, true
		}
		lo, ok := p.char()
		if !ok {
			return nil, false, false
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			if hi, ok = p.char(); !ok {
				return nil, false, false
			}
			if hi < lo {
				p.fail(p.pos, "character range %q-%q is reversed", lo, hi)
				return nil, false, false
			}
		}
		ranges = append(ranges, [2]rune{lo, hi})
	}
}

// repetition reads the repetition operator c at p.pos: its bounds (hi -1: unbounded).
func (p *parser) repetition(c byte, nested bool) (lo, hi int, ok bool) {
	switch c {
	case '*':
		p.pos++
		return 0, -1, true
	case '+':
		p.pos++
		return 1, -1, true
	case '?':
		p.pos++
		return 0, 1, true
	}
	return p.braces(nested)
}

// braces parses {m}, {m,} or {m,n}; hi is -1 when unbounded. Newlines may separate its parts
// inside parentheses (nested), as in llama.cpp.
func (p *parser) braces(nested bool) (lo, hi int, ok bool) {
	start := p.pos
	p.pos++
	p.space(nested)
	num := func() (int, bool) {
		s := p.pos
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
		if s == p.pos {
			return 0, false
		}
		n, err := strconv.Atoi(p.src[s:p.pos])
		if err != nil || n > maxElements {
			p.fail(s, "repetition count %s too large", p.src[s:p.pos])
			return 0, false
		}
		return n, true
	}
	lo, okLo := num()
	if !okLo {
		p.fail(p.pos, "expected a number in the repetition {m,n}, found %s", p.found())
		return 0, 0, false
	}
	p.space(nested)
	hi = lo
	if p.pos < len(p.src) && p.src[p.pos] == ',' {
		p.pos++
		p.space(nested)
		hi = -1
		if p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			if hi, okLo = num(); !okLo {
				return 0, 0, false
			}
			p.space(nested)
		}
	}
	if p.err != nil {
		return 0, 0, false
	}
	if p.pos >= len(p.src) || p.src[p.pos] != '}' {
		p.fail(p.pos, "expected } to close the repetition, found %s", p.found())
		return 0, 0, false
	}
	p.pos++
	if hi >= 0 && hi < lo {
		p.fail(start, "repetition {%d,%d}: maximum below minimum", lo, hi)
		return 0, 0, false
	}
	return lo, hi, true
}

// repeat returns the elements of item repeated lo to hi times (hi -1: unbounded), rewritten with
// generated rules as llama.cpp does: x* is s ::= x s | ε, x{0,k} nests k optionals.
func (p *parser) repeat(item []elem, lo, hi int) []elem {
	if len(item)*(lo+1) > maxElements {
		p.fail(p.pos, "grammar too large (over %d elements)", maxElements)
		return nil
	}
	out := make([]elem, 0, len(item)*lo+1)
	for range lo {
		out = append(out, item...)
	}
	if hi < 0 {
		star := p.newRule()
		p.addAlt(star, append(slices.Clone(item), elem{kind: kRule, arg: star}))
		p.addAlt(star, nil)
		return append(out, elem{kind: kRule, arg: star})
	}
	if hi == lo {
		return out
	}
	// opt_k ::= item opt_{k-1} | ε, with opt_1 ::= item | ε.
	var prev int32 = -1
	for k := 1; k <= hi-lo && p.err == nil; k++ {
		r := p.newRule()
		alt := slices.Clone(item)
		if prev >= 0 {
			alt = append(alt, elem{kind: kRule, arg: prev})
		}
		p.addAlt(r, alt)
		p.addAlt(r, nil)
		prev = r
	}
	return append(out, elem{kind: kRule, arg: prev})
}

// char reads one character of a literal or class, decoding escapes.
func (p *parser) char() (rune, bool) {
	c := p.src[p.pos]
	if c != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError && n <= 1 {
			p.fail(p.pos, "invalid UTF-8 in the grammar")
			return 0, false
		}
		p.pos += n
		return r, true
	}
	if p.pos+1 >= len(p.src) {
		p.fail(p.pos, "escape at the end of the grammar")
		return 0, false
	}
	e := p.src[p.pos+1]
	p.pos += 2
	hex := 0
	switch e {
	case 'x':
		hex = 2
	case 'u':
		hex = 4
	case 'U':
		hex = 8
	case 't':
		return '\t', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case '\\', '"', '[', ']':
		return rune(e), true
	default:
		// As llama.cpp: \- \/ \^ are errors there too (write \x2D, "/", \x5E).
		p.fail(p.pos-2, "unknown escape \\%c (the escapes are \\x \\u \\U \\t \\n \\r \\\\ \\\" \\[ \\], as in llama.cpp)", e)
		return 0, false
	}
	if p.pos+hex > len(p.src) {
		p.fail(p.pos-2, "escape \\%c needs %d hex digits", e, hex)
		return 0, false
	}
	v, err := strconv.ParseUint(p.src[p.pos:p.pos+hex], 16, 32)
	if err != nil || v > utf8.MaxRune {
		p.fail(p.pos-2, "invalid escape \\%c%s", e, p.src[p.pos:p.pos+hex])
		return 0, false
	}
	if v >= 0xD800 && v <= 0xDFFF {
		// llama.cpp keeps the code point, which valid UTF-8 never decodes to.
		p.fail(p.pos-2, "escape \\%c%s is a surrogate, not a character", e, p.src[p.pos:p.pos+hex])
		return 0, false
	}
	p.pos += hex
	return rune(v), true
}

// charElems compiles a character class (ranges of code points, negated or not) to byte-level
// elements: one byte element when every encoding is one byte, else a generated rule whose
// alternatives are the UTF-8 byte sequences of the class.
func (p *parser) charElems(ranges [][2]rune, negated bool) []elem {
	cps := normalize(ranges)
	if negated {
		cps = complement(cps)
	}
	seqs := utf8Sequences(cps)
	if len(seqs) == 0 {
		// An empty class matches nothing: a byte element with an empty set.
		return []elem{p.setElem(byteSet{})}
	}
	// Every one-byte sequence merges into one set.
	var single byteSet
	var multi [][]elem
	hasSingle := false
	for _, s := range seqs {
		if len(s) == 1 {
			single.addRange(s[0][0], s[0][1])
			hasSingle = true
			continue
		}
		alt := make([]elem, len(s))
		for i, br := range s {
			var set byteSet
			set.addRange(br[0], br[1])
			alt[i] = p.setElem(set)
		}
		multi = append(multi, alt)
	}
	if len(multi) == 0 {
		return []elem{p.setElem(single)}
	}
	r := p.newRule()
	if hasSingle {
		p.addAlt(r, []elem{p.setElem(single)})
	}
	for _, alt := range multi {
		p.addAlt(r, alt)
	}
	return []elem{{kind: kRule, arg: r}}
}

// setElem returns a byte element for set, sharing equal sets.
func (p *parser) setElem(s byteSet) elem {
	for i, o := range p.g.sets {
		if o == s {
			return elem{kind: kByte, arg: int32(i)}
		}
	}
	p.g.sets = append(p.g.sets, s)
	return elem{kind: kByte, arg: int32(len(p.g.sets) - 1)}
}

// check finds undefined rules and left recursion, and sets the root.
func (p *parser) check() {
	root, ok := p.ids["root"]
	if !ok || !p.defined[root] {
		p.fail(len(p.src), "grammar does not define root")
		return
	}
	p.g.root = root
	for id, name := range p.g.names {
		if name != "" && !p.defined[int32(id)] {
			p.fail(p.firstAt[int32(id)], "undefined rule %s", quote.String(name))
			return
		}
	}
	g := p.g
	// nullable rules, by fixpoint.
	nullable := make([]bool, len(g.rules))
	for changed := true; changed; {
		changed = false
		for r, alts := range g.rules {
			if nullable[r] {
				continue
			}
			for _, a := range alts {
				if g.nullableFrom(a, nullable) {
					nullable[r], changed = true, true
					break
				}
			}
		}
	}
	// Left recursion: a rule that reaches itself through leftmost references, each preceded only
	// by nullable elements. The matcher would expand it forever.
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(g.rules))
	cycle := int32(-1) // a rule on the cycle found
	var visit func(r int32) bool
	visit = func(r int32) bool {
		color[r] = grey
		for _, a := range g.rules[r] {
			for i := a; g.elems[i].kind == kRule; i++ {
				s := g.elems[i].arg
				if color[s] == grey {
					cycle = s
					return false
				}
				if color[s] == white && !visit(s) {
					return false
				}
				if !nullable[s] {
					break
				}
			}
		}
		color[r] = black
		return true
	}
	for r := range g.rules {
		if color[r] == white && !visit(int32(r)) {
			name := g.names[cycle]
			if name == "" {
				name = "a group"
			}
			p.fail(0, "left recursion: rule %s can reach itself without consuming input", quote.String(name))
			return
		}
	}
}

// tokenRef parses a token reference, <[id]> or !<[id]>, as llama.cpp does. A reference by the
// token's text (<think>) needs the vocabulary, which a Grammar does not have: it is refused.
func (p *parser) tokenRef() (elem, bool) {
	start := p.pos
	e := elem{kind: kToken}
	if p.src[p.pos] == '!' {
		e.kind = kTokenNot
		p.pos++
	}
	rest := p.src[p.pos:]
	if !strings.HasPrefix(rest, "<") {
		p.fail(start, "expected <[id]> after !, found %s", p.found())
		return e, false
	}
	if !strings.HasPrefix(rest, "<[") {
		p.fail(start, "token references by text (<...>) are not supported: write the token's id, <[id]>")
		return e, false
	}
	end := strings.Index(rest, "]>")
	digits := ""
	if end > 2 {
		digits = rest[2:end]
	}
	id, err := strconv.ParseInt(digits, 10, 32)
	if err != nil || id < 0 || strings.TrimLeft(digits, "0123456789") != "" {
		p.fail(start, "token reference %s: expected <[id]> with a token id of 0 to %d", quote.String(strings.SplitN(rest, ">", 2)[0]+">"), math.MaxInt32)
		return e, false
	}
	e.arg = int32(id)
	p.pos += end + 2
	return e, true
}

// nullableFrom reports whether the elements from position a to the end of its alternative can
// match the empty string.
func (g *Grammar) nullableFrom(a int32, nullable []bool) bool {
	for i := a; ; i++ {
		switch e := g.elems[i]; e.kind {
		case kEnd:
			return true
		case kByte, kToken, kTokenNot:
			return false
		case kRule:
			if !nullable[e.arg] {
				return false
			}
		}
	}
}
