package chat

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzOptions are the reader's options that flags choose: the family (low
// two bits), reasoning markers, the answer opening in them, reasoning
// inline, one call, no tools and a small MaxHeld.
func fuzzOptions(flags uint8) Options {
	opt := Options{Tools: weatherTools, Format: Format{Family: []Family{Hermes, Llama3, Mistral, JSON}[flags&3]}}
	if flags&4 != 0 {
		opt.Format.Reasoning = Think
	}
	opt.InReasoning = flags&8 != 0
	opt.ReasoningInline = flags&16 != 0
	opt.OneCall = flags&32 != 0
	if flags&64 != 0 {
		opt.Tools = nil
	}
	if flags&128 != 0 {
		opt.MaxHeld = 24
	}
	return opt
}

// splits cuts text at random points chosen by seed.
func splits(text string, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, seed>>32))
	var out []string
	for len(text) > 0 {
		n := 1 + rng.IntN(min(len(text), 1+rng.IntN(16)))
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}

var fuzzSeeds = []string{
	"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
	"Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
	"<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Rome\\\"}\"}",
	"<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>",
	`<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}`,
	`{"name": "get_weather", "parameters": {"city": "Oslo"}}; {"name": "get_time", "parameters": {}}`,
	`[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Lima"}}]`,
	`[TOOL_CALLS]get_weather[ARGS]{"city": "Lima"}[TOOL_CALLS]get_time[ARGS]{}`,
	"```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Kyiv\"}}\n```",
	`{"tool_calls": [{"type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}`,
	`{"name": "f", "arguments": {<tool_call>{"name":"get_weather"}`,
	"<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
	"Okay, the weather.\n</think>\n\nIt is sunny.",
	"It is sunny. <tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": 1e3, \"x\": [true, false, null, -0.5, \"\\u00e9\"]}}</tool_call> ok",
	"  {\"city\": \"Paris\"} and <tool",
	"<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>New York</arg_value>\n</tool_call>",
	`{"function": {"name": "get_time", "arguments": {"zone": 1}}, "name": "get_weather", "arguments": {}}`,
}

// A streamed answer, cut anywhere, reads as the whole one, for every
// family and option; an answer read as no call and no reasoning is its
// text, unchanged.
func FuzzReaderStreamedEqualsWhole(f *testing.F) {
	for i, s := range fuzzSeeds {
		for flags := range 32 {
			f.Add(s, uint8(flags|i%8<<5), uint64(i))
		}
	}
	f.Fuzz(func(t *testing.T, text string, flags uint8, seed uint64) {
		opt := fuzzOptions(flags)
		whole := read(t, opt, true, text)
		streamed := read(t, opt, true, splits(text, seed)...)
		require.Equal(t, whole, streamed)
		if len(whole.Calls) == 0 && whole.Reasoning == "" && (opt.Format.Reasoning.Open == "" || opt.ReasoningInline) {
			require.Equal(t, text, whole.Content)
		}
		cut := read(t, opt, false, splits(text, seed+1)...)
		require.Equal(t, whole, cut, "stopped or not, the same")
	})
}
