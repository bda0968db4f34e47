package jinja

import (
	"sort"
	"strings"
)

// The filters over sequences: items, sorting, map, select, unique.

func (r *renderer) items(v Value) ([]Value, error) {
	if v.kind == KindUndefined {
		return nil, nil
	}
	d := v.AsDict()
	if d == nil {
		return nil, newError(0, "'%s' object has no attribute 'items'", typeName(v))
	}
	if err := r.checkItems(int64(len(d.keys)) * 2); err != nil {
		return nil, err
	}
	out := make([]Value, len(d.keys))
	for i, k := range d.keys {
		out[i] = newTuple([]Value{k, d.vals[i]})
	}
	return out, nil
}

func fItems(r *renderer, v Value, a args) (Value, error) {
	items, err := r.items(v)
	return NewList(items), err
}

// sortKey lowers strings for the case-insensitive sorts.
func sortKey(v Value, caseSensitive bool) Value {
	if !caseSensitive && v.kind == KindString {
		return NewString(strings.ToLower(v.s))
	}
	return v
}

// sortIndices sorts idx stably by key, as Python's sorted does.
func (r *renderer) sortIndices(idx []int, key func(int) Value, reverse bool) error {
	var err error
	sort.SliceStable(idx, func(i, j int) bool {
		if err != nil {
			return false
		}
		var c int
		c, err = r.order(key(idx[i]), key(idx[j]), 0, 0)
		if reverse {
			return c > 0
		}
		return c < 0
	})
	return err
}

func (r *renderer) sortValues(items []Value, key func(Value) Value, reverse bool) ([]Value, error) {
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	keys := make([]Value, len(items))
	for i, it := range items {
		keys[i] = key(it)
	}
	if err := r.sortIndices(idx, func(i int) Value { return keys[i] }, reverse); err != nil {
		return nil, err
	}
	out := make([]Value, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out, nil
}

func fDictsort(r *renderer, v Value, a args) (Value, error) {
	items, err := r.items(v)
	if err != nil {
		return Value{}, err
	}
	cs := a.boolean(0, "case_sensitive")
	by, _, err := a.str(1, "by", "key")
	if err != nil {
		return Value{}, err
	}
	pos := 0
	if by == "value" {
		pos = 1
	}
	out, err := r.sortValues(items, func(t Value) Value { return sortKey(t.p.(*List).Items[pos], cs) }, a.boolean(2, "reverse"))
	return NewList(out), err
}

func fSort(r *renderer, v Value, a args) (Value, error) {
	items, err := r.seq(v)
	if err != nil {
		return Value{}, err
	}
	cs := a.boolean(1, "case_sensitive")
	attr, hasAttr, err := a.str(2, "attribute", "")
	if err != nil {
		return Value{}, err
	}
	out, err := r.sortValues(items, func(x Value) Value {
		if hasAttr {
			x = r.attribute(x, attr)
		}
		return sortKey(x, cs)
	}, a.boolean(0, "reverse"))
	return NewList(out), err
}

func fMap(r *renderer, v Value, a args) (Value, error) {
	items, err := r.seq(v)
	if err != nil {
		return Value{}, err
	}
	out := make([]Value, len(items))
	if attr, ok, err := a.str(-1, "attribute", ""); err != nil {
		return Value{}, err
	} else if ok {
		def, hasDef := a.get(-1, "default")
		for i, it := range items {
			if err := r.step(); err != nil {
				return Value{}, err
			}
			out[i] = r.attribute(it, attr)
			if hasDef && out[i].kind == KindUndefined {
				out[i] = def
			}
		}
		return NewList(out), nil
	}
	name, _, err := a.str(0, "name", "")
	if err != nil {
		return Value{}, err
	}
	rest := args{pos: a.pos[min(1, len(a.pos)):], kw: a.kw}
	for i, it := range items {
		if err := r.step(); err != nil {
			return Value{}, err
		}
		if out[i], err = r.applyFilter(name, it, rest); err != nil {
			return Value{}, err
		}
	}
	return NewList(out), nil
}

func selectFilter(reject, byAttr bool) filterFunc {
	return func(r *renderer, v Value, a args) (Value, error) {
		items, err := r.seq(v)
		if err != nil {
			return Value{}, err
		}
		pos := a.pos
		attr := ""
		if byAttr {
			if len(pos) == 0 || pos[0].kind != KindString {
				return Value{}, newError(0, "selectattr needs an attribute name")
			}
			attr, pos = pos[0].s, pos[1:]
		}
		test := ""
		if len(pos) > 0 {
			if pos[0].kind != KindString {
				return Value{}, newError(0, "select needs a test name")
			}
			test, pos = pos[0].s, pos[1:]
		}
		var out []Value
		for _, it := range items {
			if err := r.step(); err != nil {
				return Value{}, err
			}
			x := it
			if byAttr {
				x = r.attribute(it, attr)
			}
			ok := x.truthy()
			if test != "" {
				if ok, err = r.test(test, x, pos, 0); err != nil {
					return Value{}, err
				}
			}
			if ok != reject {
				out = append(out, it)
			}
		}
		return NewList(out), nil
	}
}

func fUnique(r *renderer, v Value, a args) (Value, error) {
	items, err := r.seq(v)
	if err != nil {
		return Value{}, err
	}
	cs := a.boolean(0, "case_sensitive")
	attr, hasAttr, err := a.str(1, "attribute", "")
	if err != nil {
		return Value{}, err
	}
	var out, keys []Value
	for _, it := range items {
		k := it
		if hasAttr {
			k = r.attribute(it, attr)
		}
		k = sortKey(k, cs)
		seen := false
		for _, o := range keys {
			eq, err := r.equal(o, k, 0)
			if err != nil {
				return Value{}, err
			}
			if eq {
				seen = true
				break
			}
		}
		if !seen {
			keys = append(keys, k)
			out = append(out, it)
		}
	}
	return NewList(out), nil
}

func fReverse(r *renderer, v Value, a args) (Value, error) {
	if v.kind == KindString {
		if err := r.checkString(int64(len(v.s)) * 5); err != nil { // the runes and the result
			return Value{}, err
		}
		rs := []rune(v.s)
		for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
			rs[i], rs[j] = rs[j], rs[i]
		}
		return NewString(string(rs)), nil
	}
	items, err := r.seq(v)
	if err != nil {
		return Value{}, err
	}
	for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
		items[i], items[j] = items[j], items[i]
	}
	return NewList(items), nil
}
