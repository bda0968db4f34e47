package jinja

// The expressions' recursive descent, after Jinja's precedence: a if b
// else c, or, and, not, comparisons, + -, ~, * / // %, **, unary - +,
// primaries with their postfixes, filters and tests.

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
