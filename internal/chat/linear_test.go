package chat

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The answers of the linearity tests: n calls, well formed or left open
// (each broken by the next), and n calls in the XML form.
var linearAnswers = map[string]func(n int) string{
	"calls": func(n int) string {
		return strings.Repeat("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>\n", n)
	},
	"unclosed": func(n int) string {
		return strings.Repeat("<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris", n)
	},
	"xml": func(n int) string {
		return strings.Repeat("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n", n)
	},
	"bare": func(n int) string {
		return "[" + strings.Repeat(`{"name": "get_time", "arguments": {"zone": 1}}, `, n) + `{"name": "get_time"}]`
	},
	"reasoning": func(n int) string {
		return "<think>" + strings.Repeat("Let me think about it. ", n) + "</think>" + strings.Repeat("It is sunny. ", n)
	},
}

// cost reads an answer in pieces of 3 bytes (a token's text) and returns
// the bytes the reader examined and the bytes of its deltas.
func cost(t *testing.T, text string) (work, sent int) {
	opt := Options{Tools: weatherTools, Format: Format{Family: Hermes, Reasoning: Think}, NewID: counter()}
	r := NewReader(opt)
	count := func(ds []Delta) {
		for _, d := range ds {
			sent += len(d.Content) + len(d.Reasoning)
			if d.Call != nil {
				sent += len(d.Call.Arguments)
			}
		}
	}
	for i := 0; i < len(text); i += 3 {
		count(r.Add(text[i:min(i+3, len(text))]))
	}
	ds, _ := r.End(true)
	count(ds)
	return r.work, sent
}

// The reader's work is linear in the answer, and it sends no byte twice:
// ten times the answer costs ten times the work (per byte, the same to 1%) (the issue measured
// quadratic time and 14.9 MB of deltas for 33 KB of unclosed calls).
func TestReaderLinear(t *testing.T) {
	for name, answer := range linearAnswers {
		small, large := answer(1000), answer(10000)
		w1, s1 := cost(t, small)
		w10, s10 := cost(t, large)
		require.Positive(t, w1)
		perByte1, perByte10 := float64(w1)/float64(len(small)), float64(w10)/float64(len(large))
		t.Logf("%s: %d bytes: %.3f bytes read and %.3f sent per byte; %d bytes: %.3f and %.3f", name,
			len(small), perByte1, float64(s1)/float64(len(small)), len(large), perByte10, float64(s10)/float64(len(large)))
		assert.LessOrEqual(t, perByte10, 1.01*perByte1, "%s: work %d for %d bytes, %d for %d", name, w1, len(small), w10, len(large))
		assert.LessOrEqual(t, w10, 3*len(large), "%s: each byte is read a few times at most", name)
		assert.LessOrEqual(t, s1, len(small), "%s: no byte sent twice", name)
		assert.LessOrEqual(t, s10, len(large), "%s: no byte sent twice", name)
	}
}

// BenchmarkReader reads answers of 1k and 10k calls in pieces of 3
// bytes: the cost per byte stays the same.
func BenchmarkReader(b *testing.B) {
	for _, name := range []string{"calls", "unclosed", "reasoning"} {
		for _, n := range []int{1000, 10000} {
			text := linearAnswers[name](n)
			b.Run(name+"/"+map[int]string{1000: "1k", 10000: "10k"}[n], func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					r := NewReader(Options{Tools: weatherTools, Format: Format{Family: Hermes, Reasoning: Think}, NewID: func() string { return "call_1" }})
					for i := 0; i < len(text); i += 3 {
						r.Add(text[i:min(i+3, len(text))])
					}
					r.End(true)
				}
			})
		}
	}
}

// The reader holds at most MaxHeld bytes of a call not yet known as one,
// and nothing of a call's arguments once they are given out.
func TestReaderHoldsLittle(t *testing.T) {
	const maxHeld = 4096
	for name, tc := range map[string]struct {
		head, body string
		call       bool
	}{
		"not a call":     {`{"note": "`, "blah ", false},
		"name too late":  {`<tool_call>{"a": "`, "blah ", false},
		"long arguments": {`<tool_call>{"name": "get_weather", "arguments": {"city": "`, "Paris ", true},
		"long xml value": {"<tool_call>\n<function=get_weather>\n<parameter=city>\n", "Paris ", true},
	} {
		r := NewReader(Options{Tools: weatherTools, Format: Format{Family: Hermes}, MaxHeld: maxHeld})
		r.Add(tc.head)
		held := 0
		for range 100000 {
			r.Add(tc.body)
			held = max(held, len(r.buf))
		}
		assert.LessOrEqual(t, held, maxHeld+64, name)
		_, calls := r.End(true)
		assert.Equal(t, tc.call, len(calls) == 1 && calls[0].Partial, name)
	}
}
