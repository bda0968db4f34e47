package grammar

import (
	"cmp"
	"encoding/json"
	"fmt"
	"github.com/llamaloop/llamaloop/internal/quote"
	"math/big"
	"slices"
	"strings"
)

// The intersection of schemas (allOf, $ref beside other keywords, anyOf and oneOf distributed
// over their siblings) and the proof that the branches of a oneOf are disjoint.

// flat returns a schema equivalent to s without allOf and $ref: the intersection of its own
// keywords, its $ref's target and its allOf members.
func (c *converter) flat(s *node, path string, depth int) (*node, error) {
	switch {
	case isTrue(s):
		return &node{kind: 'o', raw: json.RawMessage("{}")}, nil
	case isFalse(s):
		return falseNode, nil
	case s.kind != 'o':
		return nil, fail(path, "", "a schema must be an object or a boolean")
	}
	if depth > 32 {
		return nil, fail(path, "$ref", "a cycle of $ref and allOf that does not descend into a value")
	}
	if err := check(s, path); err != nil {
		return nil, err
	}
	if err := c.checkDialect(s, path); err != nil {
		return nil, err
	}
	acc := &node{kind: 'o'}
	for i, k := range s.keys {
		if k != "allOf" && k != "$ref" && !isAnnotationIn(s, k) {
			acc.keys, acc.vals = append(acc.keys, k), append(acc.vals, s.vals[i])
		}
	}
	acc.raw = acc.encode()
	acc, err := normalizeTuples(acc, path)
	if err != nil {
		return nil, err
	}
	if ref := s.get("$ref"); ref != nil {
		r, ok := ref.str()
		if !ok {
			return nil, fail(path, "$ref", "$ref must be a string")
		}
		target, at, err := c.resolve(r, path)
		if err != nil {
			return nil, err
		}
		t, err := c.flat(target, at, depth+1)
		if err != nil {
			return nil, err
		}
		if acc, err = c.merge(acc, t, path); err != nil {
			return nil, err
		}
	}
	if all := s.get("allOf"); all != nil {
		if all.kind != 'a' || len(all.arr) == 0 {
			return nil, fail(path, "allOf", "allOf must be a non-empty array")
		}
		for i, m := range all.arr {
			at := fmt.Sprintf("%s/allOf/%d", path, i)
			f, err := c.flat(m, at, depth+1)
			if err != nil {
				return nil, err
			}
			if acc, err = c.merge(acc, f, at); err != nil {
				return nil, err
			}
		}
	}
	return acc, nil
}

// conj returns the schema of the values valid under every one of parts.
func conj(parts ...*node) *node {
	var keep []*node
	kept := map[string]bool{}
	var add func(p *node)
	add = func(p *node) {
		switch {
		case p == nil || isTrue(p):
		case p.kind == 'o' && len(p.keys) == 1 && p.keys[0] == "allOf" && p.vals[0].kind == 'a':
			for _, m := range p.vals[0].arr {
				add(m)
			}
		case !kept[string(p.raw)]:
			kept[string(p.raw)] = true
			keep = append(keep, p)
		}
	}
	for _, p := range parts {
		add(p)
	}
	switch len(keep) {
	case 0:
		return trueNode
	case 1:
		return keep[0]
	}
	n := &node{kind: 'o', keys: []string{"allOf"}, vals: []*node{arrNode(keep)}}
	n.raw = n.encode()
	return n
}

// maxBranches bounds the branches of an anyOf or oneOf built by intersecting two of them.
const maxBranches = 256

// merge returns the intersection of two flat schemas (no allOf, no $ref), or an error naming
// the keyword whose intersection the converter cannot express.
func (c *converter) merge(a, b *node, path string) (*node, error) {
	if isFalse(a) || isFalse(b) {
		return falseNode, nil
	}
	m := &merger{out: &node{kind: 'o'}, done: map[string]bool{}}
	for _, step := range []func(a, b *node, path string) (bool, error){
		m.types, m.enums, m.properties, m.required, m.items, m.bounds, m.strings, m.branches,
	} {
		empty, err := step(a, b, path)
		if err != nil {
			return nil, err
		}
		if empty {
			return falseNode, nil
		}
	}
	for _, s := range []*node{a, b} {
		for _, k := range s.keys {
			if !m.done[k] && !isAnnotationIn(s, k) {
				return nil, fail(path, k, "keyword %s cannot be intersected with the schemas beside it", quote.String(k))
			}
		}
	}
	m.out.raw = m.out.encode()
	return m.out, nil
}

// merger builds the intersection of two schemas keyword by keyword: each step sets the
// intersection of its keywords in out, marks them done, and reports an empty intersection.
type merger struct {
	out  *node
	done map[string]bool
}

func (m *merger) set(k string, v *node) {
	m.out.keys, m.out.vals = append(m.out.keys, k), append(m.out.vals, v)
}

// types intersects type.
func (m *merger) types(a, b *node, path string) (empty bool, err error) {
	if a.get("type") != nil || b.get("type") != nil {
		ta, err := typeMask(a, path)
		if err != nil {
			return false, err
		}
		tb, err := typeMask(b, path)
		if err != nil {
			return false, err
		}
		mask := ta & tb
		if mask == 0 {
			return true, nil
		}
		m.set("type", maskNode(mask))
	}
	m.done["type"] = true
	return false, nil
}

// enums intersects enum and const.
func (m *merger) enums(a, b *node, path string) (empty bool, err error) {
	ea, err := enumValues(a, path)
	if err != nil {
		return false, err
	}
	eb, err := enumValues(b, path)
	if err != nil {
		return false, err
	}
	if ea != nil || eb != nil {
		vals := ea
		if ea == nil {
			vals = eb
		} else if eb != nil {
			vals = nil
			inB := make(map[string]bool, len(eb))
			for _, w := range eb {
				inB[w.canon()] = true
			}
			for _, v := range ea {
				if inB[v.canon()] {
					vals = append(vals, v)
				}
			}
		}
		if len(vals) == 0 {
			return true, nil
		}
		m.set("enum", arrNode(vals))
	}
	m.done["enum"], m.done["const"] = true, true
	return false, nil
}

// properties intersects properties and additionalProperties.
func (m *merger) properties(a, b *node, path string) (empty bool, err error) {
	pa, pb := a.get("properties"), b.get("properties")
	aa, ab := a.get("additionalProperties"), b.get("additionalProperties")
	for _, p := range []*node{pa, pb} {
		if p != nil && p.kind != 'o' {
			return false, fail(path, "properties", "properties must be an object")
		}
	}
	if pa != nil || pb != nil {
		props := &node{kind: 'o'}
		var names []string
		named := map[string]bool{}
		for _, p := range []*node{pa, pb} {
			if p == nil {
				continue
			}
			for _, k := range p.keys {
				if !named[k] {
					named[k] = true
					names = append(names, k)
				}
			}
		}
		side := func(p, addl *node, k string) *node {
			if v := p.get(k); v != nil {
				return v
			}
			return addl
		}
		for _, k := range names {
			props.keys = append(props.keys, k)
			props.vals = append(props.vals, conj(side(pa, aa, k), side(pb, ab, k)))
		}
		props.raw = props.encode()
		m.set("properties", props)
	}
	if aa != nil || ab != nil {
		m.set("additionalProperties", conj(aa, ab))
	}
	m.done["properties"], m.done["additionalProperties"] = true, true
	return false, nil
}

// required unites required.
func (m *merger) required(a, b *node, path string) (empty bool, err error) {
	if ra, rb := a.get("required"), b.get("required"); ra != nil || rb != nil {
		var names []*node
		named := map[string]bool{}
		for _, r := range []*node{ra, rb} {
			if r == nil {
				continue
			}
			if r.kind != 'a' {
				return false, fail(path, "required", "required must be an array of names")
			}
			for _, n := range r.arr {
				if c := n.canon(); !named[c] {
					named[c] = true
					names = append(names, n)
				}
			}
		}
		m.set("required", arrNode(names))
	}
	m.done["required"] = true
	return false, nil
}

// items intersects items and prefixItems.
func (m *merger) items(a, b *node, path string) (empty bool, err error) {
	xa, xb := a.get("prefixItems"), b.get("prefixItems")
	ia, ib := a.get("items"), b.get("items")
	switch {
	case xa != nil && xb != nil:
		if xa.canon() != xb.canon() {
			return false, fail(path, "prefixItems", "the intersection of two different prefixItems lists is not supported")
		}
		m.set("prefixItems", xa)
	case xa != nil || xb != nil:
		x, other := xa, ib
		if x == nil {
			x, other = xb, ia
		}
		if x.kind != 'a' {
			return false, fail(path, "prefixItems", "prefixItems must be an array of schemas")
		}
		var parts []*node
		for _, p := range x.arr {
			parts = append(parts, conj(p, other))
		}
		m.set("prefixItems", arrNode(parts))
	}
	if ia != nil || ib != nil {
		m.set("items", conj(ia, ib))
	}
	m.done["prefixItems"], m.done["items"] = true, true
	return false, nil
}

// bounds intersects the size and number bounds.
func (m *merger) bounds(a, b *node, path string) (empty bool, err error) {
	for _, k := range []string{"minItems", "maxItems", "minLength", "maxLength"} {
		va, vb := a.get(k), b.get(k)
		if va == nil && vb == nil {
			continue
		}
		if va == nil || vb == nil {
			m.set(k, cmp.Or(va, vb))
			continue
		}
		x, okA := va.integer()
		y, okB := vb.integer()
		if !okA || !okB {
			return false, fail(path, k, "%s must be a non-negative integer", k)
		}
		if (x > y) == strings.HasPrefix(k, "min") {
			m.set(k, va)
		} else {
			m.set(k, vb)
		}
	}
	for _, k := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		va, vb := a.get(k), b.get(k)
		if va == nil && vb == nil {
			continue
		}
		if va == nil || vb == nil {
			m.set(k, cmp.Or(va, vb))
			continue
		}
		x, okA := new(big.Rat).SetString(string(va.raw))
		y, okB := new(big.Rat).SetString(string(vb.raw))
		if va.kind != 'n' || vb.kind != 'n' || !okA || !okB {
			return false, fail(path, k, "%s must be a number", k)
		}
		if (x.Cmp(y) > 0) == (k == "minimum" || k == "exclusiveMinimum") {
			m.set(k, va)
		} else {
			m.set(k, vb)
		}
	}
	for _, k := range []string{"minItems", "maxItems", "minLength", "maxLength", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		m.done[k] = true
	}
	return false, nil
}

// strings intersects pattern, format and multipleOf.
func (m *merger) strings(a, b *node, path string) (empty bool, err error) {
	for _, k := range []string{"pattern", "format", "multipleOf"} {
		va, vb := a.get(k), b.get(k)
		switch {
		case va == nil && vb == nil:
		case va == nil || vb == nil || va.canon() == vb.canon():
			m.set(k, cmp.Or(va, vb))
		case k == "multipleOf":
			return false, fail(path, k, "the intersection of two different multipleOf (%s and %s) is not supported", va.raw, vb.raw)
		case k == "format" && !knownFormat(va):
			m.set(k, vb)
		case k == "format" && !knownFormat(vb):
			m.set(k, va)
		default:
			return false, fail(path, k, "the intersection of two different %ss (%s and %s) is not supported", k, va.raw, vb.raw)
		}
		m.done[k] = true
	}
	return false, nil
}

// branches intersects anyOf and oneOf: the cross product of the branches when both sides have one.
func (m *merger) branches(a, b *node, path string) (empty bool, err error) {
	for _, k := range []string{"anyOf", "oneOf"} {
		va, vb := a.get(k), b.get(k)
		for _, v := range []*node{va, vb} {
			if v != nil && (v.kind != 'a' || len(v.arr) == 0) {
				return false, fail(path, k, "%s must be a non-empty array", k)
			}
		}
		switch {
		case va == nil && vb == nil:
		case va == nil || vb == nil:
			m.set(k, cmp.Or(va, vb))
		default:
			if len(va.arr)*len(vb.arr) > maxBranches {
				return false, fail(path, k, "the intersection of two %ss has more than %d branches", k, maxBranches)
			}
			var alts []*node
			for _, x := range va.arr {
				for _, y := range vb.arr {
					alts = append(alts, conj(x, y))
				}
			}
			m.set(k, arrNode(alts))
		}
		m.done[k] = true
	}
	return false, nil
}

// JSON types as a bit set; tNumber includes the integers, so tInteger is set with it.
const (
	tNull = 1 << iota
	tBoolean
	tObject
	tArray
	tString
	tInteger
	tNumber
	tAll = tNull | tBoolean | tObject | tArray | tString | tInteger | tNumber
)

var typeNames = []string{"null", "boolean", "object", "array", "string", "integer", "number"}

// typeMask returns the types that the type keyword of s allows (all when it has none).
func typeMask(s *node, path string) (int, error) {
	t := s.get("type")
	if t == nil {
		return tAll, nil
	}
	names := []*node{t}
	if t.kind == 'a' {
		names = t.arr
		if len(names) == 0 {
			return 0, fail(path, "type", "empty list of types")
		}
	}
	m := 0
	for _, n := range names {
		name, ok := n.str()
		if !ok {
			return 0, fail(path, "type", "type must be a name or a list of names")
		}
		i := slices.Index(typeNames, name)
		if i < 0 {
			return 0, fail(path, "type", "unknown type %s", quote.String(name))
		}
		m |= 1 << i
	}
	if m&tNumber != 0 {
		m |= tInteger
	}
	return m, nil
}

func maskNode(m int) *node {
	var names []*node
	for i, name := range typeNames {
		if m&(1<<i) != 0 && !(name == "integer" && m&tNumber != 0) {
			names = append(names, strNode(name))
		}
	}
	return arrNode(names)
}

// valueType returns the type bit of a JSON value (tInteger for integral numbers).
func valueType(v *node) int {
	switch v.kind {
	case 'z':
		return tNull
	case 'b':
		return tBoolean
	case 'o':
		return tObject
	case 'a':
		return tArray
	case 's':
		return tString
	}
	if v.isInteger() {
		return tInteger
	}
	return tNumber
}

// enumValues returns the values allowed by enum and const (nil when s has neither).
func enumValues(s *node, path string) ([]*node, error) {
	var vals []*node
	if e := s.get("enum"); e != nil {
		if e.kind != 'a' || len(e.arr) == 0 {
			return nil, fail(path, "enum", "enum must be a non-empty array")
		}
		vals = e.arr
	}
	if k := s.get("const"); k != nil {
		if vals != nil && !slices.ContainsFunc(vals, func(v *node) bool { return v.canon() == k.canon() }) {
			return []*node{}, nil
		}
		vals = []*node{k}
	}
	return vals, nil
}

// alternatives returns the rule of a schema with anyOf or oneOf (kw): each branch intersected
// with the keywords beside it. A oneOf must have branches that are provably disjoint, so that
// "exactly one" is "at least one".
func (c *converter) alternatives(s *node, kw, path string) (string, error) {
	v := s.get(kw)
	if v.kind != 'a' || len(v.arr) == 0 {
		return "", fail(path, kw, "%s must be a non-empty array", kw)
	}
	rest := s.with(kw, nil)
	branches := make([]*node, len(v.arr))
	for i, b := range v.arr {
		at := fmt.Sprintf("%s/%s/%d", path, kw, i)
		if !constraining(rest) {
			branches[i] = b
			continue
		}
		f, err := c.flat(b, at, 0)
		if err != nil {
			return "", err
		}
		if branches[i], err = c.merge(rest, f, at); err != nil {
			return "", err
		}
	}
	if kw == "oneOf" {
		sums := make([]summary, len(branches))
		for i, b := range branches {
			var err error
			if sums[i], err = c.summarize(b, fmt.Sprintf("%s/%s/%d", path, kw, i)); err != nil {
				return "", err
			}
		}
		if i, j, ok := allDisjoint(sums); !ok {
			if i < 0 {
				return "", fail(path, "oneOf", "%d branches are too many to compare pairwise (at most %d, unless one required property's const/enum values or the enum values tell every branch apart)", len(sums), maxPairwiseBranches)
			}
			return "", fail(path, "oneOf", "branches %d and %d are not provably disjoint, so the grammar cannot enforce that exactly one matches "+
				"(supported: branches of different types, with different const/enum values, with a required property whose const/enum values differ, or with a key that one requires and the other forbids)", i, j)
		}
	}
	var alts []string
	seen := map[string]bool{}
	for i, b := range branches {
		at := fmt.Sprintf("%s/%s/%d", path, kw, i)
		var e string
		var err error
		if constraining(rest) {
			e, err = c.memoized(b, at, func() (string, error) { return c.visit(b, at) })
		} else {
			e, err = c.visit(b, at)
		}
		if err != nil {
			return "", err
		}
		if e != "" && !seen[e] {
			seen[e] = true
			alts = append(alts, e)
		}
	}
	if len(alts) == 0 {
		return "", nil
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return c.rule("alt", strings.Join(alts, " | ")), nil
}

// summary is what a oneOf branch is known to require, for proving branches disjoint.
type summary struct {
	empty bool
	types int
	enum  map[string]bool            // nil: no enum
	tags  map[string]map[string]bool // a required property -> its const/enum values
	// required lists the required names; forbids reports whether the branch's objects cannot
	// have a key (false in properties, or outside them with additionalProperties false).
	required []string
	forbids  func(name string) bool
}

func (c *converter) summarize(b *node, path string) (summary, error) {
	f, err := c.flat(b, path, 0)
	if err != nil {
		return summary{}, err
	}
	if isFalse(f) {
		return summary{empty: true}, nil
	}
	sum := summary{tags: map[string]map[string]bool{}}
	if sum.types, err = typeMask(f, path); err != nil {
		return summary{}, err
	}
	vals, err := enumValues(f, path)
	if err != nil {
		return summary{}, err
	}
	if vals != nil {
		sum.enum = map[string]bool{}
		types := 0
		for _, v := range vals {
			sum.enum[v.canon()] = true
			if t := valueType(v); t == tNumber {
				types |= tNumber | tInteger
			} else {
				types |= t
			}
		}
		sum.types &= types
	}
	props := f.get("properties")
	addl := f.get("additionalProperties")
	sum.forbids = func(name string) bool {
		if p := props.get(name); p != nil {
			return isFalse(p)
		}
		return isFalse(addl)
	}
	if req := f.get("required"); req != nil && req.kind == 'a' {
		for _, r := range req.arr {
			name, ok := r.str()
			if ok {
				sum.required = append(sum.required, name)
			}
			if !ok || props.get(name) == nil {
				continue
			}
			p, err := c.flat(props.get(name), ptr(path+"/properties", name), 0)
			if err != nil {
				return summary{}, err
			}
			if isFalse(p) {
				sum.types &^= tObject
				continue
			}
			pv, err := enumValues(p, path)
			if err != nil || pv == nil {
				continue
			}
			set := map[string]bool{}
			for _, v := range pv {
				set[v.canon()] = true
			}
			sum.tags[name] = set
		}
	}
	return sum, nil
}

// maxPairwiseBranches bounds the oneOf branches compared pair by pair (the pairs grow as the
// square of the branches): more must be told apart by one property or by their enums, which
// allDisjoint checks in one pass.
const maxPairwiseBranches = 256

// allDisjoint reports whether every two branches are disjoint, or the first pair (i, j) it
// cannot prove so; i is -1 when the branches are too many to compare pairwise. Branches of
// objects all tagged by one required property, or all with an enum, whose values no two
// branches share, are disjoint in time linear in the values.
func allDisjoint(sums []summary) (i, j int, ok bool) {
	if valuesPartition(sums, func(s summary) map[string]bool { return s.enum }) {
		return 0, 0, true
	}
	var first *summary
	for k := range sums {
		if !sums[k].empty {
			first = &sums[k]
			break
		}
	}
	if first != nil {
		for name := range first.tags {
			if valuesPartition(sums, func(s summary) map[string]bool {
				if s.types != tObject {
					return nil
				}
				return s.tags[name]
			}) {
				return 0, 0, true
			}
		}
	}
	if len(sums) > maxPairwiseBranches {
		return -1, -1, false
	}
	for i := range sums {
		for j := i + 1; j < len(sums); j++ {
			if !sums[i].disjoint(sums[j]) {
				return i, j, false
			}
		}
	}
	return 0, 0, true
}

// valuesPartition reports whether set gives every non-empty branch a set of values that no
// other branch's shares (so that no value satisfies two branches).
func valuesPartition(sums []summary, set func(summary) map[string]bool) bool {
	owner := map[string]int{}
	for i, s := range sums {
		if s.empty {
			continue
		}
		vals := set(s)
		if vals == nil {
			return false
		}
		for v := range vals {
			if _, dup := owner[v]; dup {
				return false
			}
			owner[v] = i
		}
	}
	return true
}

func disjointSets(a, b map[string]bool) bool {
	for k := range a {
		if b[k] {
			return false
		}
	}
	return true
}

// disjoint reports whether no value can satisfy both branches.
func (a summary) disjoint(b summary) bool {
	if a.empty || b.empty {
		return true
	}
	common := a.types & b.types
	if common == 0 {
		return true
	}
	if a.enum != nil && b.enum != nil && disjointSets(a.enum, b.enum) {
		return true
	}
	if common == tObject {
		for name, va := range a.tags {
			if vb, ok := b.tags[name]; ok && disjointSets(va, vb) {
				return true
			}
		}
		// A key that one branch requires and the other forbids.
		for _, x := range [][2]summary{{a, b}, {b, a}} {
			if x[1].forbids != nil && slices.ContainsFunc(x[0].required, x[1].forbids) {
				return true
			}
		}
	}
	return false
}
