package jinja

import (
	"fmt"
)

// parser builds the tree of a template from its tokens. Blocks are
// parsed with an explicit stack and expressions by recursive descent
// whose depth it counts: both are bounded by Limits.MaxNesting.
type parser struct {
	toks     []token
	pos      int
	depth    int64
	maxDepth int64
}

type frame struct {
	kind     string
	n        any
	body     *[]node
	els      bool
	tokStart int // where a for's body starts
}

func parse(toks []token, maxNesting int64) ([]node, error) {
	p := &parser{toks: toks, maxDepth: maxNesting}
	var root []node
	stack := []*frame{{kind: "root", body: &root}}
	for {
		top := stack[len(stack)-1]
		t := p.next()
		switch t.typ {
		case tokEOF:
			if len(stack) > 1 {
				return nil, newError(t.line, "unclosed {%% %s %%}", top.kind)
			}
			return root, nil
		case tokText:
			*top.body = append(*top.body, &textNode{s: t.val})
		case tokVarBegin:
			e, err := p.parseTuple(true)
			if err != nil {
				return nil, err
			}
			if err := p.expect(tokVarEnd, "}}"); err != nil {
				return nil, err
			}
			*top.body = append(*top.body, &outputNode{e: e, line: t.line})
		case tokBlockBegin:
			var err error
			stack, err = p.statement(stack)
			if err != nil {
				return nil, err
			}
			if int64(len(stack)) > p.maxDepth {
				return nil, &LimitError{Limit: "MaxNesting", Value: p.maxDepth}
			}
		default:
			return nil, newError(t.line, "unexpected %s", p.describe(t))
		}
	}
}

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.typ != tokEOF {
		p.pos++
	}
	return t
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) describe(t token) string {
	switch t.typ {
	case tokEOF:
		return "end of template"
	case tokVarEnd:
		return "'}}'"
	case tokBlockEnd:
		return "'%}'"
	case tokText:
		return "text"
	}
	return fmt.Sprintf("%.40q", t.val)
}

func (p *parser) expect(typ tokType, what string) error {
	t := p.next()
	if t.typ != typ {
		return newError(t.line, "expected %s, got %s", what, p.describe(t))
	}
	return nil
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.typ == tokOp && t.val == op
}

func (p *parser) isName(name string) bool {
	t := p.peek()
	return t.typ == tokName && t.val == name
}

func (p *parser) acceptOp(op string) bool {
	if p.isOp(op) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) expectOp(op string) error {
	if !p.acceptOp(op) {
		t := p.peek()
		return newError(t.line, "expected %q, got %s", op, p.describe(t))
	}
	return nil
}

func (p *parser) name() (string, error) {
	t := p.next()
	if t.typ != tokName {
		return "", newError(t.line, "expected a name, got %s", p.describe(t))
	}
	return t.val, nil
}

// statement parses a block tag (after its "{%") and returns the new stack.
func (p *parser) statement(stack []*frame) ([]*frame, error) {
	top := stack[len(stack)-1]
	t := p.next()
	if t.typ != tokName {
		return nil, newError(t.line, "expected a statement, got %s", p.describe(t))
	}
	add := func(n node) { *top.body = append(*top.body, n) }
	end := func() error { return p.expect(tokBlockEnd, "'%}'") }
	pop := func(kind string) ([]*frame, error) {
		if top.kind != kind {
			return nil, newError(t.line, "unexpected {%% %s %%} in {%% %s %%}", t.val, top.kind)
		}
		return stack[:len(stack)-1], end()
	}
	switch t.val {
	case "if":
		c, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		n := &ifNode{conds: []expr{c}, bodies: []*[]node{{}}}
		add(n)
		return append(stack, &frame{kind: "if", n: n, body: n.bodies[0]}), end()
	case "elif":
		n, ok := top.n.(*ifNode)
		if !ok || top.els {
			return nil, newError(t.line, "unexpected {%% elif %%}")
		}
		c, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, c)
		n.bodies = append(n.bodies, &[]node{})
		top.body = n.bodies[len(n.bodies)-1]
		return stack, end()
	case "else":
		if top.els {
			return nil, newError(t.line, "unexpected {%% else %%}")
		}
		switch n := top.n.(type) {
		case *ifNode:
			n.els = &[]node{}
			top.body = n.els
		case *forNode:
			top.body = &n.els
		default:
			return nil, newError(t.line, "unexpected {%% else %%}")
		}
		top.els = true
		return stack, end()
	case "endif":
		return pop("if")
	case "for":
		n, err := p.forHead(t.line)
		if err != nil {
			return nil, err
		}
		add(n)
		return append(stack, &frame{kind: "for", n: n, body: &n.body, tokStart: p.pos}), end()
	case "endfor":
		if f, ok := top.n.(*forNode); ok {
			for _, t := range p.toks[top.tokStart:p.pos] {
				if t.typ == tokName && t.val == "loop" {
					f.usesLoop = true
					break
				}
			}
		}
		return pop("for")
	case "set":
		n, err := p.set(t.line)
		if err != nil {
			return nil, err
		}
		add(n)
		if n.block {
			return append(stack, &frame{kind: "set", n: n, body: &n.body}), end()
		}
		return stack, end()
	case "endset":
		return pop("set")
	case "macro":
		name, err := p.name()
		if err != nil {
			return nil, err
		}
		m := &macroDef{name: name, line: t.line}
		if err := p.params(m); err != nil {
			return nil, err
		}
		add(&macroNode{m: m})
		return append(stack, &frame{kind: "macro", n: m, body: &m.body}), end()
	case "endmacro":
		return pop("macro")
	case "call":
		caller := &macroDef{name: "caller", line: t.line}
		if p.isOp("(") {
			if err := p.params(caller); err != nil {
				return nil, err
			}
		}
		e, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		c, ok := e.(*callExpr)
		if !ok {
			return nil, newError(t.line, "{%% call %%} needs a call")
		}
		add(&callBlockNode{call: c, caller: caller})
		return append(stack, &frame{kind: "call", n: caller, body: &caller.body}), end()
	case "endcall":
		return pop("call")
	case "filter":
		fs, err := p.filterChain(false)
		if err != nil {
			return nil, err
		}
		n := &filterBlockNode{filters: fs}
		add(n)
		return append(stack, &frame{kind: "filter", n: n, body: &n.body}), end()
	case "endfilter":
		return pop("filter")
	case "generation":
		n := &blockNode{}
		add(n)
		return append(stack, &frame{kind: "generation", n: n, body: &n.body}), end()
	case "endgeneration":
		return pop("generation")
	case "break", "continue":
		inLoop := false
		for i := len(stack) - 1; i > 0; i-- {
			if stack[i].kind == "for" && !stack[i].els {
				inLoop = true
				break
			}
			if stack[i].kind == "macro" || stack[i].kind == "call" {
				break
			}
		}
		if !inLoop {
			return nil, newError(t.line, "{%% %s %%} outside a loop", t.val)
		}
		add(&ctrlNode{brk: t.val == "break"})
		return stack, end()
	case "do":
		e, err := p.parseTuple(true)
		if err != nil {
			return nil, err
		}
		add(&doNode{e: e})
		return stack, end()
	}
	return nil, newError(t.line, "unknown or unsupported statement {%% %s %%}", t.val)
}

func (p *parser) targets() ([]string, error) {
	var names []string
	paren := p.acceptOp("(")
	for {
		n, err := p.name()
		if err != nil {
			return nil, err
		}
		names = append(names, n)
		if !p.acceptOp(",") {
			break
		}
		if paren && p.isOp(")") {
			break
		}
	}
	if paren {
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func (p *parser) forHead(line int) (*forNode, error) {
	names, err := p.targets()
	if err != nil {
		return nil, err
	}
	if !p.isName("in") {
		return nil, newError(line, "expected 'in' in {%% for %%}")
	}
	p.pos++
	iter, err := p.parseTupleNoCond()
	if err != nil {
		return nil, err
	}
	n := &forNode{targets: names, iter: iter, line: line}
	if p.isName("if") {
		p.pos++
		if n.cond, err = p.parseExpr(); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		return nil, newError(line, "recursive loops are not supported")
	}
	return n, nil
}

func (p *parser) set(line int) (*setNode, error) {
	n := &setNode{line: line}
	first, err := p.name()
	if err != nil {
		return nil, err
	}
	if p.acceptOp(".") {
		attr, err := p.name()
		if err != nil {
			return nil, err
		}
		n.ns, n.attr = first, attr
	} else {
		n.targets = []string{first}
		for p.acceptOp(",") {
			name, err := p.name()
			if err != nil {
				return nil, err
			}
			n.targets = append(n.targets, name)
		}
	}
	if p.acceptOp("=") {
		n.e, err = p.parseTuple(true)
		return n, err
	}
	if n.ns != "" || len(n.targets) != 1 {
		return nil, newError(line, "a block {%% set %%} takes one name")
	}
	n.block = true
	if p.acceptOp("|") {
		n.filters, err = p.filterChain(true)
	}
	return n, err
}

func (p *parser) params(m *macroDef) error {
	if err := p.expectOp("("); err != nil {
		return err
	}
	for !p.acceptOp(")") {
		name, err := p.name()
		if err != nil {
			return err
		}
		var def expr
		if p.acceptOp("=") {
			if def, err = p.parseExpr(); err != nil {
				return err
			}
		}
		m.params = append(m.params, name)
		m.defaults = append(m.defaults, def)
		if !p.acceptOp(",") {
			if err := p.expectOp(")"); err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// filterChain parses "name(args) | name ..." (the "|" before the first
// already read when afterBar).
func (p *parser) filterChain(afterBar bool) ([]*filterExpr, error) {
	var fs []*filterExpr
	for {
		f, err := p.filter(nil)
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
		if !p.acceptOp("|") {
			return fs, nil
		}
	}
}
