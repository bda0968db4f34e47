package jinja

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// bounded is a string builder bounded by MaxValueBytes that counts what
// it writes as steps.
type bounded struct {
	b   strings.Builder
	r   *renderer
	err error
}

func (w *bounded) WriteString(s string) {
	if w.err != nil {
		return
	}
	if int64(w.b.Len())+int64(len(s)) > w.r.lim.MaxValueBytes {
		w.err = &LimitError{Limit: "MaxValueBytes", Value: w.r.lim.MaxValueBytes}
		return
	}
	if err := w.r.charge(1 + int64(len(s))/4096); err != nil {
		w.err = err
		return
	}
	w.b.WriteString(s)
}

func (w *bounded) result() (string, error) {
	if w.err != nil {
		return "", w.err
	}
	if err := w.r.account(int64(w.b.Len())); err != nil {
		return "", err
	}
	return w.b.String(), nil
}

// str is Python's str(v), as Jinja prints a value.
func (r *renderer) str(v Value) (string, error) {
	switch v.kind {
	case KindString:
		return v.s, nil
	case KindUndefined:
		return "", nil
	case KindInt:
		return strconv.FormatInt(v.i, 10), nil
	}
	w := &bounded{r: r}
	r.repr(w, v, 0, false)
	return w.result()
}

// repr writes Python's repr(v) (str(v) at the top when !quote).
func (r *renderer) repr(w *bounded, v Value, depth int64, quote bool) {
	if depth > r.lim.MaxValueDepth {
		if w.err == nil {
			w.err = r.depthError()
		}
		return
	}
	if w.err != nil {
		return
	}
	switch v.kind {
	case KindUndefined:
		if quote {
			w.WriteString("Undefined")
		}
	case KindNone:
		w.WriteString("None")
	case KindBool:
		if v.i != 0 {
			w.WriteString("True")
		} else {
			w.WriteString("False")
		}
	case KindInt:
		w.WriteString(strconv.FormatInt(v.i, 10))
	case KindFloat:
		w.WriteString(formatFloat(v.f))
	case KindString:
		if quote {
			w.WriteString(pyQuote(v.s))
		} else {
			w.WriteString(v.s)
		}
	case KindList:
		l := v.p.(*List)
		open, close := "[", "]"
		if l.tuple {
			open, close = "(", ")"
		}
		w.WriteString(open)
		for i, it := range l.Items {
			if i > 0 {
				w.WriteString(", ")
			}
			r.repr(w, it, depth+1, true)
		}
		if l.tuple && len(l.Items) == 1 {
			w.WriteString(",")
		}
		w.WriteString(close)
	case KindDict:
		d := v.p.(*Dict)
		if d.namespace {
			w.WriteString("<Namespace ")
		}
		w.WriteString("{")
		for i, k := range d.keys {
			if i > 0 {
				w.WriteString(", ")
			}
			r.repr(w, k, depth+1, true)
			w.WriteString(": ")
			r.repr(w, d.vals[i], depth+1, true)
		}
		w.WriteString("}")
		if d.namespace {
			w.WriteString(">")
		}
	case KindFunc:
		w.WriteString("<function " + v.p.(*Func).Name + ">")
	}
}

// pyQuote is Python's repr of a string.
func pyQuote(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, c := range s {
		switch {
		case c == rune(q) || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(hex2(int(c)))
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte(q)
	return b.String()
}

func hex2(c int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4&15], digits[c&15]})
}

// jsonOptions are tojson's arguments (transformers' tojson is
// json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
// sort_keys=sort_keys)).
type jsonOptions struct {
	indent          string
	hasIndent       bool
	itemSep, keySep string
	sortKeys        bool
	ensureASCII     bool
}

func (r *renderer) toJSON(v Value, o jsonOptions) (string, error) {
	w := &bounded{r: r}
	if err := r.writeJSON(w, v, o, 0); err != nil {
		return "", err
	}
	return w.result()
}

func (r *renderer) writeJSON(w *bounded, v Value, o jsonOptions, depth int64) error {
	if depth > r.lim.MaxValueDepth {
		return r.depthError()
	}
	if w.err != nil {
		return w.err
	}
	newline := func(d int64) {
		if o.hasIndent {
			w.WriteString("\n")
			for i := int64(0); i < d && w.err == nil; i++ {
				w.WriteString(o.indent)
			}
		}
	}
	switch v.kind {
	case KindUndefined, KindNone:
		w.WriteString("null")
	case KindBool:
		if v.i != 0 {
			w.WriteString("true")
		} else {
			w.WriteString("false")
		}
	case KindInt:
		w.WriteString(strconv.FormatInt(v.i, 10))
	case KindFloat:
		switch {
		case math.IsNaN(v.f):
			w.WriteString("NaN")
		case math.IsInf(v.f, 1):
			w.WriteString("Infinity")
		case math.IsInf(v.f, -1):
			w.WriteString("-Infinity")
		default:
			w.WriteString(formatFloat(v.f))
		}
	case KindString:
		w.WriteString(jsonQuote(v.s, o.ensureASCII))
	case KindList:
		items := v.p.(*List).Items
		if len(items) == 0 {
			w.WriteString("[]")
			break
		}
		w.WriteString("[")
		for i, it := range items {
			if i > 0 {
				w.WriteString(o.itemSep)
			}
			newline(depth + 1)
			if err := r.writeJSON(w, it, o, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		w.WriteString("]")
	case KindDict:
		d := v.p.(*Dict)
		if len(d.keys) == 0 {
			w.WriteString("{}")
			break
		}
		order := make([]int, len(d.keys))
		for i := range order {
			order[i] = i
		}
		if o.sortKeys {
			if err := r.sortIndices(order, func(i int) Value { return d.keys[i] }, false); err != nil {
				return err
			}
		}
		w.WriteString("{")
		for n, i := range order {
			if n > 0 {
				w.WriteString(o.itemSep)
			}
			newline(depth + 1)
			k := d.keys[i]
			switch k.kind {
			case KindString:
				w.WriteString(jsonQuote(k.s, o.ensureASCII))
			case KindNone:
				w.WriteString(`"null"`)
			default:
				var kb bounded
				kb.r = r
				if err := r.writeJSON(&kb, k, o, depth+1); err != nil {
					return err
				}
				w.WriteString(`"` + kb.b.String() + `"`)
			}
			w.WriteString(o.keySep)
			if err := r.writeJSON(w, d.vals[i], o, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		w.WriteString("}")
	default:
		return newError(0, "Object of type %s is not JSON serializable", typeName(v))
	}
	return w.err
}

// jsonQuote is json.dumps of a string.
func jsonQuote(s string, ensureASCII bool) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			default:
				if c < 0x20 || c == 0x7f && ensureASCII {
					b.WriteString(`\u00`)
					b.WriteString(hex2(int(c)))
				} else {
					b.WriteByte(c)
				}
			}
			i++
			continue
		}
		ru, n := utf8.DecodeRuneInString(s[i:])
		if ensureASCII {
			if ru >= 0x10000 {
				r1, r2 := (ru-0x10000)>>10+0xd800, ru&0x3ff+0xdc00
				b.WriteString(`\u` + hex4(int(r1)) + `\u` + hex4(int(r2)))
			} else {
				b.WriteString(`\u` + hex4(int(ru)))
			}
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	b.WriteByte('"')
	return b.String()
}

func hex4(c int) string { return hex2(c>>8) + hex2(c&0xff) }
