package jinja

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The conversations of the differential test: with and without a system
// prompt, tools, a call and its result, and a generation prompt.
var diffChats = []struct {
	name, messages, tools string
	addGenerationPrompt   bool
}{
	{"user", `[{"role":"user","content":"Hello, who are you?"}]`, "", true},
	{"system-multi", `[{"role":"system","content":"You are a terse assistant."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."},{"role":"user","content":"Name a colour: "}]`, "", false},
	{"multi-prompt", `[{"role":"user","content":"One\ntwo"},{"role":"assistant","content":"  Three  "},{"role":"user","content":"Über \"quotes\" <tags> & {braces} {{ x }}"}]`, "", true},
	{"tools", `[{"role":"system","content":"You answer with the weather."},{"role":"user","content":"Weather in Paris?"}]`, diffTools, true},
	{"tools-nosystem", `[{"role":"user","content":"Weather in Paris?"}]`, diffTools, true},
	{"tool-call", `[{"role":"system","content":"You answer with the weather."},{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":"","tool_calls":[{"id":"call12345","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris","unit":"c"}}}]},{"role":"tool","tool_call_id":"call12345","name":"get_weather","content":"18 C"}]`, diffTools, true},
	{"tool-call-final", `[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":"","tool_calls":[{"id":"call12345","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},{"role":"tool","tool_call_id":"call12345","name":"get_weather","content":"{\"temp\": 18}"},{"role":"assistant","content":"It is 18 C."}]`, diffTools, false},
}

const diffTools = `[{"type":"function","function":{"name":"get_weather","description":"The weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string","description":"The city"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"]}}},{"type":"function","function":{"name":"get_time","description":"The time now","parameters":{"type":"object","properties":{}}}}]`

// knownDifferences are the cases where @huggingface/jinja departs from
// Jinja2 (which transformers' apply_chat_template runs): this engine
// follows Jinja2 there. Keys are template/conversation prefixes.
var knownDifferences = map[string]string{
	"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja/": "@huggingface/jinja fails on a for loop over undefined and on trim of undefined; Jinja2 renders them empty",
	"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja/":   "@huggingface/jinja fails on a for loop over undefined and on trim of undefined; Jinja2 renders them empty",
	"meetkai-functionary-medium-v3.2.jinja/tools":          "@huggingface/jinja cannot unpack the (key, value) tuples of items() in this template's loop",
	"deepseek-ai-DeepSeek-V3.1.jinja/tool-call":            "the template adds a string and the call's arguments: Python raises TypeError for a dict, @huggingface/jinja writes the dict",
	"Qwen-QwQ-32B.jinja/multi-prompt":                      "@huggingface/jinja's lstrip('\\n') strips spaces too; Python strips only the characters given",
}

func knownDifference(known map[string]string, label string) string {
	for prefix, why := range known {
		if strings.HasPrefix(label, prefix) {
			return why
		}
	}
	return ""
}

// diffVars are the variables of one case, as JSON for node.
func diffVars(messages, tools string, agp bool) string {
	var b strings.Builder
	b.WriteString(`{"messages":` + messages)
	if tools != "" {
		b.WriteString(`,"tools":` + tools)
	}
	if agp {
		b.WriteString(`,"add_generation_prompt":true`)
	} else {
		b.WriteString(`,"add_generation_prompt":false`)
	}
	b.WriteString(`,"bos_token":"<s>","eos_token":"</s>","date_string":"26 Jul 2024"}`)
	return b.String()
}

// Every vendored real template renders every conversation byte for byte
// as @huggingface/jinja (the engine transformers.js uses) renders it, or
// both fail. Needs node and `npm ci --prefix internal/jinja/testdata`.
func TestDifferentialHuggingFaceJinja(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the differential test needs node and `npm ci --prefix internal/jinja/testdata`")
	}
	if _, err := os.Stat("testdata/node_modules/@huggingface/jinja/package.json"); err != nil {
		t.Skip("@huggingface/jinja is not installed: run `npm ci --prefix internal/jinja/testdata`")
	}
	// @huggingface/jinja's strftime_now is its own (the clock's), which
	// a render cannot replace: this engine's reads the clock too.
	same := differential(t, exec.Command("node", "render.mjs"), knownDifferences, Value{})
	assert.GreaterOrEqual(t, same, 170)
}

// Every vendored real template renders every conversation byte for byte
// as Python's Jinja2 renders it in transformers' environment
// (apply_chat_template's: sandboxed, trim_blocks, lstrip_blocks,
// loopcontrols, its tojson and raise_exception), or both fail. Needs
// python3 with jinja2 (Debian: python3-jinja2).
func TestDifferentialJinja2(t *testing.T) {
	python := ""
	// The first python3 on PATH may be another installation than the one
	// Debian's python3-jinja2 goes into.
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import jinja2").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		t.Skip("python3 with jinja2 is not installed (Debian: apt-get install python3-jinja2)")
	}
	same := differential(t, exec.Command(python, "render_jinja2.py"), nil, fixedStrftime)
	assert.GreaterOrEqual(t, same, 185)
}

// fixedStrftime is strftime_now at 26 July 2024, as the reference
// renderers of the differential tests have it.
var fixedStrftime = NewFunc("strftime_now", func(c *Call) (Value, error) {
	if len(c.Args) != 1 || c.Args[0].Kind() != KindString {
		return Value{}, newError(0, "strftime_now takes a format string")
	}
	return c.r.strftime(time.Date(2024, 7, 26, 0, 0, 0, 0, time.UTC), c.Args[0].s)
})

// differential renders every template and conversation with this engine
// and with the renderer cmd (run in testdata, reading the cases as JSON),
// and compares; it returns how many are byte-identical. strftimeNow, when
// a function, replaces this engine's strftime_now.
func differential(t *testing.T, cmd *exec.Cmd, known map[string]string, strftimeNow Value) int {
	names, err := filepath.Glob("testdata/templates/*.jinja")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	type tc struct {
		Template string          `json:"template"`
		Vars     json.RawMessage `json:"vars"`
	}
	var cases []tc
	var labels []string
	for _, n := range names {
		src, err := os.ReadFile(n)
		require.NoError(t, err)
		for _, c := range diffChats {
			cases = append(cases, tc{Template: string(src), Vars: json.RawMessage(diffVars(c.messages, c.tools, c.addGenerationPrompt))})
			labels = append(labels, filepath.Base(n)+"/"+c.name)
		}
	}
	in, err := json.Marshal(cases)
	require.NoError(t, err)
	cmd.Dir = "testdata"
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var want []struct {
		Out   *string `json:"out"`
		Error string  `json:"error"`
	}
	require.NoError(t, json.Unmarshal(out, &want))
	require.Len(t, want, len(cases))
	same, bothFail, nknown := 0, 0, 0
	for i, c := range cases {
		vars, err := FromJSON(c.Vars, 64)
		require.NoError(t, err)
		m := map[string]Value{}
		if strftimeNow.Kind() == KindFunc {
			m["strftime_now"] = strftimeNow
		}
		d := vars.AsDict()
		for _, k := range d.keys {
			m[k.s], _ = d.Get(k.s)
		}
		tmpl, err := Compile(c.Template, Limits{})
		var got string
		if err == nil {
			got, err = tmpl.Render(context.Background(), m)
		}
		w := want[i]
		if why := knownDifference(known, labels[i]); why != "" {
			nknown++
			t.Logf("%s: known difference: %s", labels[i], why)
			continue
		}
		switch {
		case w.Out == nil && err != nil:
			bothFail++
			t.Logf("%s: both fail: %v / %s", labels[i], err, w.Error)
		case w.Out == nil:
			t.Errorf("%s: the reference fails (%s), this engine renders", labels[i], w.Error)
		case err != nil:
			t.Errorf("%s: this engine fails: %v", labels[i], err)
		case assert.Equal(t, *w.Out, got, labels[i]):
			same++
		}
	}
	t.Logf("%d templates x %d conversations: %d byte-identical, %d failing in both engines, %d known differences",
		len(names), len(diffChats), same, bothFail, nknown)
	return same
}
