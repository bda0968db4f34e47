package jinja

import (
	"context"
	"unicode/utf8"
)

// renderer is the state of one render: its counters against Limits.
type renderer struct {
	lim       Limits
	ctx       context.Context
	steps     int64
	alloc     int64
	callDepth int64
	root      *scope
}

// ctxEvery is how many steps pass between two checks of the context.
const ctxEvery = 1024

// scope is a frame of variables: a loop iteration's, a macro call's, the
// template's. A frame of a few names keeps them in slices (a loop's
// iteration allocates no map); one of many, in a map.
type scope struct {
	names  []string
	vals   []Value
	vars   map[string]Value // beyond smallScope names
	parent *scope
	// The first names' room, in the frame itself (a loop's target and
	// its loop).
	nameBuf [2]string
	valBuf  [2]Value
}

// smallScope is the number of names a frame keeps without a map.
const smallScope = 16

func (s *scope) own(name string) (Value, bool) {
	if s.vars != nil {
		v, ok := s.vars[name]
		return v, ok
	}
	for i, n := range s.names {
		if n == name {
			return s.vals[i], true
		}
	}
	return Value{}, false
}

func (s *scope) lookup(name string) (Value, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.own(name); ok {
			return v, true
		}
	}
	return Value{}, false
}

func (s *scope) set(name string, v Value) {
	if s.vars != nil {
		s.vars[name] = v
		return
	}
	for i, n := range s.names {
		if n == name {
			s.vals[i] = v
			return
		}
	}
	if len(s.names) == smallScope {
		s.vars = make(map[string]Value, 2*smallScope)
		for i, n := range s.names {
			s.vars[n] = s.vals[i]
		}
		s.names, s.vals = nil, nil
		s.vars[name] = v
		return
	}
	s.names = append(s.names, name)
	s.vals = append(s.vals, v)
}

func (s *scope) child() *scope {
	c := &scope{parent: s}
	c.names, c.vals = c.nameBuf[:0], c.valBuf[:0]
	return c
}

// step counts one evaluation step.
func (r *renderer) step() error { return r.charge(1) }

// charge counts n steps, checking the context every ctxEvery.
func (r *renderer) charge(n int64) error {
	before := r.steps
	r.steps += n
	if r.steps > r.lim.MaxSteps || r.steps < before {
		r.steps = r.lim.MaxSteps + 1
		return &LimitError{Limit: "MaxSteps", Value: r.lim.MaxSteps}
	}
	if r.ctx != nil && (before/ctxEvery != r.steps/ctxEvery) {
		if err := r.ctx.Err(); err != nil {
			return &ctxError{err}
		}
	}
	return nil
}

// account counts n bytes the render builds.
func (r *renderer) account(n int64) error {
	r.alloc += n
	if r.alloc > r.lim.MaxAllocBytes || n < 0 {
		return &LimitError{Limit: "MaxAllocBytes", Value: r.lim.MaxAllocBytes}
	}
	return nil
}

// scan counts the steps of a pass over n bytes of a string: operations
// linear in a string's length (search, comparison, trimming) count one
// step per 256 bytes, so that MaxSteps bounds them too.
func (r *renderer) scan(n int) error { return r.charge(int64(n) / 256) }

// scanRunes counts a pass over n bytes decoding UTF-8, which is slower.
func (r *renderer) scanRunes(n int) error { return r.charge(int64(n) / 64) }

// itemBytes is what one list or dict item counts in MaxAllocBytes.
const itemBytes = 64

// checkString tells whether a string of n bytes may be built, and counts it.
func (r *renderer) checkString(n int64) error {
	if n > r.lim.MaxValueBytes || n < 0 {
		return &LimitError{Limit: "MaxValueBytes", Value: r.lim.MaxValueBytes}
	}
	if err := r.charge(n / 4096); err != nil {
		return err
	}
	return r.account(n)
}

// checkItems tells whether a list or dict of n items may be built, and
// counts it.
func (r *renderer) checkItems(n int64) error {
	if n > r.lim.MaxValueItems || n < 0 {
		return &LimitError{Limit: "MaxValueItems", Value: r.lim.MaxValueItems}
	}
	if err := r.charge(n / 64); err != nil {
		return err
	}
	return r.account(n * itemBytes)
}

// growItems tells whether a list or dict of n items may grow by k in
// place, and counts the k.
func (r *renderer) growItems(n, k int64) error {
	if n+k > r.lim.MaxValueItems || k < 0 {
		return &LimitError{Limit: "MaxValueItems", Value: r.lim.MaxValueItems}
	}
	if err := r.charge(k / 64); err != nil {
		return err
	}
	return r.account(k * itemBytes)
}

func (r *renderer) depthError() error {
	return &LimitError{Limit: "MaxValueDepth", Value: r.lim.MaxValueDepth}
}

// control is how a body ended: normally, or by break or continue.
type control uint8

const (
	ctrlNone control = iota
	ctrlBreak
	ctrlContinue
)

func (r *renderer) execBody(body []node, sc *scope, w *sink) (control, error) {
	for _, n := range body {
		c, err := r.exec(n, sc, w)
		if err != nil || c != ctrlNone {
			return c, err
		}
	}
	return ctrlNone, nil
}

func (r *renderer) exec(n node, sc *scope, w *sink) (control, error) {
	if err := r.step(); err != nil {
		return 0, err
	}
	switch n := n.(type) {
	case *textNode:
		return 0, w.write(r, n.s)
	case *outputNode:
		v, err := r.eval(n.e, sc)
		if err != nil {
			return 0, err
		}
		s, err := r.str(v)
		if err != nil {
			return 0, err
		}
		return 0, w.write(r, s)
	case *ifNode:
		for i, c := range n.conds {
			v, err := r.eval(c, sc)
			if err != nil {
				return 0, err
			}
			if v.truthy() {
				return r.execBody(*n.bodies[i], sc, w)
			}
		}
		if n.els != nil {
			return r.execBody(*n.els, sc, w)
		}
		return 0, nil
	case *forNode:
		return 0, r.execFor(n, sc, w)
	case *setNode:
		return 0, r.execSet(n, sc)
	case *macroNode:
		sc.set(n.m.name, r.macroValue(n.m, sc, nil))
		return 0, nil
	case *callBlockNode:
		caller := r.macroValue(n.caller, sc, nil)
		v, err := r.callExpr(n.call, sc, &caller)
		if err != nil {
			return 0, err
		}
		s, err := r.str(v)
		if err != nil {
			return 0, err
		}
		return 0, w.write(r, s)
	case *filterBlockNode:
		s, err := r.capture(n.body, sc)
		if err != nil {
			return 0, err
		}
		v, err := r.applyFilters(NewString(s), n.filters, sc)
		if err != nil {
			return 0, err
		}
		out, err := r.str(v)
		if err != nil {
			return 0, err
		}
		return 0, w.write(r, out)
	case *blockNode:
		return r.execBody(n.body, sc, w)
	case *ctrlNode:
		if n.brk {
			return ctrlBreak, nil
		}
		return ctrlContinue, nil
	case *doNode:
		_, err := r.eval(n.e, sc)
		return 0, err
	}
	return 0, newError(0, "unknown node %T", n)
}

// capture renders body into a string bounded by MaxValueBytes.
func (r *renderer) capture(body []node, sc *scope) (string, error) {
	w := &sink{max: r.lim.MaxValueBytes, limit: "MaxValueBytes"}
	if _, err := r.execBody(body, sc, w); err != nil {
		return "", err
	}
	return w.b.String(), nil
}

func (r *renderer) applyFilters(v Value, fs []*filterExpr, sc *scope) (Value, error) {
	for _, f := range fs {
		var err error
		if v, err = r.filter(f, v, sc); err != nil {
			return Value{}, err
		}
	}
	return v, nil
}

func (r *renderer) execSet(n *setNode, sc *scope) error {
	if n.block {
		s, err := r.capture(n.body, sc)
		if err != nil {
			return err
		}
		v, err := r.applyFilters(NewString(s), n.filters, sc)
		if err != nil {
			return err
		}
		sc.set(n.targets[0], v)
		return nil
	}
	v, err := r.eval(n.e, sc)
	if err != nil {
		return err
	}
	if n.ns != "" {
		obj, _ := sc.lookup(n.ns)
		d := obj.AsDict()
		if d == nil || !d.namespace {
			return newError(n.line, "cannot assign attribute on a non-namespace object %q", n.ns)
		}
		d.set(NewString(n.attr), v)
		return nil
	}
	return r.assign(n.targets, v, sc, n.line)
}

func (r *renderer) assign(targets []string, v Value, sc *scope, line int) error {
	if len(targets) == 1 {
		sc.set(targets[0], v)
		return nil
	}
	items, err := r.iterate(v, line)
	if err != nil {
		return err
	}
	if len(items) != len(targets) {
		return newError(line, "cannot unpack %d values into %d names", len(items), len(targets))
	}
	for i, t := range targets {
		sc.set(t, items[i])
	}
	return nil
}

func (r *renderer) execFor(n *forNode, sc *scope, w *sink) error {
	var seq loopSeq
	if lr, ok, err := r.lazyRange(n.iter, sc); err != nil {
		return err
	} else if ok && n.cond == nil {
		seq = lr
	} else {
		it, err := r.eval(n.iter, sc)
		if err != nil {
			return err
		}
		items, err := r.iterate(it, n.line)
		if err != nil {
			return err
		}
		if n.cond != nil {
			if items, err = r.filterLoop(n, items, sc); err != nil {
				return err
			}
		}
		seq = loopSeq{items: items, count: int64(len(items))}
	}
	if seq.count == 0 {
		if n.els != nil {
			_, err := r.execBody(n.els, sc, w)
			return err
		}
		return nil
	}
	length := seq.count
	for idx := int64(0); idx < length; idx++ {
		if err := r.step(); err != nil {
			return err
		}
		inner := sc.child()
		if err := r.assign(n.targets, seq.at(idx), inner, n.line); err != nil {
			return err
		}
		if !n.usesLoop {
			c, err := r.execBody(n.body, inner, w)
			if err != nil {
				return err
			}
			if c == ctrlBreak {
				break
			}
			continue
		}
		vals := make([]Value, len(loopKeys))
		vals[0], vals[1] = NewInt(idx+1), NewInt(idx)
		vals[2], vals[3] = NewInt(length-idx), NewInt(length-idx-1)
		vals[4], vals[5], vals[6] = NewBool(idx == 0), NewBool(idx == length-1), NewInt(length)
		vals[7], vals[8] = NewInt(1), NewInt(0)
		nk := 9
		if idx > 0 {
			vals[nk] = seq.at(idx - 1)
			nk++
		}
		keys := loopKeys[:nk:nk]
		if idx < length-1 {
			vals[nk] = seq.at(idx + 1)
			keys = loopKeys[: nk+1 : nk+1]
			if idx == 0 {
				keys = loopKeysFirst
			}
			nk++
		}
		loop := &Dict{keys: keys, vals: vals[:nk:nk]}
		inner.set("loop", Value{kind: KindDict, p: loop})
		c, err := r.execBody(n.body, inner, w)
		if err != nil {
			return err
		}
		if c == ctrlBreak {
			break
		}
	}
	return nil
}

// loopSeq is what a loop walks: items, or a range's integers (start +
// i*step), which need not be built.
type loopSeq struct {
	items       []Value
	start, step int64
	count       int64
}

func (s loopSeq) at(i int64) Value {
	if s.items != nil {
		return s.items[i]
	}
	return NewInt(s.start + i*s.step)
}

// lazyRange reads a loop over range(...) (the builtin, not shadowed) as
// the range's bounds, checked as range() checks them, without building
// its list.
func (r *renderer) lazyRange(e expr, sc *scope) (loopSeq, bool, error) {
	c, ok := e.(*callExpr)
	if !ok || len(c.kwargs) > 0 {
		return loopSeq{}, false, nil
	}
	name, ok := c.fn.(*nameExpr)
	if !ok || name.name != "range" {
		return loopSeq{}, false, nil
	}
	if fn, _ := sc.lookup("range"); fn.p != globals["range"] {
		return loopSeq{}, false, nil
	}
	args, err := r.evalArgs(c.args, sc)
	if err != nil {
		return loopSeq{}, false, err
	}
	start, step, count, err := r.rangeBounds(args)
	if err != nil {
		if e, ok := err.(*Error); ok && e.Line == 0 {
			e.Line = c.line
		}
		return loopSeq{}, false, err
	}
	return loopSeq{start: start, step: step, count: count}, true, nil
}

// filterLoop keeps the items for which the loop's if holds.
func (r *renderer) filterLoop(n *forNode, all []Value, sc *scope) ([]Value, error) {
	var items []Value
	for _, x := range all {
		if err := r.step(); err != nil {
			return nil, err
		}
		inner := sc.child()
		if err := r.assign(n.targets, x, inner, n.line); err != nil {
			return nil, err
		}
		c, err := r.eval(n.cond, inner)
		if err != nil {
			return nil, err
		}
		if c.truthy() {
			items = append(items, x)
		}
	}
	return items, nil
}

// The keys of a loop's dict, shared by every iteration's (a dict never
// writes into its keys' array: the slices end at their capacity).
var (
	loopKeys      = stringValues("index", "index0", "revindex", "revindex0", "first", "last", "length", "depth", "depth0", "previtem", "nextitem")
	loopKeysFirst = stringValues("index", "index0", "revindex", "revindex0", "first", "last", "length", "depth", "depth0", "nextitem")
)

func stringValues(ss ...string) []Value {
	vs := make([]Value, len(ss))
	for i, s := range ss {
		vs[i] = NewString(s)
	}
	return vs
}

// iterate returns the items a for loop walks: a list's items (a copy, so
// that changing the list does not change the loop), a dict's keys, a
// string's characters; undefined walks nothing.
func (r *renderer) iterate(v Value, line int) ([]Value, error) {
	switch v.kind {
	case KindUndefined:
		return nil, nil
	case KindList:
		items := v.p.(*List).Items
		if err := r.charge(int64(len(items)) / 64); err != nil {
			return nil, err
		}
		return append([]Value(nil), items...), nil
	case KindDict:
		d := v.p.(*Dict)
		if err := r.charge(int64(len(d.keys)) / 64); err != nil {
			return nil, err
		}
		return append([]Value(nil), d.keys...), nil
	case KindString:
		if err := r.scanRunes(len(v.s)); err != nil {
			return nil, err
		}
		if err := r.checkItems(int64(utf8.RuneCountInString(v.s))); err != nil {
			return nil, err
		}
		rs := []rune(v.s)
		items := make([]Value, len(rs))
		for i, c := range rs {
			items[i] = NewString(string(c))
		}
		return items, nil
	}
	return nil, newError(line, "'%s' object is not iterable", typeName(v))
}

// macroValue makes a macro (or a call block's caller) a callable value
// closing over sc.
func (r *renderer) macroValue(m *macroDef, sc *scope, _ *Value) Value {
	return NewFunc(m.name, func(c *Call) (Value, error) {
		return c.r.callMacro(m, sc, c)
	})
}

func (r *renderer) callMacro(m *macroDef, defScope *scope, c *Call) (Value, error) {
	r.callDepth++
	defer func() { r.callDepth-- }()
	if r.callDepth > r.lim.MaxCallDepth {
		return Value{}, &LimitError{Limit: "MaxCallDepth", Value: r.lim.MaxCallDepth}
	}
	sc := defScope.child()
	var varargs []Value
	for i, a := range c.Args {
		if i < len(m.params) {
			sc.set(m.params[i], a)
		} else {
			varargs = append(varargs, a)
		}
	}
	kwargs := NewDict()
	for _, kw := range c.Kwargs {
		if kw.Name == "caller" {
			sc.set("caller", kw.Value)
			continue
		}
		found := false
		for _, p := range m.params {
			if p == kw.Name {
				sc.set(p, kw.Value)
				found = true
			}
		}
		if !found {
			kwargs.AsDict().Set(kw.Name, kw.Value)
		}
	}
	for i, p := range m.params {
		if _, ok := sc.own(p); ok {
			continue
		}
		if m.defaults[i] != nil {
			v, err := r.eval(m.defaults[i], sc)
			if err != nil {
				return Value{}, err
			}
			sc.set(p, v)
		} else {
			sc.set(p, Value{})
		}
	}
	sc.set("varargs", newTuple(varargs))
	sc.set("kwargs", kwargs)
	s, err := r.capture(m.body, sc)
	if err != nil {
		return Value{}, err
	}
	return NewString(s), nil
}
