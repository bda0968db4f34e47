package jinja

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type filterFunc func(r *renderer, v Value, a args) (Value, error)

var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"tojson":     fTojson,
		"trim":       fTrim,
		"length":     fLength,
		"count":      fLength,
		"first":      fFirst,
		"last":       fLast,
		"join":       fJoin,
		"default":    fDefault,
		"d":          fDefault,
		"upper":      strFilter(strings.ToUpper),
		"lower":      strFilter(strings.ToLower),
		"title":      strFilter(jinjaTitle),
		"capitalize": strFilter(capitalize),
		"replace":    fReplace,
		"string":     fString,
		"int":        fInt,
		"float":      fFloat,
		"list":       fList,
		"items":      fItems,
		"dictsort":   fDictsort,
		"map":        fMap,
		"select":     selectFilter(false, false),
		"reject":     selectFilter(true, false),
		"selectattr": selectFilter(false, true),
		"rejectattr": selectFilter(true, true),
		"unique":     fUnique,
		"reverse":    fReverse,
		"sort":       fSort,
		"safe":       func(r *renderer, v Value, a args) (Value, error) { return v, nil },
		"indent":     fIndent,
		"wordcount":  fWordcount,
		"abs":        fAbs,
		"round":      fRound,
		"batch":      fBatch,
		"sum":        fSum,
		"min":        minMax(-1),
		"max":        minMax(1),
		"e":          fEscape,
		"escape":     fEscape,
		"format":     fFormat,
		"attr":       fAttr,
	}
}

func (r *renderer) filter(f *filterExpr, v Value, sc *scope) (Value, error) {
	pos, err := r.evalArgs(f.args, sc)
	if err != nil {
		return Value{}, err
	}
	kw, err := r.evalKwargs(f.kwargs, sc)
	if err != nil {
		return Value{}, err
	}
	out, err := r.applyFilter(f.name, v, args{pos: pos, kw: kw})
	if e, ok := err.(*Error); ok && e.Line == 0 {
		e.Line = f.line
	}
	return out, err
}

func (r *renderer) applyFilter(name string, v Value, a args) (Value, error) {
	fn, ok := filters[name]
	if !ok {
		return Value{}, newError(0, "no filter named %q", name)
	}
	return fn(r, v, a)
}

func fTojson(r *renderer, v Value, a args) (Value, error) {
	o := jsonOptions{itemSep: ", ", keySep: ": "}
	if ind, ok := a.get(0, "indent"); ok && ind.kind != KindNone && ind.kind != KindUndefined {
		o.hasIndent = true
		o.itemSep = ","
		switch ind.kind {
		case KindString:
			o.indent = ind.s
		case KindInt:
			if ind.i > 64 {
				return Value{}, &LimitError{Limit: "MaxValueBytes", Value: r.lim.MaxValueBytes}
			}
			o.indent = strings.Repeat(" ", int(max(ind.i, 0)))
		default:
			return Value{}, newError(0, "tojson: indent must be an integer or a string")
		}
	}
	if sep, ok := a.get(-1, "separators"); ok && sep.kind == KindList {
		items := sep.p.(*List).Items
		if len(items) != 2 || items[0].kind != KindString || items[1].kind != KindString {
			return Value{}, newError(0, "tojson: separators must be two strings")
		}
		o.itemSep, o.keySep = items[0].s, items[1].s
	}
	o.sortKeys = a.boolean(-1, "sort_keys")
	o.ensureASCII = a.boolean(-1, "ensure_ascii")
	s, err := r.toJSON(v, o)
	if err != nil {
		return Value{}, err
	}
	return NewString(s), nil
}

func fString(r *renderer, v Value, a args) (Value, error) {
	s, err := r.str(v)
	return NewString(s), err
}

func strFilter(f func(string) string) filterFunc {
	return func(r *renderer, v Value, a args) (Value, error) {
		s, err := r.str(v)
		if err != nil {
			return Value{}, err
		}
		if err := r.checkString(int64(len(s)) * 2); err != nil { // case mapping may grow a string
			return Value{}, err
		}
		return NewString(f(s)), nil
	}
}

func jinjaTitle(s string) string {
	var b strings.Builder
	start := true
	for _, c := range s {
		if strings.ContainsRune("-({[<", c) || unicode.IsSpace(c) {
			start = true
			b.WriteRune(c)
			continue
		}
		if start {
			b.WriteRune(unicode.ToUpper(c))
		} else {
			b.WriteRune(unicode.ToLower(c))
		}
		start = false
	}
	return b.String()
}

func capitalize(s string) string {
	for i, c := range s {
		return string(unicode.ToUpper(c)) + strings.ToLower(s[i+len(string(c)):])
	}
	return s
}

func fTrim(r *renderer, v Value, a args) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	chars, ok, err := a.str(0, "chars", "")
	if err != nil {
		return Value{}, err
	}
	if err := r.scan(len(s)); err != nil {
		return Value{}, err
	}
	if ok {
		return NewString(strings.Trim(s, chars)), nil
	}
	return NewString(strings.TrimSpace(s)), nil
}

func (r *renderer) length(v Value) (int64, error) {
	switch v.kind {
	case KindString:
		return int64(utf8.RuneCountInString(v.s)), r.scanRunes(len(v.s))
	case KindList:
		return int64(len(v.p.(*List).Items)), nil
	case KindDict:
		return int64(len(v.p.(*Dict).keys)), nil
	case KindUndefined:
		return 0, nil
	}
	return 0, newError(0, "object of type '%s' has no len()", typeName(v))
}

func fLength(r *renderer, v Value, a args) (Value, error) {
	n, err := r.length(v)
	return NewInt(n), err
}

func (r *renderer) seq(v Value) ([]Value, error) { return r.iterate(v, 0) }

func fFirst(r *renderer, v Value, a args) (Value, error) {
	if v.kind == KindString {
		for _, c := range v.s {
			return NewString(string(c)), nil
		}
		return Value{}, nil
	}
	items, err := r.seq(v)
	if err != nil || len(items) == 0 {
		return Value{}, err
	}
	return items[0], nil
}

func fLast(r *renderer, v Value, a args) (Value, error) {
	if v.kind == KindString {
		if v.s == "" {
			return Value{}, nil
		}
		c, _ := utf8.DecodeLastRuneInString(v.s)
		return NewString(string(c)), nil
	}
	items, err := r.seq(v)
	if err != nil || len(items) == 0 {
		return Value{}, err
	}
	return items[len(items)-1], nil
}

// attribute reads a filter's attribute= path ("a.b", "0").
func (r *renderer) attribute(v Value, path string) Value {
	for _, part := range strings.Split(path, ".") {
		if n, err := strconv.ParseInt(part, 10, 64); err == nil && v.kind == KindList {
			v = r.getItem(v, NewInt(n))
		} else {
			v = r.getItem(v, NewString(part))
		}
	}
	return v
}

func fJoin(r *renderer, v Value, a args) (Value, error) {
	sep, _, err := a.str(0, "d", "")
	if err != nil {
		return Value{}, err
	}
	attr, hasAttr, err := a.str(1, "attribute", "")
	if err != nil {
		return Value{}, err
	}
	items, err := r.seq(v)
	if err != nil {
		return Value{}, err
	}
	w := &bounded{r: r}
	for i, it := range items {
		if i > 0 {
			w.WriteString(sep)
		}
		if hasAttr {
			it = r.attribute(it, attr)
		}
		s, err := r.str(it)
		if err != nil {
			return Value{}, err
		}
		w.WriteString(s)
		if w.err != nil {
			return Value{}, w.err
		}
	}
	s, err := w.result()
	return NewString(s), err
}

func fDefault(r *renderer, v Value, a args) (Value, error) {
	def := a.or(0, "default_value", NewString(""))
	if v.kind == KindUndefined || a.boolean(1, "boolean") && !v.truthy() {
		return def, nil
	}
	return v, nil
}

func (r *renderer) replace(s, old, new string, count int64) (Value, error) {
	if err := r.scan(len(s)); err != nil {
		return Value{}, err
	}
	n := int64(strings.Count(s, old))
	if count >= 0 && count < n {
		n = count
	}
	if n == 0 {
		return NewString(s), nil
	}
	grow, ok := mulInt(n, int64(len(new))-int64(len(old)))
	if !ok {
		return Value{}, &LimitError{Limit: "MaxValueBytes", Value: r.lim.MaxValueBytes}
	}
	size, ok := addInt(int64(len(s)), grow)
	if !ok && grow != 0 {
		return Value{}, &LimitError{Limit: "MaxValueBytes", Value: r.lim.MaxValueBytes}
	}
	if err := r.checkString(size); err != nil {
		return Value{}, err
	}
	return NewString(strings.Replace(s, old, new, int(n))), nil
}

func fReplace(r *renderer, v Value, a args) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	old, _ := a.get(0, "old")
	nw, _ := a.get(1, "new")
	os, err := r.str(old)
	if err != nil {
		return Value{}, err
	}
	ns, err := r.str(nw)
	if err != nil {
		return Value{}, err
	}
	count, err := a.int(2, "count", -1)
	if err != nil {
		return Value{}, err
	}
	return r.replace(s, os, ns, count)
}

func fInt(r *renderer, v Value, a args) (Value, error) {
	def := a.or(0, "default", NewInt(0))
	switch v.kind {
	case KindInt:
		return v, nil
	case KindBool:
		return NewInt(v.i), nil
	case KindFloat:
		if math.IsNaN(v.f) || math.Abs(v.f) >= 9.2e18 {
			return def, nil
		}
		return NewInt(int64(v.f)), nil
	case KindString:
		s := strings.TrimSpace(strings.ReplaceAll(v.s, "_", ""))
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return NewInt(i), nil
		} else if isRangeErr(err) {
			return Value{}, newError(0, "int: %.40q out of the 64-bit range", v.s)
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && math.Abs(f) < 9.2e18 {
			return NewInt(int64(f)), nil
		}
	}
	return def, nil
}

func fFloat(r *renderer, v Value, a args) (Value, error) {
	def := a.or(0, "default", NewFloat(0))
	switch v.kind {
	case KindInt, KindBool:
		return NewFloat(float64(v.i)), nil
	case KindFloat:
		return v, nil
	case KindString:
		if f, err := strconv.ParseFloat(strings.TrimSpace(v.s), 64); err == nil || isRangeErr(err) {
			return NewFloat(f), nil
		}
	}
	return def, nil
}

func fList(r *renderer, v Value, a args) (Value, error) {
	items, err := r.seq(v)
	if err != nil {
		return Value{}, err
	}
	return NewList(items), nil
}

func fIndent(r *renderer, v Value, a args) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	ind := "    "
	if w, ok := a.get(0, "width"); ok {
		switch w.kind {
		case KindString:
			ind = w.s
		case KindInt:
			if err := r.checkString(w.i); err != nil {
				return Value{}, err
			}
			ind = strings.Repeat(" ", int(max(w.i, 0)))
		}
	}
	lines := strings.Split(s, "\n")
	size, ok := mulInt(int64(len(lines)), int64(len(ind)))
	if !ok {
		return Value{}, &LimitError{Limit: "MaxValueBytes", Value: r.lim.MaxValueBytes}
	}
	if err := r.checkString(size + int64(len(s))); err != nil {
		return Value{}, err
	}
	blank := a.boolean(2, "blank")
	var b strings.Builder
	if a.boolean(1, "first") {
		b.WriteString(ind)
	}
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
			if l != "" || blank {
				b.WriteString(ind)
			}
		}
		b.WriteString(l)
	}
	return NewString(b.String()), nil
}

func fWordcount(r *renderer, v Value, a args) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	if err := r.charge(int64(len(s)) / 64); err != nil {
		return Value{}, err
	}
	n, in := int64(0), false
	for _, c := range s {
		w := c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c)
		if w && !in {
			n++
		}
		in = w
	}
	return NewInt(n), nil
}

func fAbs(r *renderer, v Value, a args) (Value, error) {
	switch v.kind {
	case KindInt, KindBool:
		if v.i == math.MinInt64 {
			return Value{}, overflow(0)
		}
		if v.i < 0 {
			return NewInt(-v.i), nil
		}
		return NewInt(v.i), nil
	case KindFloat:
		return NewFloat(math.Abs(v.f)), nil
	}
	return Value{}, newError(0, "bad operand type for abs(): '%s'", typeName(v))
}

func fRound(r *renderer, v Value, a args) (Value, error) {
	if !v.isNumber() {
		return Value{}, newError(0, "round: '%s' is not a number", typeName(v))
	}
	prec, err := a.int(0, "precision", 0)
	if err != nil {
		return Value{}, err
	}
	if prec > 300 || prec < -300 {
		return NewFloat(v.toFloat()), nil
	}
	method, _, err := a.str(1, "method", "common")
	if err != nil {
		return Value{}, err
	}
	scale := math.Pow(10, float64(prec))
	x := v.toFloat() * scale
	switch method {
	case "common":
		x = math.RoundToEven(x)
	case "ceil":
		x = math.Ceil(x)
	case "floor":
		x = math.Floor(x)
	default:
		return Value{}, newError(0, "round: method must be common, ceil or floor")
	}
	return NewFloat(x / scale), nil
}

func fBatch(r *renderer, v Value, a args) (Value, error) {
	items, err := r.seq(v)
	if err != nil {
		return Value{}, err
	}
	n, err := a.int(0, "linecount", 1)
	if err != nil {
		return Value{}, err
	}
	if n <= 0 {
		return Value{}, newError(0, "batch: linecount must be positive")
	}
	fill, hasFill := a.get(1, "fill_with")
	hasFill = hasFill && fill.kind != KindNone
	var out []Value
	for i := 0; i < len(items); i += int(min(n, int64(len(items)))) {
		end := min(int64(i)+n, int64(len(items)))
		row := append([]Value(nil), items[i:end]...)
		if hasFill && int64(len(row)) < n {
			if err := r.checkItems(n); err != nil {
				return Value{}, err
			}
			for int64(len(row)) < n {
				row = append(row, fill)
			}
		}
		out = append(out, NewList(row))
	}
	return NewList(out), nil
}

func fSum(r *renderer, v Value, a args) (Value, error) {
	items, err := r.seq(v)
	if err != nil {
		return Value{}, err
	}
	attr, hasAttr, err := a.str(0, "attribute", "")
	if err != nil {
		return Value{}, err
	}
	total := a.or(1, "start", NewInt(0))
	for _, it := range items {
		if hasAttr {
			it = r.attribute(it, attr)
		}
		if total, err = r.binary("+", total, it, 0); err != nil {
			return Value{}, err
		}
	}
	return total, nil
}

func minMax(sign int) filterFunc {
	return func(r *renderer, v Value, a args) (Value, error) {
		items, err := r.seq(v)
		if err != nil || len(items) == 0 {
			return Value{}, err
		}
		cs := a.boolean(0, "case_sensitive")
		attr, hasAttr, err := a.str(1, "attribute", "")
		if err != nil {
			return Value{}, err
		}
		key := func(x Value) Value {
			if hasAttr {
				x = r.attribute(x, attr)
			}
			return sortKey(x, cs)
		}
		best := items[0]
		for _, it := range items[1:] {
			c, err := r.order(key(it), key(best), 0, 0)
			if err != nil {
				return Value{}, err
			}
			if c*sign > 0 {
				best = it
			}
		}
		return best, nil
	}
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")

func fEscape(r *renderer, v Value, a args) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	if err := r.checkString(int64(len(s)) * 5); err != nil {
		return Value{}, err
	}
	return NewString(htmlEscaper.Replace(s)), nil
}

func fFormat(r *renderer, v Value, a args) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	return r.percentFormat(s, newTuple(a.pos), 0)
}

func fAttr(r *renderer, v Value, a args) (Value, error) {
	name, _, err := a.str(0, "name", "")
	if err != nil {
		return Value{}, err
	}
	return r.getAttr(v, name), nil
}
