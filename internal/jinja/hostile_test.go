package jinja

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostileVars is the small conversation every hostile template renders.
func hostileVars() map[string]Value {
	msg := func(role, content string) Value {
		d := NewDict()
		d.AsDict().Set("role", NewString(role))
		d.AsDict().Set("content", NewString(content))
		return d
	}
	tool := NewDict()
	tool.AsDict().Set("type", NewString("function"))
	fn := NewDict()
	fn.AsDict().Set("name", NewString("get_weather"))
	tool.AsDict().Set("function", fn)
	return map[string]Value{
		"messages":              NewList([]Value{msg("system", "You answer."), msg("user", "Weather in Paris?")}),
		"tools":                 NewList([]Value{tool}),
		"add_generation_prompt": NewBool(true),
		"bos_token":             NewString("<s>"),
		"eos_token":             NewString("</s>"),
	}
}

// hostileLimits are the defaults with a smaller step budget, so that the
// test runs quickly on a loaded machine; the bounds are the same kind.
var hostileLimits = Limits{MaxSteps: 200_000}

// Families whose every template must end in a *LimitError; the others
// (literal-, exception-) end in an *Error of the template, or a limit.
var limitFamilies = []string{"recursion-", "repeat-", "range-", "selfref-", "nesting-", "loop-"}

// The hostile templates this engine makes harmless without a limit, and
// why: each renders (or fails) at once, within every budget.
var harmlessHere = map[string]string{
	"exception-int-parse.jinja":         "int and float filters give their default, as Jinja's do",
	"exception-undefined-attr.jinja":    "an attribute of undefined is undefined (as @huggingface/jinja; Jinja2 raises)",
	"literal-float-huge.jinja":          "1e999999 is inf, and int gives its default",
	"literal-pow-float.jinja":           "10.0 ** 400 is inf (Python raises OverflowError)",
	"literal-round-huge.jinja":          "round with a huge precision returns the value",
	"loop-append-while-iterating.jinja": "a loop walks a copy of its list, as taken when it starts",
	"loop-dict-grow.jinja":              "a loop walks a copy of the dict's keys",
	"loop-recursive-explosion.jinja":    "recursive loops are refused at compile time",
	"recursion-loop-recursive.jinja":    "recursive loops are refused at compile time",
	"range-min-step.jinja":              "three items, counted without overflow",
	"range-zero-step.jinja":             "an error: range() arg 3 must not be zero",
	"repeat-center.jinja":               "there is no center filter",
	"repeat-format.jinja":               "the format filter knows no width",
	"repeat-string-negative-big.jinja":  "a string times a negative number is empty",
	"selfref-in.jinja":                  "[1] differs from the cyclic list at the first item",
}

// Every hostile template compiles or renders to a named error: a
// *LimitError naming its bound, or an *Error of the template; never a
// crash, a hang or a render over its budgets.
func TestHostileTemplates(t *testing.T) {
	names, err := filepath.Glob("testdata/hostile/*.jinja")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(names), 67)
	limits := map[string]int{}
	for _, name := range names {
		base := filepath.Base(name)
		t.Run(base, func(t *testing.T) {
			src, err := os.ReadFile(name)
			require.NoError(t, err)
			tmpl, err := Compile(string(src), hostileLimits)
			var st Stats
			if err == nil {
				_, st, err = tmpl.RenderStats(context.Background(), hostileVars())
			}
			var le *LimitError
			var te *Error
			if _, ok := harmlessHere[base]; ok || err == nil {
				// Slices and literals may render: what matters is that
				// they do so at once.
				assert.Less(t, st.Steps, int64(100), "%v", err)
				assert.True(t, ok || strings.HasPrefix(base, "slice-") || strings.HasPrefix(base, "literal-"), "%s rendered", base)
				return
			}
			require.True(t, errors.As(err, &le) || errors.As(err, &te), "%T %v", err, err)
			assert.LessOrEqual(t, st.Steps, hostileLimits.MaxSteps+1)
			assert.LessOrEqual(t, st.AllocBytes, DefaultLimits().MaxAllocBytes)
			assert.LessOrEqual(t, len(err.Error()), maxMessageBytes+100)
			for _, f := range limitFamilies {
				if strings.HasPrefix(base, f) {
					require.ErrorAs(t, err, &le, "%v", err)
					assert.Contains(t, err.Error(), le.Limit)
				}
			}
			if le != nil {
				limits[le.Limit]++
			}
			t.Logf("%v (steps %d)", err, st.Steps)
		})
	}
	t.Logf("limits hit: %v", limits)
}

// The 2.4 MB template of 100,000 nested ifs is refused by the nesting
// bound as soon as the parser passes it (the source bound would refuse
// it first with the default limits).
func TestHostileNestedIfs(t *testing.T) {
	src := strings.Repeat("{% if true %}", 100_000) + "x" + strings.Repeat("{% endif %}", 100_000)
	_, err := Compile(src, Limits{})
	var le *LimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "MaxSourceBytes", le.Limit)
	_, err = Compile(src, Limits{MaxSourceBytes: 4 << 20})
	require.ErrorAs(t, err, &le)
	assert.Equal(t, &LimitError{Limit: "MaxNesting", Value: 100}, le)
	assert.EqualError(t, err, "jinja: template exceeded MaxNesting (100 levels of nesting)")
}

// A render that does not end stops when its context is cancelled, with
// the context's error.
func TestRenderStopsOnCancel(t *testing.T) {
	tmpl, err := Compile("{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}x{% endfor %}{% endfor %}{% endfor %}",
		Limits{MaxSteps: 1 << 62, MaxOutputBytes: 1 << 40, MaxAllocBytes: 1 << 50})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	vars := map[string]Value{"range": NewFunc("range", func(c *Call) (Value, error) {
		calls++
		if calls == 3 { // the loops have started: end the request
			cancel()
		}
		return gRange(c)
	})}
	_, st, err := tmpl.RenderStats(ctx, vars)
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, st.Steps, int64(10*ctxEvery))
}
