package grammar

import (
	"errors"
	"fmt"
	"github.com/llamaloop/llamaloop/internal/quote"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode/utf16"
)

// ecmaSpace is what \s matches in ECMA-262: white space and line terminators.
const ecmaSpace = `\t\n\x0B\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`

// ecmaToGo rewrites an ECMA-262 regular expression (Unicode mode) in Go's syntax, where the two
// mean the same, and refuses what differs or what the grammar cannot express: lookarounds,
// backreferences, named groups, flags, \p classes, \b, \cX, [] and [^].
func ecmaToGo(p string) (string, error) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); {
		ch := p[i]
		switch {
		case ch == '\\':
			if i+1 >= len(p) {
				return "", errors.New("a backslash at the end")
			}
			e := p[i+1]
			switch {
			case e == 'u':
				cp, n, err := ecmaUnicode(p, i)
				if err != nil {
					return "", err
				}
				fmt.Fprintf(&b, `\x{%x}`, cp)
				i += n
				continue
			case e == 'x':
				if i+4 > len(p) {
					return "", errors.New(`\x needs two hex digits`)
				}
				if _, ok := hexValue(p[i+2 : i+4]); !ok || p[i+2] == '+' || p[i+2] == '-' {
					return "", errors.New(`\x needs two hex digits`)
				}
				b.WriteString(p[i : i+4])
				i += 4
				continue
			case e == 's':
				if inClass {
					b.WriteString(ecmaSpace)
				} else {
					b.WriteString("[" + ecmaSpace + "]")
				}
			case e == 'S':
				if inClass {
					return "", errors.New(`\S inside a character class is not supported`)
				}
				b.WriteString("[^" + ecmaSpace + "]")
			case strings.IndexByte("dDwWtnrfv", e) >= 0:
				b.WriteString(p[i : i+2])
			case e == 'b' && inClass:
				b.WriteString(`\x08`)
			case e == '0' && (i+2 >= len(p) || p[i+2] < '0' || p[i+2] > '9'):
				b.WriteString(`\x00`)
			case e >= '0' && e <= '9':
				return "", errors.New("backreferences are not supported")
			case e == 'b' || e == 'B':
				return "", errors.New(`word boundaries (\b, \B) are not supported`)
			case e < 0x80 && (e >= 'a' && e <= 'z' || e >= 'A' && e <= 'Z'):
				return "", fmt.Errorf(`the escape \%c is not supported`, e)
			case e >= 0x80:
				return "", errors.New("a backslash before a non-ASCII character")
			default:
				b.WriteString(p[i : i+2])
			}
			i += 2
			continue
		case ch == '[' && !inClass:
			inClass = true
			b.WriteByte('[')
			i++
			if i < len(p) && p[i] == '^' {
				b.WriteByte('^')
				i++
			}
			if i < len(p) && p[i] == ']' {
				return "", errors.New("the empty classes [] and [^] are not supported")
			}
			continue
		case ch == '[' && inClass:
			if i+1 < len(p) && (p[i+1] == ':' || p[i+1] == '=' || p[i+1] == '.') {
				return "", errors.New("[: [= [. inside a character class are not supported")
			}
			b.WriteString(`\[`)
			i++
			continue
		case ch == ']' && inClass:
			inClass = false
		case ch == '(' && !inClass && i+1 < len(p) && p[i+1] == '?':
			if i+2 >= len(p) || p[i+2] != ':' {
				return "", errors.New("(?...) groups other than (?:...) are not supported (lookarounds, named groups, flags)")
			}
		}
		b.WriteByte(ch)
		i++
	}
	return b.String(), nil
}

// hexValue is the value of the hexadecimal digits s.
func hexValue(s string) (int, bool) {
	v, err := strconv.ParseUint(s, 16, 32)
	return int(v), err == nil
}

// ecmaUnicode decodes the \u escape at p[i:] (\uXXXX, a surrogate pair of two, or \u{X...}):
// its code point and its length in p.
func ecmaUnicode(p string, i int) (cp, n int, err error) {
	if i+2 < len(p) && p[i+2] == '{' {
		end := strings.IndexByte(p[i:], '}')
		v, ok := 0, false
		if end > 3 {
			v, ok = hexValue(p[i+3 : i+end])
		}
		if !ok || v > 0x10FFFF {
			return 0, 0, fmt.Errorf("bad escape %q", p[i:min(len(p), i+8)])
		}
		cp, n = v, end+1
	} else {
		v, ok := 0, false
		if i+6 <= len(p) {
			v, ok = hexValue(p[i+2 : i+6])
		}
		if !ok {
			return 0, 0, fmt.Errorf("bad escape %q", p[i:min(len(p), i+6)])
		}
		cp, n = v, 6
		if utf16.IsSurrogate(rune(v)) {
			lo := 0
			if i+12 <= len(p) && p[i+6] == '\\' && p[i+7] == 'u' {
				lo, ok = hexValue(p[i+8 : i+12])
			}
			r := utf16.DecodeRune(rune(v), rune(lo))
			if !ok || r == 0xFFFD {
				return 0, 0, fmt.Errorf("a lone surrogate escape %q", p[i:i+6])
			}
			cp, n = int(r), 12
		}
	}
	if utf16.IsSurrogate(rune(cp)) {
		return 0, 0, fmt.Errorf("a lone surrogate escape %q", p[i:i+n])
	}
	return cp, n, nil
}

// pattern returns a GBNF expression for the contents of the JSON strings that match the
// ECMA-262 regular expression pat and have lo to hi code points (hi < 0: unbounded). "" when none
// has. The pattern is not anchored unless it starts with ^ or ends with $, as JSON Schema says.
func (c *converter) pattern(pat string, lo, hi int, path string) (string, error) {
	src, err := ecmaToGo(pat)
	if err != nil {
		return "", fail(path, "pattern", "pattern %s: %v", quote.String(pat), err)
	}
	re, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return "", fail(path, "pattern", "pattern %s: %v", quote.String(pat), err)
	}
	branches := []*syntax.Regexp{re}
	if re.Op == syntax.OpAlternate {
		branches = re.Sub
	}
	var alts []string
	for _, br := range branches {
		parts := []*syntax.Regexp{br}
		if br.Op == syntax.OpConcat {
			parts = br.Sub
		}
		begin := len(parts) > 0 && parts[0].Op == syntax.OpBeginText
		if begin {
			parts = parts[1:]
		}
		end := len(parts) > 0 && parts[len(parts)-1].Op == syntax.OpEndText
		if end {
			parts = parts[:len(parts)-1]
		}
		if lo > 0 || hi >= 0 {
			// The free ends of a pattern that is not anchored count towards the length: any
			// characters, as OpAnyChar (which no pattern yields, for "(?s)" is refused).
			pad := &syntax.Regexp{Op: syntax.OpStar, Sub: []*syntax.Regexp{{Op: syntax.OpAnyChar}}}
			if !begin {
				parts = append([]*syntax.Regexp{pad}, parts...)
			}
			if !end {
				parts = append(parts[:len(parts):len(parts)], pad)
			}
			begin, end = true, true
		}
		core := &syntax.Regexp{Op: syntax.OpConcat, Sub: parts}
		if lo > 0 || hi >= 0 {
			folded, ok, none := foldLength(core, lo, hi)
			switch {
			case none:
				continue
			case ok:
				core = folded
			default:
				// The general way: the pattern's automaton times a count of code points.
				e, err := c.countedPattern(core, lo, hi)
				if err != nil {
					return "", fail(path, lengthKeyword(lo), "pattern %s with minLength %d and maxLength %d: %v", quote.String(pat), lo, hi, err)
				}
				if e != "" {
					alts = append(alts, e)
				}
				continue
			}
		}
		e, err := regexpToGBNF(core)
		if err != nil {
			return "", fail(path, "pattern", "pattern %s: %v", quote.String(pat), err)
		}
		if !begin {
			e = "char* " + e
		}
		if !end {
			e += " char*"
		}
		alts = append(alts, e)
	}
	switch len(alts) {
	case 0:
		return "", nil
	case 1:
		return alts[0], nil
	}
	return "(" + strings.Join(alts, " | ") + ")", nil
}

func lengthKeyword(lo int) string {
	if lo > 0 {
		return "minLength"
	}
	return "maxLength"
}

// runeLen returns the least and most code points that re matches (hi < 0: unbounded).
func runeLen(re *syntax.Regexp) (lo, hi int) {
	add := func(a, b int) int {
		if a < 0 || b < 0 {
			return -1
		}
		return a + b
	}
	mul := func(a, n int) int {
		if a < 0 || n < 0 {
			if a == 0 || n == 0 {
				return 0
			}
			return -1
		}
		return a * n
	}
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune), len(re.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1, 1
	case syntax.OpCapture:
		return runeLen(re.Sub[0])
	case syntax.OpConcat:
		for _, s := range re.Sub {
			a, b := runeLen(s)
			lo, hi = lo+a, add(hi, b)
		}
		return lo, hi
	case syntax.OpAlternate:
		for i, s := range re.Sub {
			a, b := runeLen(s)
			if i == 0 {
				lo, hi = a, b
				continue
			}
			lo = min(lo, a)
			if hi >= 0 && (b < 0 || b > hi) {
				hi = b
			}
		}
		return lo, hi
	case syntax.OpStar:
		_, b := runeLen(re.Sub[0])
		return 0, mul(b, -1)
	case syntax.OpPlus:
		a, b := runeLen(re.Sub[0])
		return a, mul(b, -1)
	case syntax.OpQuest:
		_, b := runeLen(re.Sub[0])
		return 0, b
	case syntax.OpRepeat:
		a, b := runeLen(re.Sub[0])
		return a * re.Min, mul(b, re.Max)
	}
	return 0, 0
}

// foldLength returns re restricted to lo to hi code points, where that is expressible: when re
// already lies within them, or has one part of variable length, a repetition of an item of
// fixed length, whose count can be bounded instead. none: no string of re has such a length.
func foldLength(re *syntax.Regexp, lo, hi int) (out *syntax.Regexp, ok, none bool) {
	mn, mx := runeLen(re)
	if mn >= lo && hi < 0 || mn >= lo && mx >= 0 && mx <= hi {
		return re, true, false
	}
	if mx >= 0 && mx < lo || hi >= 0 && mn > hi {
		return nil, false, true
	}
	parts := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		parts = re.Sub
	}
	fixed, at := 0, -1
	for i, p := range parts {
		a, b := runeLen(p)
		switch {
		case a == b:
			fixed += a
		case at < 0:
			at = i
		default:
			return nil, false, false
		}
	}
	if at < 0 {
		return nil, false, false
	}
	rep := parts[at]
	for rep.Op == syntax.OpCapture {
		rep = rep.Sub[0]
	}
	rmin, rmax := 0, -1
	switch rep.Op {
	case syntax.OpStar:
	case syntax.OpPlus:
		rmin = 1
	case syntax.OpQuest:
		rmax = 1
	case syntax.OpRepeat:
		rmin, rmax = rep.Min, rep.Max
	default:
		return nil, false, false
	}
	k, kmax := runeLen(rep.Sub[0])
	if k != kmax || k == 0 {
		return nil, false, false
	}
	// lo <= fixed + k*n <= hi
	nmin, nmax := rmin, rmax
	if need := lo - fixed; need > 0 {
		nmin = max(nmin, (need+k-1)/k)
	}
	if hi >= 0 {
		room := hi - fixed
		if room < 0 {
			return nil, false, true
		}
		if nmax < 0 || room/k < nmax {
			nmax = room / k
		}
	}
	if nmax >= 0 && nmin > nmax {
		return nil, false, true
	}
	sub := make([]*syntax.Regexp, len(parts))
	copy(sub, parts)
	sub[at] = &syntax.Regexp{Op: syntax.OpRepeat, Min: nmin, Max: nmax, Sub: []*syntax.Regexp{rep.Sub[0]}}
	return &syntax.Regexp{Op: syntax.OpConcat, Sub: sub}, true, false
}

// regexpToGBNF converts a regular expression to a GBNF expression over the characters of a JSON
// string's content: a character that JSON escapes is matched in its jsonQuote spelling, the
// others as themselves. "." matches no line terminator (\n, \r, U+2028, U+2029), as in ECMA-262.
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
		return literal(strings.Join(jsonUnits(string(re.Rune)), "")), nil
	case syntax.OpCharClass:
		return classExpr(re.Rune)
	case syntax.OpAnyChar:
		// The free end of a pattern that is not anchored, bounded by minLength or maxLength: any
		// character, an escaped surrogate pair counting as one.
		return "(" + lenChar + ")", nil
	case syntax.OpAnyCharNotNL:
		return anyNotNL, nil
	case syntax.OpCapture:
		// No group of its own: a generated rule per group would deepen every stack.
		return regexpToGBNF(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		s, err := sub()
		if err != nil {
			return "", err
		}
		op := map[syntax.Op]string{syntax.OpStar: "*", syntax.OpPlus: "+", syntax.OpQuest: "?"}[re.Op]
		if re.Op == syntax.OpRepeat {
			if re.Max == 0 {
				return `""`, nil
			}
			op = repeatSuffix(re.Min, re.Max)
		}
		if atomic(re.Sub[0]) {
			return s[0] + op, nil
		}
		return "(" + s[0] + ")" + op, nil
	case syntax.OpConcat:
		if len(re.Sub) == 0 {
			return `""`, nil
		}
		s, err := sub()
		if err != nil {
			return "", err
		}
		return strings.Join(s, " "), nil // a sequence binds tighter than |, and repetitions group it
	case syntax.OpAlternate:
		s, err := sub()
		if err != nil {
			return "", err
		}
		return "(" + strings.Join(s, " | ") + ")", nil
	case syntax.OpBeginText, syntax.OpEndText, syntax.OpBeginLine, syntax.OpEndLine:
		return "", errors.New("^ and $ are supported at the ends of the pattern (or of its top-level alternatives) only")
	}
	return "", fmt.Errorf("regular expression operator %v is not supported", re.Op)
}

// atomic reports whether the GBNF of re is one symbol, which a repetition may follow without
// a group (and the generated rule a group costs): a class, a literal, a group already.
func atomic(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL, syntax.OpLiteral, syntax.OpAlternate:
		return true
	case syntax.OpCapture:
		return atomic(re.Sub[0])
	}
	return false
}

// anyNotNL is ECMA-262's ".": any character but the line terminators.
const anyNotNL = `[^"\\\x7F\x00-\x1F\u2028\u2029]`

// classExpr returns the GBNF of one character of a string's content in the class of ranges (lo,
// hi pairs): the characters that JSON escapes in their jsonQuote spelling, the others as
// themselves.
func classExpr(ranges []rune) (string, error) {
	{
		var b strings.Builder
		var escaped []string
		b.WriteByte('[')
		n := 0
		for i := 0; i+1 < len(ranges); i += 2 {
			lo, hi := ranges[i], ranges[i+1]
			// The characters that JSON escapes become alternatives of their own.
			for r := lo; r <= min(hi, 0x7F); r++ {
				if r < 0x20 || r == '"' || r == '\\' || r == 0x7F {
					escaped = append(escaped, literal(jsonUnits(string(r))[0]))
				}
			}
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
		b.WriteByte(']')
		alts := escaped
		if n > 0 {
			alts = append([]string{b.String()}, escaped...)
		}
		if len(alts) == 0 {
			return "", errors.New("a character class that matches nothing")
		}
		if len(alts) == 1 {
			return alts[0], nil
		}
		return "(" + strings.Join(alts, " | ") + ")", nil
	}
}

// maxCountedStates bounds the rules of a pattern counted by code points.
const maxCountedStates = 20000

// countedPattern returns a rule for the strings of re (anchored at both ends, no anchors inside)
// that have lo to hi code points (hi < 0: unbounded): the product of the pattern's automaton
// (Go's compiled program) with a count of the code points taken so far, capped at lo when hi is
// open. One right-linear rule per pair of an instruction and a count; "" when no string of re
// has such a length.
func (c *converter) countedPattern(re *syntax.Regexp, lo, hi int) (string, error) {
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return "", err
	}
	a := &countedAutomaton{prog: prog, lo: lo, hi: hi, limit: hi, index: map[countedKey]int{}}
	if hi < 0 {
		a.limit = lo // past lo, every count is the same
	}
	if _, err := a.build(countedKey{prog.Start, 0}); err != nil {
		return "", err
	}
	live := a.live()
	if !live[0] {
		return "", nil
	}
	name := func(i int) string { return fmt.Sprintf("counted-%d-%d", c.n, i) }
	c.n++
	for i := range a.keys {
		if !live[i] {
			continue
		}
		var alts []string
		for _, s := range a.steps[i] {
			switch {
			case s.class == "":
				alts = append(alts, `""`)
			case live[a.index[s.next]]:
				alts = append(alts, s.class+" "+name(a.index[s.next]))
			}
		}
		c.rules[name(i)] = strings.Join(alts, " | ")
		c.order = append(c.order, name(i))
	}
	return name(0), nil
}

// countedKey is a state of the counted automaton: an instruction and a count of code points.
type countedKey struct{ pc, n int }

// countedStep is a transition: a character class to the next state, or the end of the string
// (class "").
type countedStep struct {
	class string
	next  countedKey
}

// countedAutomaton is the product of a compiled pattern with a count of code points, built
// from its start state; its states are numbered in the order they are reached.
type countedAutomaton struct {
	prog          *syntax.Prog
	lo, hi, limit int
	index         map[countedKey]int
	keys          []countedKey
	steps         [][]countedStep
}

// build adds the state k and every state reachable from it, and returns k's number.
func (a *countedAutomaton) build(k countedKey) (int, error) {
	if i, ok := a.index[k]; ok {
		return i, nil
	}
	if len(a.keys) >= maxCountedStates {
		return 0, fmt.Errorf("more than %d states", maxCountedStates)
	}
	i := len(a.keys)
	a.index[k] = i
	a.keys = append(a.keys, k)
	a.steps = append(a.steps, nil)
	insts, err := closure(a.prog, k.pc)
	if err != nil {
		return 0, err
	}
	for _, pc := range insts {
		in := a.prog.Inst[pc]
		if in.Op == syntax.InstMatch {
			if k.n >= a.lo {
				a.steps[i] = append(a.steps[i], countedStep{})
			}
			continue
		}
		if a.hi >= 0 && k.n >= a.hi {
			continue
		}
		class, err := instClass(in)
		if err != nil {
			return 0, err
		}
		next := countedKey{int(in.Out), min(k.n+1, a.limit)}
		if _, err := a.build(next); err != nil {
			return 0, err
		}
		a.steps[i] = append(a.steps[i], countedStep{class, next})
	}
	return i, nil
}

// live marks the states that can end the string, now or after some steps: a walk back from
// the states that can end it.
func (a *countedAutomaton) live() []bool {
	live := make([]bool, len(a.keys))
	preds := make([][]int, len(a.keys))
	var queue []int
	for i := range a.keys {
		for _, s := range a.steps[i] {
			if s.class == "" {
				if !live[i] {
					live[i] = true
					queue = append(queue, i)
				}
			} else {
				preds[a.index[s.next]] = append(preds[a.index[s.next]], i)
			}
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, p := range preds[i] {
			if !live[p] {
				live[p] = true
				queue = append(queue, p)
			}
		}
	}
	return live
}

// closure lists the instructions of prog that consume a character or match, reached from pc
// without consuming.
func closure(prog *syntax.Prog, pc int) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	var walk func(pc int) error
	walk = func(pc int) error {
		if seen[pc] {
			return nil
		}
		seen[pc] = true
		in := prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			if err := walk(int(in.Out)); err != nil {
				return err
			}
			return walk(int(in.Arg))
		case syntax.InstNop, syntax.InstCapture:
			return walk(int(in.Out))
		case syntax.InstEmptyWidth:
			return errors.New("^ and $ are supported at the ends of the pattern only")
		case syntax.InstFail:
			return nil
		}
		out = append(out, pc)
		return nil
	}
	return out, walk(pc)
}

// instClass is the character class that the consuming instruction in takes.
func instClass(in syntax.Inst) (string, error) {
	switch in.Op {
	case syntax.InstRune:
		if syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
			return "", errors.New("case-insensitive patterns are not supported")
		}
		return classExpr(in.Rune)
	case syntax.InstRune1:
		return classExpr([]rune{in.Rune[0], in.Rune[0]})
	case syntax.InstRuneAnyNotNL:
		return anyNotNL, nil
	case syntax.InstRuneAny:
		return "(" + lenChar + ")", nil
	}
	return "", fmt.Errorf("instruction %v is not supported", in.Op)
}
