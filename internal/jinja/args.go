package jinja

// args reads a builtin's arguments by position or keyword.
type args struct {
	pos []Value
	kw  []Kwarg
}

// get returns the argument at position i (counting from the first after
// the value a filter applies to) or named name.
func (a args) get(i int, name string) (Value, bool) {
	for _, k := range a.kw {
		if k.Name == name {
			return k.Value, true
		}
	}
	if i >= 0 && i < len(a.pos) {
		return a.pos[i], true
	}
	return Value{}, false
}

func (a args) or(i int, name string, def Value) Value {
	if v, ok := a.get(i, name); ok && v.kind != KindUndefined {
		return v
	}
	return def
}

func (a args) boolean(i int, name string) bool {
	v, _ := a.get(i, name)
	return v.truthy()
}

func (a args) int(i int, name string, def int64) (int64, error) {
	v, ok := a.get(i, name)
	if !ok || v.kind == KindNone || v.kind == KindUndefined {
		return def, nil
	}
	switch v.kind {
	case KindInt, KindBool:
		return v.i, nil
	case KindFloat:
		if v.f >= -9.2e18 && v.f <= 9.2e18 {
			return int64(v.f), nil
		}
	}
	return 0, newError(0, "argument %q must be an integer, not '%s'", name, typeName(v))
}

func (a args) str(i int, name string, def string) (string, bool, error) {
	v, ok := a.get(i, name)
	if !ok || v.kind == KindNone || v.kind == KindUndefined {
		return def, false, nil
	}
	if v.kind != KindString {
		return "", false, newError(0, "argument %q must be a string, not '%s'", name, typeName(v))
	}
	return v.s, true, nil
}
