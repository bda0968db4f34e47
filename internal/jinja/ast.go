package jinja

// Statements.
type (
	node interface{}

	textNode   struct{ s string }
	outputNode struct {
		e    expr
		line int
	}
	ifNode struct {
		conds  []expr
		bodies []*[]node
		els    *[]node
	}
	forNode struct {
		// usesLoop tells whether the body names loop (or a template
		// text there could): a loop whose body does not gets no loop
		// object.
		usesLoop bool
		targets  []string
		iter     expr
		cond     expr
		body     []node
		els      []node
		line     int
	}
	setNode struct {
		targets []string
		ns      string // set ns.attr = ...
		attr    string
		e       expr
		block   bool
		body    []node
		filters []*filterExpr
		line    int
	}
	macroNode     struct{ m *macroDef }
	callBlockNode struct {
		call   *callExpr
		caller *macroDef
	}
	filterBlockNode struct {
		filters []*filterExpr
		body    []node
	}
	blockNode struct{ body []node } // {% generation %}
	ctrlNode  struct{ brk bool }
	doNode    struct{ e expr }
)

type macroDef struct {
	name     string
	params   []string
	defaults []expr // nil where a parameter has none
	body     []node
	line     int
}

// Expressions.
type (
	expr interface{}

	constExpr struct{ v Value }
	nameExpr  struct {
		name string
		line int
	}
	listExpr struct {
		items []expr
		tuple bool
	}
	dictExpr struct{ keys, vals []expr }
	attrExpr struct {
		obj  expr
		name string
		line int
	}
	indexExpr struct {
		obj, key expr
		line     int
	}
	sliceExpr struct {
		obj, start, stop, step expr
		line                   int
	}
	callExpr struct {
		fn     expr
		args   []expr
		kwargs []kwExpr
		line   int
	}
	kwExpr struct {
		name string
		e    expr
	}
	filterExpr struct {
		obj    expr // nil in a filter block or a block set: the captured text
		name   string
		args   []expr
		kwargs []kwExpr
		line   int
	}
	testExpr struct {
		obj  expr
		name string
		args []expr
		neg  bool
		line int
	}
	unaryExpr struct {
		op   string
		x    expr
		line int
	}
	binExpr struct {
		op   string
		l, r expr
		line int
	}
	compareExpr struct {
		first expr
		ops   []string
		rest  []expr
		line  int
	}
	condExpr struct{ then, test, els expr }
)
