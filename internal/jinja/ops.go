package jinja

import (
	"math"
	"math/bits"
	"strings"
)

func overflow(line int) error { return newError(line, "integer overflow") }

func addInt(a, b int64) (int64, bool) {
	c := a + b
	return c, (c > a) == (b > 0)
}

func mulInt(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) || c/b != a {
		return 0, false
	}
	return c, true
}

func (r *renderer) binary(op string, l, rv Value, line int) (Value, error) {
	if op == "~" {
		a, err := r.str(l)
		if err != nil {
			return Value{}, err
		}
		b, err := r.str(rv)
		if err != nil {
			return Value{}, err
		}
		return r.concat(a, b)
	}
	lint := l.kind == KindInt || l.kind == KindBool
	rint := rv.kind == KindInt || rv.kind == KindBool
	if lint && rint {
		a, b := l.i, rv.i
		switch op {
		case "+":
			if c, ok := addInt(a, b); ok || b == 0 {
				return NewInt(c), nil
			}
			return Value{}, overflow(line)
		case "-":
			if b == math.MinInt64 {
				return Value{}, overflow(line)
			}
			if c, ok := addInt(a, -b); ok || b == 0 {
				return NewInt(c), nil
			}
			return Value{}, overflow(line)
		case "*":
			if c, ok := mulInt(a, b); ok {
				return NewInt(c), nil
			}
			return Value{}, overflow(line)
		case "/":
			if b == 0 {
				return Value{}, newError(line, "division by zero")
			}
			return NewFloat(float64(a) / float64(b)), nil
		case "//", "%":
			if b == 0 {
				return Value{}, newError(line, "integer division or modulo by zero")
			}
			if a == math.MinInt64 && b == -1 {
				if op == "%" {
					return NewInt(0), nil
				}
				return Value{}, overflow(line)
			}
			q, m := a/b, a%b
			if m != 0 && (m < 0) != (b < 0) {
				q--
				m += b
			}
			if op == "//" {
				return NewInt(q), nil
			}
			return NewInt(m), nil
		case "**":
			if b < 0 {
				return NewFloat(math.Pow(float64(a), float64(b))), nil
			}
			return powInt(a, b, line)
		}
	}
	if l.isNumber() && rv.isNumber() {
		a, b := l.toFloat(), rv.toFloat()
		switch op {
		case "+":
			return NewFloat(a + b), nil
		case "-":
			return NewFloat(a - b), nil
		case "*":
			return NewFloat(a * b), nil
		case "/":
			if b == 0 {
				return Value{}, newError(line, "float division by zero")
			}
			return NewFloat(a / b), nil
		case "//", "%":
			if b == 0 {
				return Value{}, newError(line, "float modulo by zero")
			}
			m := math.Mod(a, b)
			if m != 0 && (m < 0) != (b < 0) {
				m += b
			}
			if op == "%" {
				return NewFloat(m), nil
			}
			return NewFloat(math.Floor((a - m) / b)), nil
		case "**":
			return NewFloat(math.Pow(a, b)), nil
		}
	}
	switch op {
	case "+":
		if l.kind == KindString && rv.kind == KindString {
			return r.concat(l.s, rv.s)
		}
		if l.kind == KindList && rv.kind == KindList {
			a, b := l.p.(*List), rv.p.(*List)
			n := int64(len(a.Items)) + int64(len(b.Items))
			if err := r.checkItems(n); err != nil {
				return Value{}, err
			}
			items := make([]Value, 0, n)
			items = append(append(items, a.Items...), b.Items...)
			return Value{kind: KindList, p: &List{Items: items, tuple: a.tuple}}, nil
		}
	case "*":
		if l.kind == KindString && rint {
			return r.repeatString(l.s, rv.i)
		}
		if rv.kind == KindString && lint {
			return r.repeatString(rv.s, l.i)
		}
		if l.kind == KindList && rint {
			return r.repeatList(l.p.(*List), rv.i)
		}
		if rv.kind == KindList && lint {
			return r.repeatList(rv.p.(*List), l.i)
		}
	case "%":
		if l.kind == KindString {
			return r.percentFormat(l.s, rv, line)
		}
	}
	return Value{}, newError(line, "unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(rv))
}

func powInt(a, b int64, line int) (Value, error) {
	result := int64(1)
	for b > 0 {
		if b&1 == 1 {
			c, ok := mulInt(result, a)
			if !ok {
				return Value{}, overflow(line)
			}
			result = c
		}
		b >>= 1
		if b > 0 {
			c, ok := mulInt(a, a)
			if !ok {
				return Value{}, overflow(line)
			}
			a = c
		}
	}
	return NewInt(result), nil
}

func (r *renderer) concat(a, b string) (Value, error) {
	if err := r.checkString(int64(len(a)) + int64(len(b))); err != nil {
		return Value{}, err
	}
	return NewString(a + b), nil
}

func (r *renderer) repeatString(s string, n int64) (Value, error) {
	if n <= 0 || s == "" {
		return NewString(""), nil
	}
	hi, lo := bits.Mul64(uint64(len(s)), uint64(n))
	if hi != 0 || lo > math.MaxInt64 {
		return Value{}, &LimitError{Limit: "MaxValueBytes", Value: r.lim.MaxValueBytes}
	}
	if err := r.checkString(int64(lo)); err != nil {
		return Value{}, err
	}
	return NewString(strings.Repeat(s, int(n))), nil
}

func (r *renderer) repeatList(l *List, n int64) (Value, error) {
	if n <= 0 || len(l.Items) == 0 {
		return Value{kind: KindList, p: &List{Items: []Value{}, tuple: l.tuple}}, nil
	}
	total, ok := mulInt(int64(len(l.Items)), n)
	if !ok {
		return Value{}, &LimitError{Limit: "MaxValueItems", Value: r.lim.MaxValueItems}
	}
	if err := r.checkItems(total); err != nil {
		return Value{}, err
	}
	items := make([]Value, 0, total)
	for i := int64(0); i < n; i++ {
		items = append(items, l.Items...)
	}
	return Value{kind: KindList, p: &List{Items: items, tuple: l.tuple}}, nil
}

func (r *renderer) compare(op string, a, b Value, line int) (bool, error) {
	switch op {
	case "==", "!=":
		eq, err := r.equal(a, b, 0)
		return eq == (op == "=="), err
	case "in", "not in":
		in, err := r.contains(b, a, line)
		return in == (op == "in"), err
	}
	c, err := r.order(a, b, 0, line)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	}
	return c >= 0, nil
}

// equal is Python's ==, bounded by MaxValueDepth and MaxSteps.
func (r *renderer) equal(a, b Value, depth int64) (bool, error) {
	if depth > r.lim.MaxValueDepth {
		return false, r.depthError()
	}
	if err := r.step(); err != nil {
		return false, err
	}
	if a.isNumber() && b.isNumber() {
		if a.kind != KindFloat && b.kind != KindFloat {
			return a.i == b.i, nil
		}
		return a.toFloat() == b.toFloat(), nil
	}
	if a.kind != b.kind {
		return false, nil
	}
	switch a.kind {
	case KindUndefined, KindNone:
		return true, nil
	case KindString:
		if len(a.s) == len(b.s) {
			if err := r.scan(len(a.s)); err != nil {
				return false, err
			}
		}
		return a.s == b.s, nil
	case KindList:
		x, y := a.p.(*List), b.p.(*List)
		if x.tuple != y.tuple || len(x.Items) != len(y.Items) {
			return false, nil
		}
		for i := range x.Items {
			if eq, err := r.equal(x.Items[i], y.Items[i], depth+1); err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	case KindDict:
		x, y := a.p.(*Dict), b.p.(*Dict)
		if x == y {
			return true, nil
		}
		if x.namespace || y.namespace || len(x.keys) != len(y.keys) {
			return false, nil
		}
		for i, k := range x.keys {
			w, ok := y.get(k)
			if !ok {
				return false, nil
			}
			if eq, err := r.equal(x.vals[i], w, depth+1); err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	}
	return a.p == b.p, nil
}

// order compares a and b as Python's < does: numbers, strings, lists.
func (r *renderer) order(a, b Value, depth int64, line int) (int, error) {
	if depth > r.lim.MaxValueDepth {
		return 0, r.depthError()
	}
	if err := r.step(); err != nil {
		return 0, err
	}
	switch {
	case a.isNumber() && b.isNumber():
		if a.kind != KindFloat && b.kind != KindFloat {
			return cmp3(a.i < b.i, a.i > b.i), nil
		}
		x, y := a.toFloat(), b.toFloat()
		return cmp3(x < y, x > y), nil
	case a.kind == KindString && b.kind == KindString:
		if err := r.scan(min(len(a.s), len(b.s))); err != nil {
			return 0, err
		}
		return strings.Compare(a.s, b.s), nil
	case a.kind == KindList && b.kind == KindList:
		x, y := a.p.(*List).Items, b.p.(*List).Items
		for i := 0; i < len(x) && i < len(y); i++ {
			eq, err := r.equal(x[i], y[i], depth+1)
			if err != nil {
				return 0, err
			}
			if !eq {
				return r.order(x[i], y[i], depth+1, line)
			}
		}
		return cmp3(len(x) < len(y), len(x) > len(y)), nil
	}
	return 0, newError(line, "'<' not supported between instances of '%s' and '%s'", typeName(a), typeName(b))
}

func cmp3(lt, gt bool) int {
	switch {
	case lt:
		return -1
	case gt:
		return 1
	}
	return 0
}

// contains is Python's "x in container".
func (r *renderer) contains(container, x Value, line int) (bool, error) {
	switch container.kind {
	case KindString:
		if x.kind != KindString {
			return false, newError(line, "'in <string>' requires string as left operand, not %s", typeName(x))
		}
		if err := r.scan(len(container.s)); err != nil {
			return false, err
		}
		return strings.Contains(container.s, x.s), nil
	case KindList:
		for _, it := range container.p.(*List).Items {
			eq, err := r.equal(it, x, 0)
			if err != nil || eq {
				return eq, err
			}
		}
		return false, nil
	case KindDict:
		_, ok := container.p.(*Dict).get(x)
		return ok, nil
	case KindUndefined:
		return false, nil
	}
	return false, newError(line, "argument of type '%s' is not iterable", typeName(container))
}
