package chat

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// weatherTools are the tools of the tests.
var weatherTools = []Tool{
	{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"]}`)},
	{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{"zone":{"type":"integer"}}}`)},
}

// result is what a reader made of an answer: the deltas joined.
type result struct {
	Content, Reasoning string
	Calls              []Call
}

// counter returns IDs call_1, call_2, ...
func counter() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("call_%d", n) }
}

// read runs a reader over the pieces and joins its deltas, checking that
// each call's deltas make it.
func read(t testing.TB, opt Options, stopped bool, pieces ...string) result {
	t.Helper()
	opt.NewID = counter()
	r := NewReader(opt)
	var deltas []Delta
	for _, p := range pieces {
		deltas = append(deltas, r.Add(p)...)
	}
	last, calls := r.End(stopped)
	deltas = append(deltas, last...)
	return join(t, deltas, calls)
}

// join joins deltas, checking them against calls.
func join(t testing.TB, deltas []Delta, calls []Call) result {
	t.Helper()
	var out result
	var content, reasoning strings.Builder
	var args []strings.Builder
	var ids, names []string
	for _, d := range deltas {
		n := 0
		if d.Content != "" {
			n++
			content.WriteString(d.Content)
		}
		if d.Reasoning != "" {
			n++
			reasoning.WriteString(d.Reasoning)
		}
		if d.Call != nil {
			n++
			c := d.Call
			if c.Index == len(ids) {
				require.NotEmpty(t, c.ID, "a call's first delta has its id")
				require.NotEmpty(t, c.Name, "a call's first delta has its name")
				ids, names = append(ids, c.ID), append(names, c.Name)
				args = append(args, strings.Builder{})
			} else {
				require.Less(t, c.Index, len(ids), "calls come in order")
				require.Empty(t, c.ID)
				require.Empty(t, c.Name)
				require.NotEmpty(t, c.Arguments, "no empty deltas")
			}
			args[c.Index].WriteString(c.Arguments)
		}
		require.Equal(t, 1, n, "one field of a delta is set: %+v", d)
	}
	require.Len(t, calls, len(ids))
	for i, c := range calls {
		require.Equal(t, ids[i], c.ID)
		require.Equal(t, names[i], c.Name)
		require.Equal(t, string(c.Arguments), args[i].String(), "the deltas make the arguments")
		if !c.Partial {
			require.True(t, json.Valid(c.Arguments), "%s", c.Arguments)
		}
	}
	out.Content, out.Reasoning, out.Calls = content.String(), reasoning.String(), calls
	return out
}

// bytewise splits s into its bytes.
func bytewise(s string) []string {
	out := make([]string, len(s))
	for i := range s {
		out[i] = s[i : i+1]
	}
	return out
}
