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
	kind string
	n    any
	body *[]node
	els  bool
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
		return append(stack, &frame{kind: "for", n: n, body: &n.body}), end()
	case "endfor":
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

func (p *parser) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		return &LimitError{Limit: "MaxNesting", Value: p.maxDepth}
	}
	return nil
}

// parseTuple parses an expression, or a tuple of them without parentheses.
func (p *parser) parseTuple(cond bool) (expr, error) {
	parse := p.parseExpr
	if !cond {
		parse = p.parseOr
	}
	e, err := parse()
	if err != nil || !p.isOp(",") {
		return e, err
	}
	items := []expr{e}
	for p.acceptOp(",") {
		if t := p.peek(); t.typ == tokBlockEnd || t.typ == tokVarEnd || p.isOp(")") {
			break
		}
		e, err := parse()
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	return &listExpr{items: items, tuple: true}, nil
}

func (p *parser) parseTupleNoCond() (expr, error) { return p.parseTuple(false) }

// parseExpr parses a conditional expression: a if b else c.
func (p *parser) parseExpr() (expr, error) {
	saved := p.depth
	defer func() { p.depth = saved }()
	if err := p.enter(); err != nil {
		return nil, err
	}
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.isName("if") {
		p.pos++
		if err := p.enter(); err != nil {
			return nil, err
		}
		test, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var els expr
		if p.isName("else") {
			p.pos++
			if els, err = p.parseExpr(); err != nil {
				return nil, err
			}
		}
		e = &condExpr{then: e, test: test, els: els}
	}
	return e, nil
}

func (p *parser) binaryLoop(ops []string, names bool, operand func() (expr, error)) (expr, error) {
	saved := p.depth
	defer func() { p.depth = saved }()
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		op := ""
		for _, o := range ops {
			if (names && t.typ == tokName || !names && t.typ == tokOp) && t.val == o {
				op = o
			}
		}
		if op == "" {
			return l, nil
		}
		p.pos++
		if err := p.enter(); err != nil {
			return nil, err
		}
		r, err := operand()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: op, l: l, r: r, line: t.line}
	}
}

func (p *parser) parseOr() (expr, error) {
	return p.binaryLoop([]string{"or"}, true, p.parseAnd)
}

func (p *parser) parseAnd() (expr, error) {
	return p.binaryLoop([]string{"and"}, true, p.parseNot)
}

func (p *parser) parseNot() (expr, error) {
	if p.isName("not") {
		t := p.next()
		saved := p.depth
		defer func() { p.depth = saved }()
		if err := p.enter(); err != nil {
			return nil, err
		}
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{op: "not", x: x, line: t.line}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	first, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	var c *compareExpr
	for {
		t := p.peek()
		op := ""
		switch {
		case t.typ == tokOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == ">" || t.val == "<=" || t.val == ">="):
			op = t.val
			p.pos++
		case t.typ == tokName && t.val == "in":
			op = "in"
			p.pos++
		case t.typ == tokName && t.val == "not" && p.toks[p.pos+1].typ == tokName && p.toks[p.pos+1].val == "in":
			op = "not in"
			p.pos += 2
		}
		if op == "" {
			break
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		if c == nil {
			c = &compareExpr{first: first, line: t.line}
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
	}
	if c == nil {
		return first, nil
	}
	return c, nil
}

func (p *parser) parseMath1() (expr, error) {
	return p.binaryLoop([]string{"+", "-"}, false, p.parseConcat)
}

func (p *parser) parseConcat() (expr, error) {
	return p.binaryLoop([]string{"~"}, false, p.parseMath2)
}

func (p *parser) parseMath2() (expr, error) {
	return p.binaryLoop([]string{"*", "/", "//", "%"}, false, p.parsePow)
}

func (p *parser) parsePow() (expr, error) {
	return p.binaryLoop([]string{"**"}, false, func() (expr, error) { return p.parseUnary(true) })
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	saved := p.depth
	defer func() { p.depth = saved }()
	if err := p.enter(); err != nil {
		return nil, err
	}
	var e expr
	t := p.peek()
	if t.typ == tokOp && (t.val == "-" || t.val == "+") {
		p.pos++
		x, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		e = &unaryExpr{op: t.val, x: x, line: t.line}
	} else {
		var err error
		if e, err = p.parsePrimary(); err != nil {
			return nil, err
		}
	}
	e, err := p.parsePostfix(e)
	if err != nil || !withFilter {
		return e, err
	}
	return p.parseFilterExpr(e)
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.next()
	switch t.typ {
	case tokName:
		switch t.val {
		case "true", "True":
			return &constExpr{v: NewBool(true)}, nil
		case "false", "False":
			return &constExpr{v: NewBool(false)}, nil
		case "none", "None":
			return &constExpr{v: None()}, nil
		}
		return &nameExpr{name: t.val, line: t.line}, nil
	case tokString:
		s := t.val
		for p.peek().typ == tokString {
			s += p.next().val
		}
		return &constExpr{v: NewString(s)}, nil
	case tokInt:
		return &constExpr{v: NewInt(t.i)}, nil
	case tokFloat:
		return &constExpr{v: NewFloat(t.f)}, nil
	case tokOp:
		switch t.val {
		case "(":
			if p.acceptOp(")") {
				return &listExpr{tuple: true}, nil
			}
			e, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			if p.isOp(",") {
				items := []expr{e}
				for p.acceptOp(",") && !p.isOp(")") {
					e, err := p.parseExpr()
					if err != nil {
						return nil, err
					}
					items = append(items, e)
				}
				e = &listExpr{items: items, tuple: true}
			}
			return e, p.expectOp(")")
		case "[":
			l := &listExpr{}
			for !p.acceptOp("]") {
				e, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, e)
				if !p.acceptOp(",") {
					if err := p.expectOp("]"); err != nil {
						return nil, err
					}
					break
				}
			}
			return l, nil
		case "{":
			d := &dictExpr{}
			for !p.acceptOp("}") {
				k, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				d.keys, d.vals = append(d.keys, k), append(d.vals, v)
				if !p.acceptOp(",") {
					if err := p.expectOp("}"); err != nil {
						return nil, err
					}
					break
				}
			}
			return d, nil
		}
	}
	return nil, newError(t.line, "unexpected %s", p.describe(t))
}

func (p *parser) parsePostfix(e expr) (expr, error) {
	for {
		t := p.peek()
		if t.typ != tokOp {
			return e, nil
		}
		switch t.val {
		case ".":
			p.pos++
			n := p.next()
			switch n.typ {
			case tokName:
				e = &attrExpr{obj: e, name: n.val, line: n.line}
			case tokInt:
				e = &indexExpr{obj: e, key: &constExpr{v: NewInt(n.i)}, line: n.line}
			default:
				return nil, newError(n.line, "expected an attribute name, got %s", p.describe(n))
			}
		case "[":
			p.pos++
			var err error
			if e, err = p.subscript(e, t.line); err != nil {
				return nil, err
			}
		case "(":
			var err error
			if e, err = p.call(e, t.line); err != nil {
				return nil, err
			}
		default:
			return e, nil
		}
		if err := p.enter(); err != nil {
			return nil, err
		}
	}
}

func (p *parser) subscript(obj expr, line int) (expr, error) {
	var parts [3]expr
	n, colons := 0, 0
	for {
		if p.acceptOp("]") {
			break
		}
		if p.acceptOp(":") {
			colons++
			n++
			if n > 2 {
				return nil, newError(line, "bad slice")
			}
			continue
		}
		if parts[n] != nil {
			return nil, newError(line, "bad subscript")
		}
		e, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		parts[n] = e
	}
	if colons == 0 {
		if parts[0] == nil {
			return nil, newError(line, "empty subscript")
		}
		return &indexExpr{obj: obj, key: parts[0], line: line}, nil
	}
	return &sliceExpr{obj: obj, start: parts[0], stop: parts[1], step: parts[2], line: line}, nil
}

func (p *parser) args() ([]expr, []kwExpr, error) {
	if err := p.expectOp("("); err != nil {
		return nil, nil, err
	}
	var args []expr
	var kwargs []kwExpr
	for !p.acceptOp(")") {
		if p.peek().typ == tokName && p.toks[p.pos+1].typ == tokOp && p.toks[p.pos+1].val == "=" {
			name := p.next().val
			p.pos++
			e, err := p.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwExpr{name: name, e: e})
		} else {
			if len(kwargs) > 0 {
				return nil, nil, newError(p.peek().line, "positional argument after a keyword argument")
			}
			e, err := p.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			args = append(args, e)
		}
		if !p.acceptOp(",") {
			if err := p.expectOp(")"); err != nil {
				return nil, nil, err
			}
			break
		}
	}
	return args, kwargs, nil
}

func (p *parser) call(fn expr, line int) (expr, error) {
	args, kwargs, err := p.args()
	if err != nil {
		return nil, err
	}
	return &callExpr{fn: fn, args: args, kwargs: kwargs, line: line}, nil
}

func (p *parser) filter(obj expr) (*filterExpr, error) {
	t := p.peek()
	name, err := p.name()
	if err != nil {
		return nil, err
	}
	for p.isOp(".") { // dotted filter names
		p.pos++
		n, err := p.name()
		if err != nil {
			return nil, err
		}
		name += "." + n
	}
	f := &filterExpr{obj: obj, name: name, line: t.line}
	if p.isOp("(") {
		if f.args, f.kwargs, err = p.args(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (p *parser) parseFilterExpr(e expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			p.pos++
			f, err := p.filter(e)
			if err != nil {
				return nil, err
			}
			e = f
		case p.isName("is"):
			t := p.next()
			te := &testExpr{obj: e, line: t.line}
			if p.isName("not") {
				p.pos++
				te.neg = true
			}
			name, err := p.name()
			if err != nil {
				return nil, err
			}
			te.name = name
			if p.isOp("(") {
				if te.args, _, err = p.args(); err != nil {
					return nil, err
				}
			} else if n := p.peek(); n.typ == tokString || n.typ == tokInt || n.typ == tokFloat ||
				n.typ == tokName && n.val != "else" && n.val != "and" && n.val != "or" && n.val != "if" && n.val != "is" && n.val != "not" && n.val != "in" ||
				n.typ == tokOp && (n.val == "[" || n.val == "{" || n.val == "(") {
				a, err := p.parsePrimary()
				if err != nil {
					return nil, err
				}
				if a, err = p.parsePostfix(a); err != nil {
					return nil, err
				}
				te.args = []expr{a}
			}
			e = te
		case p.isOp("("):
			t := p.peek()
			var err error
			if e, err = p.call(e, t.line); err != nil {
				return nil, err
			}
		default:
			return e, nil
		}
		if err := p.enter(); err != nil {
			return nil, err
		}
	}
}
