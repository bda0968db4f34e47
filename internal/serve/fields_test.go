package serve

import (
	"context"
	"testing"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testParams() *params {
	base := genconfig.Default()
	base.DoSample, base.TopK = true, 0
	return &params{base: base, vocab: 100, slotSize: 256}
}

func planBody(t *testing.T, body string, chat bool) (*plan, error) {
	t.Helper()
	req, err := decodeRequest([]byte(body), chat)
	if err != nil {
		return nil, err
	}
	return testParams().plan(context.Background(), req, chat)
}

// Every field OpenAI defines for chat completions is accepted: those with
// no effect here whatever their value, those that ask for what the server
// lacks when null or meaning "none".
func TestOpenAIChatFieldsAccepted(t *testing.T) {
	body := `{"model":"demo","messages":[{"role":"user","content":"Hi","name":"ann"},
		{"role":"assistant","content":"Hello","tool_calls":[],"function_call":null},{"role":"user","content":"More"}],
		"metadata":{"k":"v"},"store":true,"service_tier":"flex","user":"u-1","safety_identifier":"s-1",
		"prompt_cache_key":"pk","prompt_cache_retention":"24h","prompt_cache_options":{"mode":"explicit","ttl":"30m"},
		"reasoning_effort":"high","verbosity":"low","parallel_tool_calls":false,
		"prediction":{"type":"content","content":"Hello"},"web_search_options":{"search_context_size":"low"},
		"modalities":["text"],"audio":null,"moderation":null,"tools":null,"tool_choice":"none",
		"functions":[],"function_call":"auto","stream_options":null,
		"max_completion_tokens":5,"presence_penalty":0,"frequency_penalty":0}`
	pl, err := planBody(t, body, true)
	require.NoError(t, err)
	require.Len(t, pl.reqs, 1)
	r := pl.reqs[0]
	require.Len(t, r.Messages, 3)
	assert.Equal(t, "Hello", r.Messages[1].Content)
	assert.Equal(t, 5, *r.Config.MaxNewTokens)
	assert.Empty(t, r.Processors, "penalties of 0 add no processor")

	for _, b := range []string{`{"messages":[{"role":"user","content":"x"}],"tools":[]}`,
		`{"messages":[{"role":"user","content":"x"}],"modalities":[]}`,
		`{"messages":[{"role":"user","content":"x"}],"tool_choice":"auto"}`} {
		_, err := planBody(t, b, true)
		assert.NoError(t, err, b)
	}

	// Completions: OpenAI's fields at the values the server implements.
	pl, err = planBody(t, `{"model":"demo","prompt":"a","best_of":1,"echo":false,"suffix":"","user":"u","logprobs":null,"stream_options":null}`, false)
	require.NoError(t, err)
	require.Len(t, pl.reqs, 1)
}

// The fields that ask for what the server lacks are refused with 400,
// naming the field and saying why.
func TestOpenAIFieldsRefused(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	for _, tc := range []struct {
		body  string
		chat  bool
		param string
		msg   string
	}{
		{`{` + msgs + `,"modalities":["text","audio"]}`, true, "modalities", `modalities "audio": this server generates text only (modalities ["text"])`},
		{`{` + msgs + `,"modalities":"text"}`, true, "modalities", "modalities must be an array of strings"},
		{`{` + msgs + `,"audio":{"voice":"alloy","format":"mp3"}}`, true, "audio", "audio output is not supported: this server generates text only"},
		{`{` + msgs + `,"moderation":{"model":"omni-moderation-latest"}}`, true, "moderation", "moderation is not available on this server: it has no moderation model"},
		{`{` + msgs + `,"tools":[{"type":"code_interpreter"}]}`, true, "tools[0].type", `tools[0]: type "code_interpreter": only function tools are supported`},
		{`{` + msgs + `,"tools":[{"type":"function","function":{"name":"a b"}}]}`, true, "tools[0].function.name", `function name "a b"`},
		{`{` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]}`, true, "tools[0].function.parameters", "parameters must be a JSON Schema object"},
		{`{` + msgs + `,"tools":{"type":"function"}}`, true, "tools", `field "tools"`},
		{`{` + msgs + `,"functions":[{"name":"f"}]}`, true, "functions", "functions: functions and function_call are deprecated by OpenAI: send tools and tool_choice"},
		{`{` + msgs + `,"tool_choice":"required"}`, true, "tool_choice", `tool_choice "required" needs tools`},
		{`{` + msgs + `,"tool_choice":"sometimes"}`, true, "tool_choice", `tool_choice "sometimes": want none, auto, required or a function`},
		{`{` + msgs + `,"tools":[{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`, true, "tool_choice", `tool_choice names function "f", which is not among the tools`},
		{`{` + msgs + `,"function_call":{"name":"f"}}`, true, "function_call", "deprecated by OpenAI"},
		{`{"messages":[{"role":"tool","content":"42"}]}`, true, "messages[0].tool_call_id", "a tool message needs tool_call_id"},
		{`{"messages":[{"role":"function","content":"42"}]}`, true, "messages[0].role", "deprecated by OpenAI"},
		{`{"messages":[{"role":"user","content":"x","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			true, "messages[0].tool_calls", "messages[0]: tool_calls belong to assistant messages"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"arguments":"{}"}}]}]}`,
			true, "messages[0].tool_calls", "function.name is required"},
		{`{` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","not":{}}}}],"tool_choice":"required"}`, true, "tools", "the parameters cannot be enforced"},
		{`{` + msgs + `,"presence_penalty":2.01}`, true, "presence_penalty", "presence_penalty 2.01: must be in [-2, 2]"},
		{`{"prompt":"a","frequency_penalty":-2.5}`, false, "frequency_penalty", "frequency_penalty -2.5: must be in [-2, 2]"},
		{`{"prompt":"a","store":true}`, false, "store", `field "store" belongs to the other endpoint`},
		{`{"prompt":"a","tools":null}`, false, "tools", `field "tools" belongs to the other endpoint`},
		{`{"prompt":"a","logit_bias":{"0":101}}`, false, "logit_bias", "logit_bias of 0: 101 is outside [-100, 100]"},
		{`{"prompt":"a","logit_bias":{"-1":1}}`, false, "logit_bias", `logit_bias: "-1" is not a token id in [0, 100)`},
		{"{\"prompt\":\"a\xff\"}", false, "", "the body is not valid UTF-8"},
	} {
		_, err := planBody(t, tc.body, tc.chat)
		var re *requestError
		require.ErrorAs(t, err, &re, tc.body)
		assert.Equal(t, 400, re.status, tc.body)
		assert.Equal(t, tc.param, re.param, tc.body)
		assert.Contains(t, re.msg, tc.msg, tc.body)
	}
}

// With several unknown fields, the error names the first in the body's
// order, every time.
func TestFirstUnknownFieldNamed(t *testing.T) {
	for range 50 {
		for body, want := range map[string]string{
			`{"prompt":"a","zeta":1,"alpha":2,"mu":3}`:                 "zeta",
			`{"alpha":1,"prompt":"a","zeta":2}`:                        "alpha",
			`{"prompt":"a","messages":[],"bogus":1}`:                   "messages",
			`{"prompt":"a","bogus":1,"messages":[]}`:                   "bogus",
			`{"prompt":"a","num_beams":2,"bogus":1,"top_k":3,"x":[1]}`: "num_beams",
		} {
			_, err := decodeRequest([]byte(body), false)
			var re *requestError
			require.ErrorAs(t, err, &re, body)
			assert.Equal(t, want, re.param, body)
		}
	}
}

// logit_bias may bias token 0 (it was refused as sequence_bias, whose list
// form has no token 0), and a request's own sequence_bias stays beside it.
func TestLogitBiasTokenZero(t *testing.T) {
	pl, err := planBody(t, `{"prompt":"a","logit_bias":{"0":-100,"7":2.5},"sequence_bias":[[[3,4],-1.0]]}`, false)
	require.NoError(t, err)
	r := pl.reqs[0]
	require.Len(t, r.Config.SequenceBias, 1)
	assert.Equal(t, []int32{3, 4}, r.Config.SequenceBias[0].Tokens)
	require.Len(t, r.Processors, 1)
	chain, err := logits.Chain(100, r.Processors...)
	require.NoError(t, err)
	scores := make([]float32, 100)
	chain.Process(chain.NewHistory([]int32{1}), scores)
	assert.Equal(t, float32(-100), scores[0])
	assert.Equal(t, float32(2.5), scores[7])
	assert.Zero(t, scores[1])
}

// presence_penalty and frequency_penalty as OpenAI defines them: the logit
// of a token generated c times so far drops by c*frequency + presence;
// the prompt's tokens count for nothing.
func TestPresenceFrequencyPenalty(t *testing.T) {
	pl, err := planBody(t, `{"prompt":[5,5,9],"presence_penalty":0.25,"frequency_penalty":-0.5,"logit_bias":{"3":1}}`, false)
	require.NoError(t, err)
	r := pl.reqs[0]
	require.Len(t, r.Processors, 2)
	assert.Equal(t, "PresenceFrequencyPenalty", r.Processors[0].Name())
	chain, err := logits.Chain(100, r.Processors...)
	require.NoError(t, err)
	h := chain.NewHistory(r.Prompt)
	scores := make([]float32, 100)
	chain.Process(h, scores)
	assert.Equal(t, float32(0), scores[5], "the prompt is not counted")
	assert.Equal(t, float32(1), scores[3])
	for _, tok := range []int32{3, 3, 7, 5} {
		h.Accept(tok)
	}
	clear(scores)
	chain.Process(h, scores)
	assert.Equal(t, float32(1-(2*-0.5+0.25)), scores[3])
	assert.Equal(t, float32(-(-0.5 + 0.25)), scores[7])
	assert.Equal(t, float32(-(-0.5 + 0.25)), scores[5], "one generated occurrence; the prompt's two not counted")
	assert.Zero(t, scores[9])
	assert.Zero(t, scores[1])

	// Each choice counts its own tokens.
	h2 := chain.NewHistory(r.Prompt)
	clear(scores)
	chain.Process(h2, scores)
	assert.Equal(t, float32(1), scores[3])
	assert.Zero(t, scores[7])
}
