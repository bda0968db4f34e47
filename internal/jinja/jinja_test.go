package jinja

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func render(t *testing.T, src string, vars map[string]Value) (string, error) {
	t.Helper()
	tmpl, err := Compile(src, Limits{})
	if err != nil {
		return "", err
	}
	return tmpl.Render(context.Background(), vars)
}

// transformers' {% generation %} block renders its body.
func TestGenerationBlock(t *testing.T) {
	out, err := render(t, "a{% generation %}b{{ 1 }}{% endgeneration %}c", nil)
	require.NoError(t, err)
	assert.Equal(t, "ab1c", out)
}

// loop.cycle walks its arguments.
func TestLoopCycle(t *testing.T) {
	out, err := render(t, "{% for i in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %}", nil)
	require.NoError(t, err)
	assert.Equal(t, "ababa", out)
}

// Errors of the template are *Error with the line, and raise_exception's
// message is the template's own.
func TestTemplateErrors(t *testing.T) {
	for src, want := range map[string]string{
		"a\n{{ raise_exception('Roles must alternate') }}": "jinja: line 2: Roles must alternate",
		"{% if true %}":                    "jinja: line 1: unclosed {% if %}",
		"{% endif %}":                      "jinja: line 1: unexpected {% endif %} in {% root %}",
		"{{ 1 +  }}":                       "jinja: line 1: unexpected '}}'",
		"{{ x | nope }}":                   `jinja: line 1: no filter named "nope"`,
		"{{ 1 is nope }}":                  `jinja: line 1: no test named "nope"`,
		"{{ nope() }}":                     "jinja: line 1: 'nope' is undefined",
		"{% break %}":                      "jinja: line 1: {% break %} outside a loop",
		"{% include 'x' %}":                "jinja: line 1: unknown or unsupported statement {% include %}",
		"\n\n{{ [1][::0] }}":               "jinja: line 3: slice step cannot be zero",
		"{{ 9223372036854775807 + 1 }}":    "jinja: line 1: integer overflow",
		"{{ 1 // 0 }}":                     "jinja: line 1: integer division or modulo by zero",
		"{{ 'a' + 1 }}":                    "jinja: line 1: unsupported operand type(s) for +: 'str' and 'int'",
		"{% for x in 1 %}{% endfor %}":     "jinja: line 1: 'int' object is not iterable",
		"{{ 99999999999999999999 }}":       `jinja: line 1: integer literal "99999999999999999999" out of the 64-bit range`,
		"{% set x = 1 %}{% set x.a = 2 %}": `jinja: line 1: cannot assign attribute on a non-namespace object "x"`,
	} {
		_, err := render(t, src, nil)
		require.Error(t, err, src)
		assert.Equal(t, want, err.Error(), src)
		var te *Error
		assert.ErrorAs(t, err, &te, src)
	}
	_, err := render(t, "{{ raise_exception('x') }}", nil)
	var te *Error
	require.ErrorAs(t, err, &te)
	assert.True(t, te.Raised)
	_, err = render(t, "{{ raise_exception('"+strings.Repeat("x", 5000)+"') }}", nil)
	assert.LessOrEqual(t, len(err.Error()), maxMessageBytes+40, "a raised message is cut")
}

// Each limit is named in its error with its value, and a smaller limit
// is met sooner: the counters are what bounds the render.
func TestEachLimitNamed(t *testing.T) {
	for _, c := range []struct {
		src   string
		lim   Limits
		limit string
	}{
		{strings.Repeat("x", 101), Limits{MaxSourceBytes: 100}, "MaxSourceBytes"},
		{strings.Repeat("{% if 1 %}", 11), Limits{MaxNesting: 10}, "MaxNesting"},
		{"{{ " + strings.Repeat("(", 11) + "1" + strings.Repeat(")", 11) + " }}", Limits{MaxNesting: 10}, "MaxNesting"},
		{"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", Limits{MaxCallDepth: 5}, "MaxCallDepth"},
		{"{% for i in range(100) %}{% endfor %}", Limits{MaxSteps: 50}, "MaxSteps"},
		{"{% for i in range(100) %}xx{% endfor %}", Limits{MaxOutputBytes: 150}, "MaxOutputBytes"},
		{"{{ 'ab' * 100 }}", Limits{MaxValueBytes: 150}, "MaxValueBytes"},
		{"{{ range(100) | length }}", Limits{MaxValueItems: 99}, "MaxValueItems"},
		{"{% set l = [] %}{% set _ = l.append(l) %}{{ l }}", Limits{MaxValueDepth: 10}, "MaxValueDepth"},
		{"{% for i in range(100) %}{% set s = 'x' * 100 %}{% endfor %}", Limits{MaxAllocBytes: 5000}, "MaxAllocBytes"},
	} {
		tmpl, err := Compile(c.src, c.lim)
		if err == nil {
			_, err = tmpl.Render(context.Background(), nil)
		}
		var le *LimitError
		require.ErrorAs(t, err, &le, c.src)
		assert.Equal(t, c.limit, le.Limit, c.src)
		assert.Contains(t, err.Error(), "jinja: template exceeded "+c.limit+" (")
	}
}

// The steps of a render are counted: a loop of n iterations costs about
// n times its body, so MaxSteps bounds every loop.
func TestStepsCounted(t *testing.T) {
	tmpl, err := Compile("{% for i in range(1000) %}{{ i }}{% endfor %}", Limits{})
	require.NoError(t, err)
	_, st, err := tmpl.RenderStats(context.Background(), nil)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, st.Steps, int64(3000))
	assert.Less(t, st.Steps, int64(5000))
}

// A render whose context has ended does not start.
func TestRenderCancelledContext(t *testing.T) {
	tmpl, err := Compile("x", Limits{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = tmpl.Render(ctx, nil)
	assert.True(t, errors.Is(err, context.Canceled))
}

// tojson keeps the order of the keys of a JSON object read by FromJSON,
// as transformers' json.dumps does.
func TestFromJSONKeepsOrder(t *testing.T) {
	v, err := FromJSON([]byte(`{"type":"function","function":{"name":"f","description":"d","parameters":{"b":1,"a":[1.5,null,true]}}}`), 64)
	require.NoError(t, err)
	out, err := render(t, "{{ t | tojson }}|{{ t | tojson(indent=4) }}", map[string]Value{"t": v})
	require.NoError(t, err)
	assert.Equal(t, `{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"b": 1, "a": [1.5, null, true]}}}|{
    "type": "function",
    "function": {
        "name": "f",
        "description": "d",
        "parameters": {
            "b": 1,
            "a": [
                1.5,
                null,
                true
            ]
        }
    }
}`, out)
	_, err = FromJSON([]byte(strings.Repeat("[", 70)+strings.Repeat("]", 70)), 64)
	assert.EqualError(t, err, "values nested deeper than 64 levels")
	_, err = FromJSON([]byte(`1 2`), 64)
	assert.Error(t, err)
}

// ParseLimits reads the limits by name; the others keep their defaults.
func TestParseLimits(t *testing.T) {
	l, err := ParseLimits("MaxSteps=1000, maxoutputbytes=2048")
	require.NoError(t, err)
	want := DefaultLimits()
	want.MaxSteps, want.MaxOutputBytes = 1000, 2048
	assert.Equal(t, want, l)
	back, err := ParseLimits(l.String())
	require.NoError(t, err)
	assert.Equal(t, l, back)
	l, err = ParseLimits("")
	require.NoError(t, err)
	assert.Equal(t, DefaultLimits(), l)
	for _, bad := range []string{"MaxSteps", "Nope=1", "MaxSteps=-1", "MaxSteps=x"} {
		_, err := ParseLimits(bad)
		assert.Error(t, err, bad)
	}
}

// Values a caller builds render as Python prints them; Func values are
// called with their arguments.
func TestValuesAndFuncs(t *testing.T) {
	d := NewDict()
	d.AsDict().Set("z", NewInt(1))
	d.AsDict().Set("a", NewList([]Value{NewString("x"), None(), NewBool(false), NewFloat(0.5)}))
	add := NewFunc("add", func(c *Call) (Value, error) { return NewInt(c.Args[0].i + c.Args[1].i), nil })
	out, err := render(t, "{{ d }} {{ add(2, 3) }} {{ d.z }}", map[string]Value{"d": d, "add": add})
	require.NoError(t, err)
	assert.Equal(t, "{'z': 1, 'a': ['x', None, False, 0.5]} 5 1", out)
	assert.Equal(t, "{'z': 1, 'a': ['x', None, False, 0.5]}", d.String())
	assert.Equal(t, 2, d.AsDict().Len())
}

// Renders of one template run at once without sharing state.
func TestConcurrentRenders(t *testing.T) {
	tmpl, err := Compile("{% set ns = namespace(n=0) %}{% for i in range(100) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", Limits{})
	require.NoError(t, err)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			out, err := tmpl.Render(context.Background(), nil)
			if err == nil && out != "4950" {
				err = errors.New(out)
			}
			errs <- err
		}()
	}
	for range 8 {
		assert.NoError(t, <-errs)
	}
}
