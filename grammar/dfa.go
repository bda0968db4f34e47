package grammar

import (
	"slices"
	"unsafe"
)

// dfa runs a grammar's pushdown matcher as a lazily built deterministic automaton over bytes.
//
// A stack is a list of grammar positions (the top is the next element to match, the others are
// where to continue after the rules in progress); stacks are interned as linked nodes (node 0 is
// the empty stack: the input so far is a complete sentence). The matcher's state is the set of
// stacks that the input so far can be in, each expanded until its top is a byte element, as
// llama.cpp's advance_stack does. Each distinct set is interned as a state id, and the
// transition of a state on a byte is computed once and kept: after warm-up, matching a token is
// one table lookup per byte, whatever the grammar. State 0 is dead (no stack left).
//
// A dfa is not safe for concurrent use; the Matcher owning it serializes access.
type dfa struct {
	g       *Grammar
	nodes   []stackNode
	nodeOf  map[[2]int32]int32
	sets    [][]int32 // the sorted stack ids of each state
	stateOf map[string]int32
	trans   []int32 // trans[s<<8|b]: the state after byte b, -1 when not yet computed
	accept  []bool  // the state holds the empty stack
	// tokenTops lists, per state, the stacks whose top is a token reference (nil for most
	// states: grammars without token references have none).
	tokenTops [][]int32
	byToken   map[[2]int32]int32 // (state, token) -> the state after that token's reference
	unions    map[[2]int32]int32 // (state, state) -> the state of their stacks together

	// scratch of step
	seen  map[int32]struct{}
	buf   []int32
	start int32
}

// stackNode is one frame of an interned stack: a grammar position over the rest of the stack.
type stackNode struct {
	pos    int32
	parent int32
}

func newDFA(g *Grammar) *dfa {
	d := &dfa{g: g, nodes: []stackNode{{pos: -1}}, nodeOf: map[[2]int32]int32{}, stateOf: map[string]int32{}, seen: map[int32]struct{}{},
		byToken: map[[2]int32]int32{}, unions: map[[2]int32]int32{}}
	d.intern(nil) // state 0: dead
	d.buf = d.buf[:0]
	clear(d.seen)
	for _, a := range g.rules[g.root] {
		d.expandAt(a, 0)
	}
	d.start = d.intern(d.collect())
	return d
}

// node interns the stack frame pos over parent.
func (d *dfa) node(pos, parent int32) int32 {
	k := [2]int32{pos, parent}
	if id, ok := d.nodeOf[k]; ok {
		return id
	}
	id := int32(len(d.nodes))
	d.nodes = append(d.nodes, stackNode{pos, parent})
	d.nodeOf[k] = id
	return id
}

// expandAt adds the stacks that continue at position pos over parent, expanded to byte tops.
// A position at the end of an alternative returns to parent.
func (d *dfa) expandAt(pos, parent int32) {
	if d.g.elems[pos].kind == kEnd {
		d.expand(parent)
		return
	}
	d.expand(d.node(pos, parent))
}

// expand adds stack n, with rule references on top replaced by their alternatives, into d.seen.
// It terminates because Parse rejects left recursion.
func (d *dfa) expand(n int32) {
	if _, ok := d.seen[n]; ok {
		return
	}
	d.seen[n] = struct{}{}
	if n == 0 {
		d.buf = append(d.buf, 0)
		return
	}
	nd := d.nodes[n]
	e := d.g.elems[nd.pos]
	if e.kind != kRule {
		d.buf = append(d.buf, n) // a byte or a token on top
		return
	}
	// A rule reference: continue after it (dropping a frame that would only end an alternative,
	// so that right recursion does not grow the stack), below each of its alternatives.
	parent := nd.parent
	if d.g.elems[nd.pos+1].kind != kEnd {
		parent = d.node(nd.pos+1, nd.parent)
	}
	for _, a := range d.g.rules[e.arg] {
		d.expandAt(a, parent)
	}
}

// collect returns the sorted leaves gathered in d.buf and clears the scratch.
func (d *dfa) collect() []int32 {
	slices.Sort(d.buf)
	clear(d.seen)
	return d.buf
}

// intern returns the state of the sorted stack set, adding it when new. set is copied.
func (d *dfa) intern(set []int32) int32 {
	key := unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(set))), len(set)*4)
	if id, ok := d.stateOf[key]; ok {
		return id
	}
	id := int32(len(d.sets))
	own := slices.Clone(set)
	d.sets = append(d.sets, own)
	d.stateOf[string(unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(own))), len(own)*4))] = id
	for range 256 {
		d.trans = append(d.trans, -1)
	}
	if id == 0 {
		for b := range 256 {
			d.trans[b] = 0 // dead stays dead
		}
	}
	d.accept = append(d.accept, len(own) > 0 && own[0] == 0)
	var tops []int32
	for _, n := range own {
		if n != 0 && d.g.elems[d.nodes[n].pos].kind != kByte {
			tops = append(tops, n)
		}
	}
	d.tokenTops = append(d.tokenTops, tops)
	return id
}

// footprint estimates the bytes the automaton holds: transitions, stack sets and their index,
// stack frames and theirs.
func (d *dfa) footprint() int {
	n := 4*len(d.trans) + len(d.accept) + 8*len(d.nodes) + 24*len(d.nodeOf)
	for _, s := range d.sets {
		n += 24 + 2*4*len(s) + 16 // the set, its key in stateOf, the map entry
	}
	return n
}

// next returns the state after byte b from state s.
func (d *dfa) next(s int32, b byte) int32 {
	if t := d.trans[int(s)<<8|int(b)]; t >= 0 {
		return t
	}
	return d.step(s, b)
}

// step computes and records the transition of s on b.
func (d *dfa) step(s int32, b byte) int32 {
	d.buf = d.buf[:0]
	for _, n := range d.sets[s] {
		if n == 0 {
			continue
		}
		nd := d.nodes[n]
		if e := d.g.elems[nd.pos]; e.kind == kByte && d.g.sets[e.arg].has(b) {
			d.expandAt(nd.pos+1, nd.parent)
		}
	}
	t := d.intern(d.collect())
	d.trans[int(s)<<8|int(b)] = t
	return t
}

// matchesToken reports whether the token reference at the top of stack n takes token t.
func (d *dfa) matchesToken(n, t int32) bool {
	e := d.g.elems[d.nodes[n].pos]
	return e.kind == kToken && e.arg == t || e.kind == kTokenNot && e.arg != t
}

// stepToken returns the state after token t from s through the stacks whose top is a token
// reference (the other stacks take a token by its bytes, in step).
func (d *dfa) stepToken(s, t int32) int32 {
	if len(d.tokenTops[s]) == 0 {
		return 0
	}
	k := [2]int32{s, t}
	if r, ok := d.byToken[k]; ok {
		return r
	}
	d.buf = d.buf[:0]
	for _, n := range d.tokenTops[s] {
		if d.matchesToken(n, t) {
			nd := d.nodes[n]
			d.expandAt(nd.pos+1, nd.parent)
		}
	}
	r := d.intern(d.collect())
	d.byToken[k] = r
	return r
}

// union returns the state holding the stacks of a and of b.
func (d *dfa) union(a, b int32) int32 {
	switch {
	case a == 0 || a == b:
		return b
	case b == 0:
		return a
	}
	k := [2]int32{min(a, b), max(a, b)}
	if r, ok := d.unions[k]; ok {
		return r
	}
	set := append(append(d.buf[:0], d.sets[a]...), d.sets[b]...)
	slices.Sort(set)
	d.buf = slices.Compact(set)
	r := d.intern(d.buf)
	d.unions[k] = r
	return r
}
