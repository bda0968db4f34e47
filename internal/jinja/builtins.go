package jinja

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// test runs the test name (x is name(args)).
func (r *renderer) test(name string, v Value, a []Value, line int) (bool, error) {
	arg := func() (Value, error) {
		if len(a) == 0 {
			return Value{}, newError(line, "test %q needs an argument", name)
		}
		return a[0], nil
	}
	cmp := func(op string) (bool, error) {
		b, err := arg()
		if err != nil {
			return false, err
		}
		return r.compare(op, v, b, line)
	}
	switch name {
	case "defined":
		return v.kind != KindUndefined, nil
	case "undefined":
		return v.kind == KindUndefined, nil
	case "none":
		return v.kind == KindNone, nil
	case "string":
		return v.kind == KindString, nil
	case "number":
		return v.isNumber(), nil
	case "integer":
		return v.kind == KindInt, nil
	case "float":
		return v.kind == KindFloat, nil
	case "boolean":
		return v.kind == KindBool, nil
	case "true":
		return v.kind == KindBool && v.i == 1, nil
	case "false":
		return v.kind == KindBool && v.i == 0, nil
	case "mapping":
		return v.kind == KindDict, nil
	case "iterable":
		return v.kind == KindList || v.kind == KindDict || v.kind == KindString, nil
	case "sequence":
		return v.kind == KindList || v.kind == KindDict || v.kind == KindString, nil
	case "callable":
		return v.kind == KindFunc, nil
	case "odd", "even":
		if v.kind != KindInt && v.kind != KindBool {
			return false, newError(line, "test %q needs an integer", name)
		}
		return (v.i%2 != 0) == (name == "odd"), nil
	case "divisibleby":
		b, err := arg()
		if err != nil {
			return false, err
		}
		if v.kind != KindInt || b.kind != KindInt || b.i == 0 {
			return false, newError(line, "divisibleby needs integers, the divisor not 0")
		}
		if b.i == -1 {
			return true, nil
		}
		return v.i%b.i == 0, nil
	case "lower":
		return v.kind == KindString && strings.ToLower(v.s) == v.s, nil
	case "upper":
		return v.kind == KindString && strings.ToUpper(v.s) == v.s, nil
	case "in":
		b, err := arg()
		if err != nil {
			return false, err
		}
		return r.contains(b, v, line)
	case "eq", "equalto", "==":
		return cmp("==")
	case "ne", "!=":
		return cmp("!=")
	case "lt", "lessthan", "<":
		return cmp("<")
	case "gt", "greaterthan", ">":
		return cmp(">")
	case "le", "<=":
		return cmp("<=")
	case "ge", ">=":
		return cmp(">=")
	case "sameas":
		b, err := arg()
		if err != nil {
			return false, err
		}
		if v.kind != b.kind {
			return false, nil
		}
		switch v.kind {
		case KindList, KindDict, KindFunc:
			return v.p == b.p, nil
		}
		return r.equal(v, b, 0)
	case "escaped":
		return false, nil
	}
	return false, newError(line, "no test named %q", name)
}

// method calls obj.name(args) where obj's type has such a method; ok
// is false where it does not.
func (r *renderer) method(obj Value, name string, pos []Value, kw []Kwarg, line int) (Value, bool, error) {
	a := args{pos: pos, kw: kw}
	var v Value
	var err error
	switch obj.kind {
	case KindString:
		fn, ok := stringMethods[name]
		if !ok {
			return Value{}, false, nil
		}
		v, err = fn(r, obj.s, a)
	case KindDict:
		d := obj.p.(*Dict)
		if d.namespace {
			return Value{}, false, nil
		}
		if i, ok := d.Get("index0"); ok && name == "cycle" && len(pos) > 0 && i.kind == KindInt && i.i >= 0 { // loop.cycle
			return pos[i.i%int64(len(pos))], true, nil
		}
		fn, ok := dictMethods[name]
		if !ok {
			return Value{}, false, nil
		}
		v, err = fn(r, obj.p.(*Dict), a)
	case KindList:
		fn, ok := listMethods[name]
		if !ok {
			return Value{}, false, nil
		}
		l := obj.p.(*List)
		if l.tuple && name != "index" && name != "count" {
			return Value{}, true, newError(line, "'tuple' object has no attribute %q", name)
		}
		v, err = fn(r, l, a)
	default:
		return Value{}, false, nil
	}
	if e, ok := err.(*Error); ok && e.Line == 0 {
		e.Line = line
	}
	return v, true, err
}

type stringMethod func(r *renderer, s string, a args) (Value, error)

var stringMethods map[string]stringMethod

func strip(f func(string, string) string, g func(string) string) stringMethod {
	return func(r *renderer, s string, a args) (Value, error) {
		if err := r.scan(len(s)); err != nil {
			return Value{}, err
		}
		chars, ok, err := a.str(0, "chars", "")
		if err != nil {
			return Value{}, err
		}
		if ok {
			return NewString(f(s, chars)), nil
		}
		return NewString(g(s)), nil
	}
}

func affix(has func(string, string) bool) stringMethod {
	return func(r *renderer, s string, a args) (Value, error) {
		p, _ := a.get(0, "prefix")
		switch p.kind {
		case KindString:
			return NewBool(has(s, p.s)), nil
		case KindList:
			for _, x := range p.p.(*List).Items {
				if x.kind == KindString && has(s, x.s) {
					return NewBool(true), nil
				}
			}
			return NewBool(false), nil
		}
		return Value{}, newError(0, "startswith/endswith takes a string or a tuple of strings")
	}
}

func caseMethod(f func(string) string) stringMethod {
	return func(r *renderer, s string, a args) (Value, error) {
		if err := r.checkString(int64(len(s)) * 2); err != nil {
			return Value{}, err
		}
		return NewString(f(s)), nil
	}
}

func isMethod(pred func(rune) bool) stringMethod {
	return func(r *renderer, s string, a args) (Value, error) {
		if s == "" {
			return NewBool(false), nil
		}
		for _, c := range s {
			if !pred(c) {
				return NewBool(false), nil
			}
		}
		return NewBool(true), nil
	}
}

func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, c := range s {
		if unicode.IsLetter(c) {
			if prevCased {
				b.WriteRune(unicode.ToLower(c))
			} else {
				b.WriteRune(unicode.ToUpper(c))
			}
			prevCased = true
		} else {
			b.WriteRune(c)
			prevCased = false
		}
	}
	return b.String()
}

func init() {
	stringMethods = map[string]stringMethod{
		"strip":      strip(strings.Trim, strings.TrimSpace),
		"lstrip":     strip(strings.TrimLeft, func(s string) string { return strings.TrimLeftFunc(s, unicode.IsSpace) }),
		"rstrip":     strip(strings.TrimRight, func(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) }),
		"startswith": affix(strings.HasPrefix),
		"endswith":   affix(strings.HasSuffix),
		"upper":      caseMethod(strings.ToUpper),
		"lower":      caseMethod(strings.ToLower),
		"title":      caseMethod(pyTitle),
		"capitalize": caseMethod(capitalize),
		"isdigit":    isMethod(unicode.IsDigit),
		"isalpha":    isMethod(unicode.IsLetter),
		"isspace":    isMethod(unicode.IsSpace),
		"split":      sSplit,
		"splitlines": func(r *renderer, s string, a args) (Value, error) {
			s = strings.TrimSuffix(s, "\n")
			if s == "" {
				return NewList([]Value{}), nil
			}
			return r.stringList(strings.Split(s, "\n"))
		},
		"replace": func(r *renderer, s string, a args) (Value, error) {
			old, _, err := a.str(0, "old", "")
			if err != nil {
				return Value{}, err
			}
			nw, _, err := a.str(1, "new", "")
			if err != nil {
				return Value{}, err
			}
			count, err := a.int(2, "count", -1)
			if err != nil {
				return Value{}, err
			}
			return r.replace(s, old, nw, count)
		},
		"find": func(r *renderer, s string, a args) (Value, error) {
			sub, _, err := a.str(0, "sub", "")
			if err != nil {
				return Value{}, err
			}
			if err := r.scan(len(s)); err != nil {
				return Value{}, err
			}
			i := strings.Index(s, sub)
			if i > 0 {
				i = utf8.RuneCountInString(s[:i])
			}
			return NewInt(int64(i)), nil
		},
		"count": func(r *renderer, s string, a args) (Value, error) {
			sub, _, err := a.str(0, "sub", "")
			if err != nil {
				return Value{}, err
			}
			if err := r.scan(len(s)); err != nil {
				return Value{}, err
			}
			if sub == "" {
				return NewInt(int64(utf8.RuneCountInString(s)) + 1), nil
			}
			return NewInt(int64(strings.Count(s, sub))), nil
		},
		"join": func(r *renderer, s string, a args) (Value, error) {
			it, _ := a.get(0, "iterable")
			return fJoin(r, it, args{pos: []Value{NewString(s)}})
		},
		"format": func(r *renderer, s string, a args) (Value, error) { return r.braceFormat(s, a) },
	}
}

func (r *renderer) stringList(parts []string) (Value, error) {
	if err := r.checkItems(int64(len(parts))); err != nil {
		return Value{}, err
	}
	out := make([]Value, len(parts))
	for i, p := range parts {
		out[i] = NewString(p)
	}
	return NewList(out), nil
}

func sSplit(r *renderer, s string, a args) (Value, error) {
	if err := r.scan(len(s)); err != nil {
		return Value{}, err
	}
	sep, hasSep, err := a.str(0, "sep", "")
	if err != nil {
		return Value{}, err
	}
	maxsplit, err := a.int(1, "maxsplit", -1)
	if err != nil {
		return Value{}, err
	}
	if hasSep {
		if sep == "" {
			return Value{}, newError(0, "empty separator")
		}
		n := -1
		if maxsplit >= 0 {
			n = int(min(maxsplit, int64(len(s)))) + 1
		}
		return r.stringList(strings.SplitN(s, sep, n))
	}
	var parts []string
	rest := strings.TrimLeftFunc(s, unicode.IsSpace)
	for rest != "" {
		if maxsplit >= 0 && int64(len(parts)) == maxsplit {
			parts = append(parts, rest)
			break
		}
		i := strings.IndexFunc(rest, unicode.IsSpace)
		if i < 0 {
			parts = append(parts, rest)
			break
		}
		parts = append(parts, rest[:i])
		rest = strings.TrimLeftFunc(rest[i:], unicode.IsSpace)
	}
	if parts == nil {
		parts = []string{}
	}
	return r.stringList(parts)
}

type dictMethod func(r *renderer, d *Dict, a args) (Value, error)

var dictMethods map[string]dictMethod

func init() {
	dictMethods = map[string]dictMethod{
		"items": func(r *renderer, d *Dict, a args) (Value, error) {
			items, err := r.items(Value{kind: KindDict, p: d})
			return NewList(items), err
		},
		"keys": func(r *renderer, d *Dict, a args) (Value, error) {
			return NewList(append([]Value(nil), d.keys...)), r.checkItems(int64(len(d.keys)))
		},
		"values": func(r *renderer, d *Dict, a args) (Value, error) {
			return NewList(append([]Value(nil), d.vals...)), r.checkItems(int64(len(d.keys)))
		},
		"get": func(r *renderer, d *Dict, a args) (Value, error) {
			k, _ := a.get(0, "key")
			if v, ok := d.get(k); ok {
				return v, nil
			}
			return a.or(1, "default", None()), nil
		},
		"update": func(r *renderer, d *Dict, a args) (Value, error) {
			if o, ok := a.get(0, "other"); ok && o.kind == KindDict {
				od := o.p.(*Dict)
				if err := r.growItems(int64(len(d.keys)), int64(len(od.keys))); err != nil {
					return Value{}, err
				}
				keys, vals := append([]Value(nil), od.keys...), append([]Value(nil), od.vals...)
				for i := range keys {
					d.set(keys[i], vals[i])
				}
			}
			for _, kw := range a.kw {
				d.Set(kw.Name, kw.Value)
			}
			return None(), r.growItems(int64(len(d.keys)), int64(len(a.kw)))
		},
		"pop": func(r *renderer, d *Dict, a args) (Value, error) {
			k, _ := a.get(0, "key")
			if v, ok := d.remove(k); ok {
				return v, nil
			}
			if def, ok := a.get(1, "default"); ok {
				return def, nil
			}
			return Value{}, newError(0, "key not found")
		},
		"copy": func(r *renderer, d *Dict, a args) (Value, error) {
			if err := r.checkItems(int64(len(d.keys))); err != nil {
				return Value{}, err
			}
			c := NewDict()
			for i, k := range d.keys {
				c.AsDict().set(k, d.vals[i])
			}
			return c, nil
		},
	}
}

type listMethod func(r *renderer, l *List, a args) (Value, error)

var listMethods map[string]listMethod

func init() {
	listMethods = map[string]listMethod{
		"append": func(r *renderer, l *List, a args) (Value, error) {
			if err := r.growItems(int64(len(l.Items)), 1); err != nil {
				return Value{}, err
			}
			x, _ := a.get(0, "object")
			l.Items = append(l.Items, x)
			return None(), nil
		},
		"extend": func(r *renderer, l *List, a args) (Value, error) {
			x, _ := a.get(0, "iterable")
			items, err := r.seq(x)
			if err != nil {
				return Value{}, err
			}
			if err := r.growItems(int64(len(l.Items)), int64(len(items))); err != nil {
				return Value{}, err
			}
			l.Items = append(l.Items, items...)
			return None(), nil
		},
		"pop": func(r *renderer, l *List, a args) (Value, error) {
			i, err := a.int(0, "index", -1)
			if err != nil {
				return Value{}, err
			}
			n := int64(len(l.Items))
			if i < 0 {
				i += n
			}
			if i < 0 || i >= n {
				return Value{}, newError(0, "pop index out of range")
			}
			v := l.Items[i]
			l.Items = append(l.Items[:i:i], l.Items[i+1:]...)
			return v, nil
		},
		"index": func(r *renderer, l *List, a args) (Value, error) {
			x, _ := a.get(0, "value")
			for i, it := range l.Items {
				eq, err := r.equal(it, x, 0)
				if err != nil {
					return Value{}, err
				}
				if eq {
					return NewInt(int64(i)), nil
				}
			}
			return Value{}, newError(0, "value is not in list")
		},
		"count": func(r *renderer, l *List, a args) (Value, error) {
			x, _ := a.get(0, "value")
			n := int64(0)
			for _, it := range l.Items {
				eq, err := r.equal(it, x, 0)
				if err != nil {
					return Value{}, err
				}
				if eq {
					n++
				}
			}
			return NewInt(n), nil
		},
	}
}

// globals are the functions every template sees.
var globals map[string]*Func

func init() {
	globals = map[string]*Func{
		"range":           {Name: "range", Fn: gRange},
		"dict":            {Name: "dict", Fn: gDict(false)},
		"namespace":       {Name: "namespace", Fn: gDict(true)},
		"raise_exception": {Name: "raise_exception", Fn: gRaise},
		"strftime_now":    {Name: "strftime_now", Fn: gStrftimeNow},
	}
}

func gRange(c *Call) (Value, error) {
	start, step, count, err := c.r.rangeBounds(c.Args)
	if err != nil {
		return Value{}, err
	}
	if err := c.r.checkItems(count); err != nil {
		return Value{}, err
	}
	items := make([]Value, count)
	for i := int64(0); i < count; i++ {
		items[i] = NewInt(start + i*step)
	}
	return NewList(items), nil
}

// rangeBounds reads range()'s arguments: its first item, its step and its
// length, which is at most MaxValueItems.
func (r *renderer) rangeBounds(args []Value) (start, step, count int64, err error) {
	var ints [3]int64
	if len(args) == 0 || len(args) > 3 {
		return 0, 0, 0, newError(0, "range expects 1 to 3 arguments")
	}
	for i, a := range args {
		if a.kind != KindInt && a.kind != KindBool {
			return 0, 0, 0, newError(0, "range: '%s' is not an integer", typeName(a))
		}
		ints[i] = a.i
	}
	stop := ints[0]
	step = 1
	if len(args) >= 2 {
		start, stop = ints[0], ints[1]
	}
	if len(args) == 3 {
		step = ints[2]
	}
	if step == 0 {
		return 0, 0, 0, newError(0, "range() arg 3 must not be zero")
	}
	// The count in float64 first: the int64 difference may overflow.
	span := float64(stop) - float64(start)
	if span/float64(step) > float64(r.lim.MaxValueItems)+1 {
		return 0, 0, 0, &LimitError{Limit: "MaxValueItems", Value: r.lim.MaxValueItems}
	}
	switch {
	case step > 0 && start < stop:
		count = (stop-start-1)/step + 1
	case step < 0 && start > stop:
		if step == math.MinInt64 {
			count = 1
		} else {
			count = (start-stop-1)/(-step) + 1
		}
	}
	if count > r.lim.MaxValueItems {
		return 0, 0, 0, &LimitError{Limit: "MaxValueItems", Value: r.lim.MaxValueItems}
	}
	return start, step, count, nil
}

func gDict(namespace bool) func(c *Call) (Value, error) {
	return func(c *Call) (Value, error) {
		d := &Dict{namespace: namespace}
		for _, a := range c.Args {
			if a.kind == KindDict {
				src := a.p.(*Dict)
				if err := c.r.checkItems(int64(len(src.keys))); err != nil {
					return Value{}, err
				}
				for i, k := range src.keys {
					d.set(k, src.vals[i])
				}
			}
		}
		for _, kw := range c.Kwargs {
			d.Set(kw.Name, kw.Value)
		}
		return Value{kind: KindDict, p: d}, nil
	}
}

func gRaise(c *Call) (Value, error) {
	msg := ""
	if len(c.Args) > 0 {
		s, err := c.r.str(c.Args[0])
		if err != nil {
			return Value{}, err
		}
		msg = s
	}
	e := newError(0, "%s", msg)
	e.Raised = true
	return Value{}, e
}

func gStrftimeNow(c *Call) (Value, error) {
	if len(c.Args) != 1 || c.Args[0].kind != KindString {
		return Value{}, newError(0, "strftime_now takes a format string")
	}
	return c.r.strftime(time.Now(), c.Args[0].s)
}

// strftime formats t as Python's strftime does, for the common codes.
func (r *renderer) strftime(t time.Time, f string) (Value, error) {
	if err := r.checkString(int64(len(f)) * 16); err != nil {
		return Value{}, err
	}
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'd':
			b.WriteString(t.Format("02"))
		case 'e':
			b.WriteString(t.Format("_2"))
		case 'm':
			b.WriteString(t.Format("01"))
		case 'y':
			b.WriteString(t.Format("06"))
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'H':
			b.WriteString(t.Format("15"))
		case 'I':
			b.WriteString(t.Format("03"))
		case 'M':
			b.WriteString(t.Format("04"))
		case 'S':
			b.WriteString(t.Format("05"))
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'j':
			b.WriteString(strconv.Itoa(1000 + t.YearDay())[1:])
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return NewString(b.String()), nil
}

// percentFormat is Python's "fmt" % args for %s, %d, %r, %f and %%.
func (r *renderer) percentFormat(f string, a Value, line int) (Value, error) {
	var vals []Value
	if l := a.AsList(); l != nil && l.tuple {
		vals = l.Items
	} else {
		vals = []Value{a}
	}
	w := &bounded{r: r}
	n := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			w.WriteString(f[i : i+1])
			continue
		}
		if i+1 >= len(f) {
			return Value{}, newError(line, "incomplete format")
		}
		i++
		if f[i] == '%' {
			w.WriteString("%")
			continue
		}
		if n >= len(vals) {
			return Value{}, newError(line, "not enough arguments for format string")
		}
		v := vals[n]
		n++
		switch f[i] {
		case 's':
			s, err := r.str(v)
			if err != nil {
				return Value{}, err
			}
			w.WriteString(s)
		case 'r':
			r.repr(w, v, 0, true)
		case 'd', 'i':
			if !v.isNumber() {
				return Value{}, newError(line, "%%d format: a number is required")
			}
			if v.kind == KindFloat {
				w.WriteString(strconv.FormatInt(int64(v.f), 10))
			} else {
				w.WriteString(strconv.FormatInt(v.i, 10))
			}
		case 'f':
			if !v.isNumber() {
				return Value{}, newError(line, "%%f format: a number is required")
			}
			w.WriteString(strconv.FormatFloat(v.toFloat(), 'f', 6, 64))
		default:
			return Value{}, newError(line, "unsupported format character %q", f[i])
		}
	}
	s, err := w.result()
	return NewString(s), err
}

// braceFormat is Python's str.format for {}, {0} and {name}.
func (r *renderer) braceFormat(f string, a args) (Value, error) {
	w := &bounded{r: r}
	auto := 0
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c == '}' && i+1 < len(f) && f[i+1] == '}' {
			w.WriteString("}")
			i++
			continue
		}
		if c != '{' {
			w.WriteString(f[i : i+1])
			continue
		}
		if i+1 < len(f) && f[i+1] == '{' {
			w.WriteString("{")
			i++
			continue
		}
		end := strings.IndexByte(f[i:], '}')
		if end < 0 {
			return Value{}, newError(0, "single '{' in format string")
		}
		field := f[i+1 : i+end]
		i += end
		var v Value
		if field == "" {
			v, _ = a.get(auto, "\x00")
			auto++
		} else if n, err := strconv.Atoi(field); err == nil {
			v, _ = a.get(n, "\x00")
		} else {
			v, _ = a.get(-1, field)
		}
		s, err := r.str(v)
		if err != nil {
			return Value{}, err
		}
		w.WriteString(s)
	}
	s, err := w.result()
	return NewString(s), err
}
