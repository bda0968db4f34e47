package jinja

import (
	"math"
	"strconv"
)

// Kind is the type of a Value.
type Kind uint8

// The kinds of values.
const (
	KindUndefined Kind = iota
	KindNone
	KindBool
	KindInt
	KindFloat
	KindString
	KindList
	KindDict
	KindFunc
)

// Value is a value a template reads or builds. The zero Value is
// undefined. Lists and dicts are shared by reference, as in Python.
type Value struct {
	kind Kind
	i    int64 // KindBool (0 or 1), KindInt
	f    float64
	s    string
	p    any // *List, *Dict, *Func
}

// List is a list (or tuple) value's items.
type List struct {
	Items []Value
	tuple bool
}

// Dict is a dict value: its keys keep the order they were set in.
type Dict struct {
	keys  []Value
	vals  []Value
	index map[dictKey]int
	// namespace marks the object namespace() returns, whose attributes
	// a template may set.
	namespace bool
}

// Func is a callable value: a macro, a builtin, or a function the caller
// passes in.
type Func struct {
	Name string
	Fn   func(c *Call) (Value, error)
}

// Call is what a Func receives.
type Call struct {
	Args   []Value
	Kwargs []Kwarg
	r      *renderer
}

// Kwarg is a keyword argument.
type Kwarg struct {
	Name  string
	Value Value
}

// Undefined returns the undefined value.
func Undefined() Value { return Value{} }

// None returns Python's None (JSON's null).
func None() Value { return Value{kind: KindNone} }

// NewBool returns a boolean value.
func NewBool(b bool) Value {
	if b {
		return Value{kind: KindBool, i: 1}
	}
	return Value{kind: KindBool}
}

// NewInt returns an integer value.
func NewInt(i int64) Value { return Value{kind: KindInt, i: i} }

// NewFloat returns a float value.
func NewFloat(f float64) Value { return Value{kind: KindFloat, f: f} }

// NewString returns a string value.
func NewString(s string) Value { return Value{kind: KindString, s: s} }

// NewList returns a list of items (not copied).
func NewList(items []Value) Value { return Value{kind: KindList, p: &List{Items: items}} }

func newTuple(items []Value) Value { return Value{kind: KindList, p: &List{Items: items, tuple: true}} }

// NewDict returns an empty dict; set its keys with AsDict().Set.
func NewDict() Value { return Value{kind: KindDict, p: &Dict{}} }

// NewFunc returns a callable value.
func NewFunc(name string, fn func(c *Call) (Value, error)) Value {
	return Value{kind: KindFunc, p: &Func{Name: name, Fn: fn}}
}

// Kind returns v's kind.
func (v Value) Kind() Kind { return v.kind }

// AsDict returns v's dict, nil if v is not one.
func (v Value) AsDict() *Dict {
	d, _ := v.p.(*Dict)
	return d
}

// AsList returns v's list, nil if v is not one.
func (v Value) AsList() *List {
	l, _ := v.p.(*List)
	return l
}

// String returns a string value's text, and Python's str() of others at
// a bounded depth.
func (v Value) String() string {
	if v.kind == KindString {
		return v.s
	}
	r := &renderer{lim: DefaultLimits()}
	s, err := r.str(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return s
}

// dictKey is a dict key: Python's equal keys (1, 1.0, True) map alike.
type dictKey struct {
	kind Kind
	i    int64
	f    float64
	s    string
}

func keyOf(v Value) (dictKey, bool) {
	switch v.kind {
	case KindNone:
		return dictKey{kind: KindNone}, true
	case KindBool, KindInt:
		return dictKey{kind: KindInt, i: v.i}, true
	case KindFloat:
		if v.f == math.Trunc(v.f) && math.Abs(v.f) < 1<<62 {
			return dictKey{kind: KindInt, i: int64(v.f)}, true
		}
		return dictKey{kind: KindFloat, f: v.f}, true
	case KindString:
		return dictKey{kind: KindString, s: v.s}, true
	}
	return dictKey{}, false
}

// Set sets key to v, appending key if it is new. Keys are strings, numbers,
// booleans or None; Set ignores others.
func (d *Dict) Set(key string, v Value) { d.set(NewString(key), v) }

func (d *Dict) set(key Value, v Value) bool {
	k, ok := keyOf(key)
	if !ok {
		return false
	}
	if i := d.find(k); i >= 0 {
		d.vals[i] = v
		return true
	}
	if d.index != nil {
		d.index[k] = len(d.keys)
	} else if len(d.keys) >= smallDict {
		d.index = make(map[dictKey]int, 2*smallDict)
		for i, kk := range d.keys {
			kv, _ := keyOf(kk)
			d.index[kv] = i
		}
		d.index[k] = len(d.keys)
	}
	d.keys = append(d.keys, key)
	d.vals = append(d.vals, v)
	return true
}

// smallDict is the size up to which a dict is searched without an index.
const smallDict = 16

func (d *Dict) find(k dictKey) int {
	if d.index != nil {
		if i, ok := d.index[k]; ok {
			return i
		}
		return -1
	}
	for i, kk := range d.keys {
		if kv, _ := keyOf(kk); kv == k {
			return i
		}
	}
	return -1
}

// Get returns key's value.
func (d *Dict) Get(key string) (Value, bool) { return d.get(NewString(key)) }

func (d *Dict) get(key Value) (Value, bool) {
	k, ok := keyOf(key)
	if !ok {
		return Value{}, false
	}
	i := d.find(k)
	if i < 0 {
		return Value{}, false
	}
	return d.vals[i], true
}

func (d *Dict) remove(key Value) (Value, bool) {
	k, ok := keyOf(key)
	if !ok {
		return Value{}, false
	}
	i := d.find(k)
	if i < 0 {
		return Value{}, false
	}
	v := d.vals[i]
	d.keys = append(d.keys[:i:i], d.keys[i+1:]...)
	d.vals = append(d.vals[:i:i], d.vals[i+1:]...)
	if d.index != nil {
		delete(d.index, k)
		for j := i; j < len(d.keys); j++ {
			kk, _ := keyOf(d.keys[j])
			d.index[kk] = j
		}
	}
	return v, true
}

// Len returns the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

func (v Value) truthy() bool {
	switch v.kind {
	case KindBool, KindInt:
		return v.i != 0
	case KindFloat:
		return v.f != 0
	case KindString:
		return v.s != ""
	case KindList:
		return len(v.p.(*List).Items) > 0
	case KindDict:
		return len(v.p.(*Dict).keys) > 0 || v.p.(*Dict).namespace
	case KindFunc:
		return true
	}
	return false
}

func (v Value) isNumber() bool { return v.kind == KindInt || v.kind == KindFloat || v.kind == KindBool }

func (v Value) toFloat() float64 {
	if v.kind == KindFloat {
		return v.f
	}
	return float64(v.i)
}

func typeName(v Value) string {
	switch v.kind {
	case KindUndefined:
		return "undefined"
	case KindNone:
		return "NoneType"
	case KindBool:
		return "bool"
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindString:
		return "str"
	case KindList:
		if v.p.(*List).tuple {
			return "tuple"
		}
		return "list"
	case KindDict:
		if v.p.(*Dict).namespace {
			return "Namespace"
		}
		return "dict"
	}
	return "function"
}

// formatFloat writes f as Python's repr does.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	exp := math.Floor(math.Log10(math.Abs(f)))
	if exp < -4 || exp >= 16 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Go writes e+06; Python e+06 too, but 1e+16 not 1e+016: same.
		return s
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s
		}
	}
	return s + ".0"
}
