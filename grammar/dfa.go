package grammar

import (
	"cmp"
	"slices"
	"unsafe"
)

// dfa runs a grammar's pushdown matcher as a lazily built deterministic automaton over bytes.
//
// A stack is a list of grammar positions: the top is the next element to match, the others are
// where to continue after the rules in progress. The matcher's state is the set of stacks that
// the input so far can be in, each expanded until its top is a byte or a token element, as
// llama.cpp's advance_stack does. An ambiguous grammar (x ::= "a" x "b"? | "a" x "c"? | "a")
// doubles that set with every byte, so the set is not kept as a list of stacks: it is a node of
// a hash-consed graph, a sorted list of entries (top position, node of the stacks below it),
// with the stacks sharing a top merged into one entry. Two sets of stacks have the same node
// exactly when they are equal (the graph is the minimal automaton that reads the stacks from the
// top), so the stacks that differ only below their tops are held once, and the set above holds
// as many entries per level as the grammar has positions.
//
// Each distinct node reached after a byte is interned as a state id, and the transition of a
// state on a byte is computed once and kept: after warm-up, matching a token is one table
// look-up per byte, whatever the grammar. State 0 is dead (no stack left).
//
// Every computation counts its work (nodes made, memo entries filled): past the work budget of
// one call, or the memory budget of the whole automaton, it stops and reports which (over), and
// the caller gives the failed state instead of a wrong one.
//
// A dfa is not safe for concurrent use; the Matcher owning it serializes access.
type dfa struct {
	g *Grammar

	// Node n's entries are ents[off[n]:off[n+1]], sorted by pos, one per pos; node 0 is the
	// empty set (no stack), node 1 holds the empty stack alone, an entry of pos -1.
	ents   []entry
	off    []int32
	nodeOf map[string]int32

	expandMemo map[[2]int32]int32 // (pos, tail) -> the expanded node of the stacks at pos over tail
	setMemo    map[int32]int32    // node -> its expansion
	unionMemo  map[[2]int32]int32 // (a, b), a < b -> the node of their stacks together

	nodeState map[int32]int32 // node -> its state
	states    []int32         // state -> its node
	trans     []int32         // trans[s<<8|b]: the state after byte b, -1 when not yet computed
	accept    []bool          // the state holds the empty stack
	// tokenTops lists, per state, the entries whose top is a token reference (nil for most
	// states: grammars without token references have none).
	tokenTops [][]entry
	byToken   map[[2]int32]int32 // (state, token) -> the state after that token's reference

	// Budgets: work counts the nodes and memo entries made since the caller reset it; over is
	// set once work passes workBudget or bytes passes maxBytes, and a computation then stops.
	work, workBudget int
	bytes, maxBytes  int
	over             overrun

	// Scratch stacks of the recursive computations: each call pushes above what its callers
	// hold and truncates back before it returns.
	tmp []entry
	ids []int32

	start int32
}

// entry is one top position of a set of stacks and the node of the stacks below it.
type entry struct {
	pos  int32 // -1: the empty stack (tail 0)
	tail int32
}

// overrun says which budget stopped a computation.
type overrun uint8

const (
	withinBudget overrun = iota
	overWork             // the work of one call
	overBytes            // the memory of the automaton
)

// Approximate bytes of what the automaton keeps, for its footprint: an entry (kept in the slab
// and in the interning key), a node (offset, map entry, string header), a memo entry, a state
// (256 transitions, its flag, token tops and map entry).
const (
	entryBytes = 16
	nodeBytes  = 56
	memoBytes  = 40
	stateBytes = 256*4 + 48
)

// scanPerUnit is the number of entries a step scans for one unit of work.
const scanPerUnit = 32

func newDFA(g *Grammar, workBudget, maxBytes int) *dfa {
	d := &dfa{g: g, nodeOf: map[string]int32{}, expandMemo: map[[2]int32]int32{}, setMemo: map[int32]int32{},
		unionMemo: map[[2]int32]int32{}, nodeState: map[int32]int32{}, byToken: map[[2]int32]int32{},
		off: []int32{0}, workBudget: workBudget, maxBytes: maxBytes}
	d.intern(nil)                // node 0: no stack
	d.intern([]entry{{pos: -1}}) // node 1: the empty stack
	d.state(0)                   // state 0: dead
	for b := range 256 {
		d.trans[b] = 0 // dead stays dead
	}
	d.work = 0
	base := len(d.tmp)
	for _, a := range g.rules[g.root] {
		d.push(d.expandAt(a, 1))
	}
	// The start state is within budget for any grammar small enough to parse; a dfa with a
	// budget too small for it starts failed.
	d.start = d.state(d.normalize(base))
	return d
}

// entriesOf returns node n's entries (read only, valid until the next node is made).
func (d *dfa) entriesOf(n int32) []entry { return d.ents[d.off[n]:d.off[n+1]] }

// spend counts n units of work and k bytes, and reports whether the computation may go on.
func (d *dfa) spend(n, k int) bool {
	d.work += n
	d.bytes += k
	switch {
	case d.over != withinBudget:
	case d.work > d.workBudget:
		d.over = overWork
	case d.bytes > d.maxBytes:
		d.over = overBytes
	}
	return d.over == withinBudget
}

// intern returns the node of the sorted entries es, adding it when new. es is copied.
func (d *dfa) intern(es []entry) int32 {
	key := unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(es))), len(es)*int(unsafe.Sizeof(entry{})))
	if id, ok := d.nodeOf[key]; ok {
		return id
	}
	if !d.spend(1+len(es), nodeBytes+entryBytes*len(es)) {
		return 0
	}
	id := int32(len(d.off) - 1)
	start := len(d.ents)
	d.ents = append(d.ents, es...)
	d.off = append(d.off, int32(len(d.ents)))
	own := d.ents[start:]
	d.nodeOf[string(unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(own))), len(key)))] = id
	return id
}

// push appends node n's entries to the scratch.
func (d *dfa) push(n int32) {
	for i := d.off[n]; i < d.off[n+1]; i++ {
		d.tmp = append(d.tmp, d.ents[i])
	}
}

// normalize interns the entries pushed since base as one node (merging the entries of one
// position into one, over the union of their tails) and pops them.
func (d *dfa) normalize(base int) int32 {
	if d.over != withinBudget {
		d.tmp = d.tmp[:base]
		return 0
	}
	seg := d.tmp[base:]
	slices.SortFunc(seg, func(a, b entry) int {
		if c := cmp.Compare(a.pos, b.pos); c != 0 {
			return c
		}
		return cmp.Compare(a.tail, b.tail)
	})
	out := base
	for i := base; i < len(d.tmp); {
		j := i + 1
		for j < len(d.tmp) && d.tmp[j].pos == d.tmp[i].pos {
			j++
		}
		e := d.tmp[i]
		if j-i > 1 {
			ib := len(d.ids)
			for k := i; k < j; k++ {
				if k == i || d.tmp[k].tail != d.tmp[k-1].tail {
					d.ids = append(d.ids, d.tmp[k].tail)
				}
			}
			e.tail = d.unionOf(ib)
		}
		d.tmp[out] = e
		out++
		i = j
	}
	var r int32
	if d.over == withinBudget {
		r = d.intern(d.tmp[base:out])
	}
	d.tmp = d.tmp[:base]
	return r
}

// unionOf returns the node of the stacks of the distinct sorted nodes d.ids[ib:] together, and
// pops them.
func (d *dfa) unionOf(ib int) int32 {
	ids := d.ids[ib:]
	if len(ids) == 1 {
		r := ids[0]
		d.ids = d.ids[:ib]
		return r
	}
	var key [2]int32
	pair := len(ids) == 2
	if pair {
		key = [2]int32{ids[0], ids[1]}
		if r, ok := d.unionMemo[key]; ok {
			d.ids = d.ids[:ib]
			return r
		}
	}
	base := len(d.tmp)
	for k := ib; k < len(d.ids); k++ {
		d.push(d.ids[k])
	}
	d.ids = d.ids[:ib]
	r := d.normalize(base)
	if pair && d.spend(1, memoBytes) {
		d.unionMemo[key] = r
	}
	return r
}

// expandAt returns the expanded node of the stacks that continue at position pos over the
// stacks of tail: a rule reference on top is replaced by the rule's alternatives (dropping a
// frame that would only end an alternative, so that right recursion does not grow the stack),
// the end of an alternative returns to tail. It terminates because Parse rejects left recursion.
func (d *dfa) expandAt(pos, tail int32) int32 {
	if d.over != withinBudget {
		return 0
	}
	e := d.g.elems[pos]
	switch e.kind {
	case kEnd:
		return d.expandSet(tail)
	case kRule:
	default: // a byte or a token on top
		return d.intern([]entry{{pos, tail}})
	}
	key := [2]int32{pos, tail}
	if r, ok := d.expandMemo[key]; ok {
		return r
	}
	cont := tail
	if d.g.elems[pos+1].kind != kEnd {
		cont = d.intern([]entry{{pos + 1, tail}})
	}
	base := len(d.tmp)
	for _, a := range d.g.rules[e.arg] {
		d.push(d.expandAt(a, cont))
	}
	r := d.normalize(base)
	if d.spend(1, memoBytes) {
		d.expandMemo[key] = r
	}
	return r
}

// expandSet returns the expansion of the stacks of node n, whose tops may be any position.
func (d *dfa) expandSet(n int32) int32 {
	if d.over != withinBudget || n <= 1 {
		return n
	}
	if r, ok := d.setMemo[n]; ok {
		return r
	}
	base := len(d.tmp)
	for i := d.off[n]; i < d.off[n+1]; i++ {
		if e := d.ents[i]; e.pos < 0 {
			d.tmp = append(d.tmp, e)
		} else {
			d.push(d.expandAt(e.pos, e.tail))
		}
	}
	r := d.normalize(base)
	if d.spend(1, memoBytes) {
		d.setMemo[n] = r
	}
	return r
}

// state returns the state of the expanded node n, adding it when new; -1 when over budget.
func (d *dfa) state(n int32) int32 {
	if d.over != withinBudget {
		return -1
	}
	if s, ok := d.nodeState[n]; ok {
		return s
	}
	if !d.spend(1, stateBytes) {
		return -1
	}
	s := int32(len(d.states))
	d.nodeState[n] = s
	d.states = append(d.states, n)
	for range 256 {
		d.trans = append(d.trans, -1)
	}
	es := d.entriesOf(n)
	d.accept = append(d.accept, len(es) > 0 && es[0].pos < 0)
	var tops []entry
	for _, e := range es {
		if e.pos >= 0 && d.g.elems[e.pos].kind != kByte {
			tops = append(tops, e)
		}
	}
	d.tokenTops = append(d.tokenTops, tops)
	return s
}

// footprint returns the bytes the automaton holds, as counted by its budget.
func (d *dfa) footprint() int { return d.bytes }

// next returns the state after byte b from state s; -1 when over budget.
func (d *dfa) next(s int32, b byte) int32 {
	if t := d.trans[int(s)<<8|int(b)]; t >= 0 {
		return t
	}
	return d.step(s, b)
}

// step computes and records the transition of s on b; -1 when over budget.
func (d *dfa) step(s int32, b byte) int32 {
	if d.over != withinBudget {
		return -1
	}
	n := d.states[s]
	// The scan of a large set costs time without making anything: count it too.
	if !d.spend(int(d.off[n+1]-d.off[n])/scanPerUnit, 0) {
		return -1
	}
	base := len(d.tmp)
	for i := d.off[n]; i < d.off[n+1]; i++ {
		e := d.ents[i]
		if e.pos < 0 {
			continue
		}
		if el := d.g.elems[e.pos]; el.kind == kByte && d.g.sets[el.arg].has(b) {
			d.push(d.expandAt(e.pos+1, e.tail))
		}
	}
	t := d.state(d.normalize(base))
	if t >= 0 {
		d.trans[int(s)<<8|int(b)] = t
	}
	return t
}

// matchesToken reports whether the token reference at the top of entry e takes token t.
func (d *dfa) matchesToken(e entry, t int32) bool {
	el := d.g.elems[e.pos]
	return el.kind == kToken && el.arg == t || el.kind == kTokenNot && el.arg != t
}

// stepToken returns the state after token t from s through the stacks whose top is a token
// reference (the other stacks take a token by its bytes, in step); -1 when over budget.
func (d *dfa) stepToken(s, t int32) int32 {
	if len(d.tokenTops[s]) == 0 {
		return 0
	}
	k := [2]int32{s, t}
	if r, ok := d.byToken[k]; ok {
		return r
	}
	if d.over != withinBudget {
		return -1
	}
	base := len(d.tmp)
	for _, e := range d.tokenTops[s] {
		if d.matchesToken(e, t) {
			d.push(d.expandAt(e.pos+1, e.tail))
		}
	}
	r := d.state(d.normalize(base))
	if r >= 0 && d.spend(1, memoBytes) {
		d.byToken[k] = r
	}
	return r
}

// union returns the state holding the stacks of states a and b; -1 when over budget.
func (d *dfa) union(a, b int32) int32 {
	switch {
	case a < 0 || b < 0:
		return -1
	case a == 0 || a == b:
		return b
	case b == 0:
		return a
	}
	na, nb := d.states[a], d.states[b]
	d.ids = append(d.ids, min(na, nb), max(na, nb))
	return d.state(d.unionOf(len(d.ids) - 2))
}
