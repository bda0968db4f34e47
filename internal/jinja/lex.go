package jinja

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokType uint8

const (
	tokText tokType = iota
	tokVarBegin
	tokVarEnd
	tokBlockBegin
	tokBlockEnd
	tokName
	tokString
	tokInt
	tokFloat
	tokOp
	tokEOF
)

type token struct {
	typ  tokType
	val  string
	line int
	// i and f hold a number literal's value.
	i int64
	f float64
}

// lexer turns a template's source into tokens in one pass, applying
// whitespace control as transformers' Jinja environment does
// (trim_blocks and lstrip_blocks on, a trailing newline dropped).
type lexer struct {
	src          string
	pos, line    int
	toks         []token
	maxNesting   int64
	lineStarting bool
}

func lex(src string, maxNesting int64) ([]token, error) {
	src = normalizeNewlines(src)
	lx := &lexer{src: src, line: 1, maxNesting: maxNesting, lineStarting: true}
	if err := lx.run(); err != nil {
		return nil, err
	}
	lx.toks = append(lx.toks, token{typ: tokEOF, line: lx.line})
	return lx.toks, nil
}

// normalizeNewlines does what Jinja's lexer does to the source: it joins
// Python's splitlines() with "\n", which also drops one trailing newline.
func normalizeNewlines(src string) string {
	if strings.ContainsAny(src, "\r\v\f\x1c\x1d\x1e\u0085\u2028\u2029") {
		var b strings.Builder
		for i := 0; i < len(src); {
			r, n := utf8.DecodeRuneInString(src[i:])
			switch r {
			case '\r':
				b.WriteByte('\n')
				if i+1 < len(src) && src[i+1] == '\n' {
					n = 2
				}
			case '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
				b.WriteByte('\n')
			default:
				b.WriteString(src[i : i+n])
			}
			i += n
		}
		src = b.String()
	}
	return strings.TrimSuffix(src, "\n")
}

func (lx *lexer) errorf(format string, args ...any) error {
	return newError(lx.line, format, args...)
}

func (lx *lexer) emitText(s string) {
	if s != "" {
		lx.toks = append(lx.toks, token{typ: tokText, val: s, line: lx.line})
	}
	lx.line += strings.Count(s, "\n")
}

// nextTag finds the next "{{", "{%" or "{#" at or after pos.
func (lx *lexer) nextTag(pos int) int {
	for {
		i := strings.IndexByte(lx.src[pos:], '{')
		if i < 0 || pos+i+1 >= len(lx.src) {
			return -1
		}
		j := pos + i
		switch lx.src[j+1] {
		case '{', '%', '#':
			return j
		}
		pos = j + 1
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// leftStrip applies a tag's left whitespace control to the text before it.
func (lx *lexer) leftStrip(text string, kind byte, mod byte) string {
	if mod == '-' {
		return strings.TrimRightFunc(text, func(r rune) bool { return r < 128 && isSpace(byte(r)) })
	}
	if kind == '{' || mod == '+' {
		return text
	}
	lpos := strings.LastIndexByte(text, '\n') + 1
	if lpos > 0 || lx.lineStarting {
		if strings.Trim(text[lpos:], " \t") == "" {
			return text[:lpos]
		}
	}
	return text
}

// rightStrip consumes the whitespace after a tag's end at pos.
func (lx *lexer) rightStrip(pos int, mod byte, trim bool) int {
	start := pos
	switch {
	case mod == '-':
		for pos < len(lx.src) && isSpace(lx.src[pos]) {
			pos++
		}
	case trim && mod != '+' && pos < len(lx.src) && lx.src[pos] == '\n':
		pos++
	}
	lx.line += strings.Count(lx.src[start:pos], "\n")
	lx.lineStarting = pos > start && lx.src[pos-1] == '\n'
	return pos
}

func (lx *lexer) run() error {
	for lx.pos < len(lx.src) {
		j := lx.nextTag(lx.pos)
		if j < 0 {
			lx.emitText(lx.src[lx.pos:])
			return nil
		}
		kind := lx.src[j+1]
		var mod byte
		body := j + 2
		if body < len(lx.src) && (lx.src[body] == '-' || lx.src[body] == '+') {
			mod = lx.src[body]
			body++
		}
		lx.emitText(lx.leftStrip(lx.src[lx.pos:j], kind, mod))
		switch kind {
		case '#':
			end := strings.Index(lx.src[body:], "#}")
			if end < 0 {
				return lx.errorf("unclosed comment")
			}
			end += body
			var rmod byte
			if end > body && (lx.src[end-1] == '-' || lx.src[end-1] == '+') {
				rmod = lx.src[end-1]
			}
			lx.line += strings.Count(lx.src[body:end], "\n")
			lx.pos = lx.rightStrip(end+2, rmod, true)
		case '%':
			if n, ok := lx.raw(body); ok {
				if err := lx.readRaw(n); err != nil {
					return err
				}
				continue
			}
			if err := lx.tag(body, tokBlockBegin, tokBlockEnd, "%}"); err != nil {
				return err
			}
		default:
			if err := lx.tag(body, tokVarBegin, tokVarEnd, "}}"); err != nil {
				return err
			}
		}
	}
	return nil
}

// raw reports whether a block tag whose body starts at pos is
// {% raw %}, and where its end is.
func (lx *lexer) raw(pos int) (int, bool) {
	p := pos
	for p < len(lx.src) && isSpace(lx.src[p]) {
		p++
	}
	if !strings.HasPrefix(lx.src[p:], "raw") {
		return 0, false
	}
	p += 3
	for p < len(lx.src) && isSpace(lx.src[p]) {
		p++
	}
	if strings.HasPrefix(lx.src[p:], "-%}") {
		return p, true
	}
	if strings.HasPrefix(lx.src[p:], "%}") {
		return p, true
	}
	return 0, false
}

// readRaw reads a raw block's text from the end of its start tag at pos
// to its {% endraw %}.
func (lx *lexer) readRaw(pos int) error {
	var mod byte
	if lx.src[pos] == '-' {
		mod = '-'
		pos++
	}
	lx.line += strings.Count(lx.src[lx.pos:pos], "\n")
	start := lx.rightStrip(pos+2, mod, false)
	for p := start; ; {
		j := strings.Index(lx.src[p:], "{%")
		if j < 0 {
			return lx.errorf("unclosed raw block")
		}
		j += p
		q := j + 2
		var lmod byte
		if q < len(lx.src) && (lx.src[q] == '-' || lx.src[q] == '+') {
			lmod = lx.src[q]
			q++
		}
		for q < len(lx.src) && isSpace(lx.src[q]) {
			q++
		}
		if !strings.HasPrefix(lx.src[q:], "endraw") {
			p = j + 2
			continue
		}
		q += 6
		for q < len(lx.src) && isSpace(lx.src[q]) {
			q++
		}
		var rmod byte
		if q < len(lx.src) && (lx.src[q] == '-' || lx.src[q] == '+') {
			rmod = lx.src[q]
			q++
		}
		if !strings.HasPrefix(lx.src[q:], "%}") {
			p = j + 2
			continue
		}
		lx.emitText(lx.leftStrip(lx.src[start:j], '%', lmod))
		lx.line += strings.Count(lx.src[j:q], "\n")
		lx.pos = lx.rightStrip(q+2, rmod, true)
		return nil
	}
}

var operators = []string{"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "(", ")", "[", "]", "{", "}", ",", ":", ".", "|", "=", "<", ">"}

// tag reads the tokens of an expression or block tag whose body starts at
// pos, up to its end delimiter.
func (lx *lexer) tag(pos int, begin, end tokType, closer string) error {
	lx.toks = append(lx.toks, token{typ: begin, line: lx.line})
	var depth int64
	src := lx.src
	for {
		for pos < len(src) && isSpace(src[pos]) {
			if src[pos] == '\n' {
				lx.line++
			}
			pos++
		}
		if pos >= len(src) {
			return lx.errorf("unclosed tag: expected %q", closer)
		}
		if depth == 0 {
			if strings.HasPrefix(src[pos:], closer) {
				lx.toks = append(lx.toks, token{typ: end, line: lx.line})
				lx.pos = lx.rightStrip(pos+2, 0, end == tokBlockEnd)
				return nil
			}
			if (src[pos] == '-' || src[pos] == '+') && strings.HasPrefix(src[pos+1:], closer) {
				lx.toks = append(lx.toks, token{typ: end, line: lx.line})
				lx.pos = lx.rightStrip(pos+3, src[pos], end == tokBlockEnd)
				return nil
			}
		}
		c := src[pos]
		switch {
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			q := pos + 1
			for q < len(src) && (src[q] == '_' || src[q] >= 'a' && src[q] <= 'z' || src[q] >= 'A' && src[q] <= 'Z' || src[q] >= '0' && src[q] <= '9') {
				q++
			}
			lx.toks = append(lx.toks, token{typ: tokName, val: src[pos:q], line: lx.line})
			pos = q
		case c >= '0' && c <= '9':
			q, err := lx.number(pos)
			if err != nil {
				return err
			}
			pos = q
		case c == '\'' || c == '"':
			q, err := lx.str(pos)
			if err != nil {
				return err
			}
			pos = q
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(src[pos:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return lx.errorf("unexpected character %q", c)
			}
			switch op {
			case "(", "[", "{":
				depth++
				if depth > lx.maxNesting {
					return &LimitError{Limit: "MaxNesting", Value: lx.maxNesting}
				}
			case ")", "]", "}":
				if depth > 0 {
					depth--
				}
			}
			lx.toks = append(lx.toks, token{typ: tokOp, val: op, line: lx.line})
			pos += len(op)
		}
	}
}

func (lx *lexer) number(pos int) (int, error) {
	src := lx.src
	q := pos
	digits := func() {
		for q < len(src) && (src[q] >= '0' && src[q] <= '9' || src[q] == '_' && q+1 < len(src) && src[q+1] >= '0' && src[q+1] <= '9') {
			q++
		}
	}
	digits()
	isFloat := false
	if q+1 < len(src) && src[q] == '.' && src[q+1] >= '0' && src[q+1] <= '9' {
		isFloat = true
		q++
		digits()
	}
	if q < len(src) && (src[q] == 'e' || src[q] == 'E') {
		r := q + 1
		if r < len(src) && (src[r] == '+' || src[r] == '-') {
			r++
		}
		if r < len(src) && src[r] >= '0' && src[r] <= '9' {
			isFloat = true
			q = r
			digits()
		}
	}
	text := strings.ReplaceAll(src[pos:q], "_", "")
	t := token{line: lx.line, val: text}
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !isRangeErr(err) {
			return 0, lx.errorf("bad number %q", text)
		}
		t.typ, t.f = tokFloat, f
	} else {
		i, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return 0, lx.errorf("integer literal %.40q out of the 64-bit range", text)
		}
		t.typ, t.i = tokInt, i
	}
	lx.toks = append(lx.toks, t)
	return q, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// str reads a string literal with Python's escapes.
func (lx *lexer) str(pos int) (int, error) {
	src := lx.src
	quote := src[pos]
	var b strings.Builder
	q := pos + 1
	for {
		if q >= len(src) {
			return 0, lx.errorf("unterminated string")
		}
		c := src[q]
		if c == quote {
			break
		}
		if c == '\n' {
			lx.line++
		}
		if c != '\\' || q+1 >= len(src) {
			b.WriteByte(c)
			q++
			continue
		}
		e := src[q+1]
		q += 2
		switch e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case '0':
			b.WriteByte(0)
		case '\n':
			lx.line++
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if q+n > len(src) {
				return 0, lx.errorf("bad \\%c escape", e)
			}
			r, err := strconv.ParseUint(src[q:q+n], 16, 32)
			if err != nil || r > utf8.MaxRune {
				return 0, lx.errorf("bad \\%c escape", e)
			}
			b.WriteRune(rune(r))
			q += n
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	lx.toks = append(lx.toks, token{typ: tokString, val: b.String(), line: lx.line})
	return q + 1, nil
}
