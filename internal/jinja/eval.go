package jinja

import (
	"math"
	"unicode/utf8"
)

func (r *renderer) eval(e expr, sc *scope) (Value, error) {
	if err := r.step(); err != nil {
		return Value{}, err
	}
	switch e := e.(type) {
	case *constExpr:
		return e.v, nil
	case *nameExpr:
		v, _ := sc.lookup(e.name)
		return v, nil
	case *listExpr:
		if err := r.checkItems(int64(len(e.items))); err != nil {
			return Value{}, err
		}
		items := make([]Value, len(e.items))
		for i, x := range e.items {
			v, err := r.eval(x, sc)
			if err != nil {
				return Value{}, err
			}
			items[i] = v
		}
		if e.tuple {
			return newTuple(items), nil
		}
		return NewList(items), nil
	case *dictExpr:
		if err := r.checkItems(int64(len(e.keys))); err != nil {
			return Value{}, err
		}
		d := NewDict()
		for i := range e.keys {
			k, err := r.eval(e.keys[i], sc)
			if err != nil {
				return Value{}, err
			}
			v, err := r.eval(e.vals[i], sc)
			if err != nil {
				return Value{}, err
			}
			if !d.AsDict().set(k, v) {
				return Value{}, newError(0, "unhashable dict key of type '%s'", typeName(k))
			}
		}
		return d, nil
	case *attrExpr:
		obj, err := r.eval(e.obj, sc)
		if err != nil {
			return Value{}, err
		}
		return r.getAttr(obj, e.name), nil
	case *indexExpr:
		obj, err := r.eval(e.obj, sc)
		if err != nil {
			return Value{}, err
		}
		k, err := r.eval(e.key, sc)
		if err != nil {
			return Value{}, err
		}
		return r.getItem(obj, k), nil
	case *sliceExpr:
		return r.evalSlice(e, sc)
	case *callExpr:
		return r.callExpr(e, sc, nil)
	case *filterExpr:
		obj, err := r.eval(e.obj, sc)
		if err != nil {
			return Value{}, err
		}
		return r.filter(e, obj, sc)
	case *testExpr:
		obj, err := r.eval(e.obj, sc)
		if err != nil {
			return Value{}, err
		}
		args, err := r.evalArgs(e.args, sc)
		if err != nil {
			return Value{}, err
		}
		ok, err := r.test(e.name, obj, args, e.line)
		if err != nil {
			return Value{}, err
		}
		return NewBool(ok != e.neg), nil
	case *unaryExpr:
		x, err := r.eval(e.x, sc)
		if err != nil {
			return Value{}, err
		}
		switch e.op {
		case "not":
			return NewBool(!x.truthy()), nil
		case "-":
			switch x.kind {
			case KindInt, KindBool:
				if x.i == math.MinInt64 {
					return Value{}, newError(e.line, "integer overflow")
				}
				return NewInt(-x.i), nil
			case KindFloat:
				return NewFloat(-x.f), nil
			}
			return Value{}, newError(e.line, "bad operand type for unary -: '%s'", typeName(x))
		default:
			if !x.isNumber() {
				return Value{}, newError(e.line, "bad operand type for unary +: '%s'", typeName(x))
			}
			if x.kind == KindBool {
				return NewInt(x.i), nil
			}
			return x, nil
		}
	case *binExpr:
		l, err := r.eval(e.l, sc)
		if err != nil {
			return Value{}, err
		}
		switch e.op {
		case "and":
			if !l.truthy() {
				return l, nil
			}
			return r.eval(e.r, sc)
		case "or":
			if l.truthy() {
				return l, nil
			}
			return r.eval(e.r, sc)
		}
		rv, err := r.eval(e.r, sc)
		if err != nil {
			return Value{}, err
		}
		return r.binary(e.op, l, rv, e.line)
	case *compareExpr:
		l, err := r.eval(e.first, sc)
		if err != nil {
			return Value{}, err
		}
		for i, op := range e.ops {
			rv, err := r.eval(e.rest[i], sc)
			if err != nil {
				return Value{}, err
			}
			ok, err := r.compare(op, l, rv, e.line)
			if err != nil {
				return Value{}, err
			}
			if !ok {
				return NewBool(false), nil
			}
			l = rv
		}
		return NewBool(true), nil
	case *condExpr:
		c, err := r.eval(e.test, sc)
		if err != nil {
			return Value{}, err
		}
		if c.truthy() {
			return r.eval(e.then, sc)
		}
		if e.els == nil {
			return Value{}, nil
		}
		return r.eval(e.els, sc)
	}
	return Value{}, newError(0, "unknown expression %T", e)
}

func (r *renderer) evalArgs(args []expr, sc *scope) ([]Value, error) {
	if len(args) == 0 {
		return nil, nil
	}
	vs := make([]Value, len(args))
	for i, a := range args {
		v, err := r.eval(a, sc)
		if err != nil {
			return nil, err
		}
		vs[i] = v
	}
	return vs, nil
}

func (r *renderer) evalKwargs(kws []kwExpr, sc *scope) ([]Kwarg, error) {
	if len(kws) == 0 {
		return nil, nil
	}
	out := make([]Kwarg, len(kws))
	for i, kw := range kws {
		v, err := r.eval(kw.e, sc)
		if err != nil {
			return nil, err
		}
		out[i] = Kwarg{Name: kw.name, Value: v}
	}
	return out, nil
}

// getAttr is obj.name: a dict's key (a namespace's attribute, a loop's
// field); undefined where there is none.
func (r *renderer) getAttr(obj Value, name string) Value {
	if d := obj.AsDict(); d != nil {
		v, _ := d.Get(name)
		return v
	}
	return Value{}
}

// getItem is obj[key]: undefined where there is none, as in Jinja.
func (r *renderer) getItem(obj, key Value) Value {
	switch obj.kind {
	case KindDict:
		v, _ := obj.p.(*Dict).get(key)
		return v
	case KindList:
		items := obj.p.(*List).Items
		if key.kind != KindInt && key.kind != KindBool {
			return Value{}
		}
		i := key.i
		if i < 0 {
			i += int64(len(items))
		}
		if i < 0 || i >= int64(len(items)) {
			return Value{}
		}
		return items[i]
	case KindString:
		if key.kind != KindInt && key.kind != KindBool {
			return Value{}
		}
		if r.scan(len(obj.s)) != nil {
			return Value{} // the step counter is over: the next step says so
		}
		if isASCII(obj.s) {
			i := key.i
			if i < 0 {
				i += int64(len(obj.s))
			}
			if i < 0 || i >= int64(len(obj.s)) {
				return Value{}
			}
			return NewString(obj.s[i : i+1])
		}
		if r.scanRunes(2*len(obj.s)) != nil {
			return Value{}
		}
		n := int64(utf8.RuneCountInString(obj.s))
		i := key.i
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return Value{}
		}
		for _, c := range obj.s {
			if i == 0 {
				return NewString(string(c))
			}
			i--
		}
		return Value{}
	}
	return Value{}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// sliceIndices computes Python's slice.indices(n) and the slice's length
// without overflowing.
func sliceIndices(start, stop, step *int64, n int64) (int64, int64, int64, int64) {
	st := int64(1)
	if step != nil {
		st = *step
	}
	clamp := func(p *int64, def int64) int64 {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			if v < -n {
				if st < 0 {
					return -1
				}
				return 0
			}
			v += n
		}
		if v >= n {
			if st < 0 {
				return n - 1
			}
			return n
		}
		return v
	}
	var b, e int64
	if st > 0 {
		b, e = clamp(start, 0), clamp(stop, n)
	} else {
		b, e = clamp(start, n-1), clamp(stop, -1)
	}
	var count int64
	switch {
	case st > 0 && b < e:
		count = (e-b-1)/st + 1
	case st < 0 && b > e:
		if st == math.MinInt64 {
			count = 1
		} else {
			count = (b-e-1)/(-st) + 1
		}
	}
	return b, e, st, count
}

func (r *renderer) evalSlice(e *sliceExpr, sc *scope) (Value, error) {
	obj, err := r.eval(e.obj, sc)
	if err != nil {
		return Value{}, err
	}
	var parts [3]*int64
	for i, x := range []expr{e.start, e.stop, e.step} {
		if x == nil {
			continue
		}
		v, err := r.eval(x, sc)
		if err != nil {
			return Value{}, err
		}
		switch v.kind {
		case KindNone:
			continue
		case KindInt, KindBool:
			n := v.i
			parts[i] = &n
		default:
			return Value{}, newError(e.line, "slice indices must be integers or None")
		}
	}
	if parts[2] != nil && *parts[2] == 0 {
		return Value{}, newError(e.line, "slice step cannot be zero")
	}
	switch obj.kind {
	case KindList:
		l := obj.p.(*List)
		items, err := r.sliceItems(l.Items, parts)
		if err != nil {
			return Value{}, err
		}
		return Value{kind: KindList, p: &List{Items: items, tuple: l.tuple}}, nil
	case KindString:
		if err := r.scan(len(obj.s)); err != nil {
			return Value{}, err
		}
		if isASCII(obj.s) {
			b, _, st, count := sliceIndices(parts[0], parts[1], parts[2], int64(len(obj.s)))
			if st == 1 {
				return NewString(obj.s[b : b+count]), nil
			}
			if err := r.checkString(count); err != nil {
				return Value{}, err
			}
			out := make([]byte, count)
			for i := int64(0); i < count; i++ {
				out[i] = obj.s[b+i*st]
			}
			return NewString(string(out)), nil
		}
		if err := r.checkString(int64(len(obj.s)) * 4); err != nil { // the runes
			return Value{}, err
		}
		if err := r.scanRunes(len(obj.s)); err != nil {
			return Value{}, err
		}
		rs := []rune(obj.s)
		b, _, st, count := sliceIndices(parts[0], parts[1], parts[2], int64(len(rs)))
		if err := r.checkString(count * 4); err != nil {
			return Value{}, err
		}
		out := make([]rune, count)
		for i := int64(0); i < count; i++ {
			out[i] = rs[b+i*st]
		}
		return NewString(string(out)), nil
	case KindUndefined:
		return Value{}, nil
	}
	return Value{}, newError(e.line, "'%s' object is not subscriptable", typeName(obj))
}

func (r *renderer) sliceItems(items []Value, parts [3]*int64) ([]Value, error) {
	b, _, st, count := sliceIndices(parts[0], parts[1], parts[2], int64(len(items)))
	if err := r.checkItems(count); err != nil {
		return nil, err
	}
	out := make([]Value, count)
	for i := int64(0); i < count; i++ {
		out[i] = items[b+i*st]
	}
	return out, nil
}

// callExpr calls a function, a macro or a method; caller, when set, is
// the body of a {% call %} block.
func (r *renderer) callExpr(e *callExpr, sc *scope, caller *Value) (Value, error) {
	args, err := r.evalArgs(e.args, sc)
	if err != nil {
		return Value{}, err
	}
	kwargs, err := r.evalKwargs(e.kwargs, sc)
	if err != nil {
		return Value{}, err
	}
	if caller != nil {
		kwargs = append(kwargs, Kwarg{Name: "caller", Value: *caller})
	}
	if a, ok := e.fn.(*attrExpr); ok {
		obj, err := r.eval(a.obj, sc)
		if err != nil {
			return Value{}, err
		}
		if v, ok, err := r.method(obj, a.name, args, kwargs, e.line); ok || err != nil {
			return v, err
		}
		fn := r.getAttr(obj, a.name)
		return r.call(fn, args, kwargs, e.line, a.name)
	}
	fn, err := r.eval(e.fn, sc)
	if err != nil {
		return Value{}, err
	}
	name := "object"
	if n, ok := e.fn.(*nameExpr); ok {
		name = n.name
	}
	return r.call(fn, args, kwargs, e.line, name)
}

func (r *renderer) call(fn Value, args []Value, kwargs []Kwarg, line int, name string) (Value, error) {
	f, ok := fn.p.(*Func)
	if fn.kind != KindFunc || !ok {
		if fn.kind == KindUndefined {
			return Value{}, newError(line, "'%s' is undefined", name)
		}
		return Value{}, newError(line, "'%s' object is not callable", typeName(fn))
	}
	v, err := f.Fn(&Call{Args: args, Kwargs: kwargs, r: r})
	if err != nil {
		if e, ok := err.(*Error); ok && e.Line == 0 {
			e.Line = line
		}
		return Value{}, err
	}
	return v, nil
}
