package jsonio

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func handle(t *testing.T, req any) map[string]json.RawMessage {
	t.Helper()
	b, err := json.Marshal(req)
	require.NoError(t, err)
	var out map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(Handle(b), &out), "Handle must answer JSON")
	return out
}

func TestInit(t *testing.T) {
	out := Handle([]byte(`{"op":"init","config":{"version":2,"tau":3,"eta":0.1}}`))
	assert.JSONEq(t, `{"config":{"version":2,"tau":3,"eta":0.1,"mu":6,"m":100},"state":{"mu":6,"steps":0}}`, string(out))
}

// The three-token hand case of package mirostat through the wire, and its
// continuation by sending the state back.
func TestStepRoundTrip(t *testing.T) {
	row := []float32{float32(math.Log(0.5)), float32(math.Log(0.3)), float32(math.Log(0.2))}
	cfg := Config{Version: 2, Tau: 1, Eta: 0.1}
	ref, err := mirostat.New(cfg.lib())
	require.NoError(t, err)

	var state *State
	for i, u := range []float64{0.7, 0.2, 0.95, 0.5} {
		b, err := json.Marshal(StepRequest{Op: "step", Config: cfg, State: state, Logits: row, Uniform: u})
		require.NoError(t, err)
		var resp StepResponse
		require.NoError(t, json.Unmarshal(Handle(b), &resp))
		want, err := ref.SampleLogits(row, u)
		require.NoError(t, err)
		assert.Equal(t, wireStep(want), resp.Step, "step %d", i)
		assert.Equal(t, wireState(ref.State()), resp.State)
		state = &resp.State
	}
	// Direct typed call, same answer as the first step of a fresh session.
	b, err := HandleStep([]byte(`{"config":{"version":2,"tau":1,"eta":0.1},"logits":[-0.6931472,-1.2039728,-1.609438],"uniform":0.7}`))
	require.NoError(t, err)
	var resp StepResponse
	require.NoError(t, json.Unmarshal(b, &resp))
	assert.Equal(t, int32(1), resp.Step.Token)
	assert.Equal(t, 2, resp.Step.Kept)
	assert.InDelta(t, 1.926303, resp.Step.Mu, 1e-6)
	assert.Equal(t, State{Mu: resp.Step.Mu, Steps: 1}, resp.State)
}

func TestLogitsNullMasks(t *testing.T) {
	var l Logits
	require.NoError(t, json.Unmarshal([]byte(` [ 1.5, null ,-2e3, 0 ] `), &l))
	assert.Equal(t, Logits{1.5, float32(math.Inf(-1)), -2000, 0}, l)
	b, err := json.Marshal(l)
	require.NoError(t, err)
	assert.Equal(t, `[1.5,null,-2000,0]`, string(b))
	var back Logits
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, l, back)
	for _, bad := range []string{`[1,"x"]`, `[1,[2]]`, `[true]`, `[1e39]`, `{"a":1}`, `[1,{"a":2}]`} {
		assert.Error(t, json.Unmarshal([]byte(bad), &l), bad)
	}
	require.NoError(t, json.Unmarshal([]byte(`[]`), &l))
	assert.Empty(t, l)

	// Masked entries are never drawn.
	out := Handle([]byte(`{"op":"step","config":{"version":1,"tau":50,"eta":0},"logits":[null,3,null],"uniform":0.9}`))
	var resp StepResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	assert.Equal(t, int32(1), resp.Step.Token)
	assert.Equal(t, 1, resp.Step.Kept)
}

func TestBatchIsAtomic(t *testing.T) {
	cfg := Config{Version: 1, Tau: 2, Eta: 0.3}
	good := StepRequest{Config: cfg, Logits: Logits{1, 2, 3}, Uniform: 0.4}
	out := handle(t, BatchRequest{Op: "batch", Sessions: []StepRequest{good, good}})
	var resp BatchResponse
	b, _ := json.Marshal(out)
	require.NoError(t, json.Unmarshal(b, &resp))
	require.Len(t, resp.Results, 2)
	assert.Equal(t, resp.Results[0], resp.Results[1])

	bad := good
	bad.Uniform = 1
	out = handle(t, BatchRequest{Op: "batch", Sessions: []StepRequest{good, bad, good}})
	var e ErrorResponse
	b, _ = json.Marshal(out)
	require.NoError(t, json.Unmarshal(b, &e))
	assert.Equal(t, "invalid_uniform", e.Error.Code)
	require.NotNil(t, e.Error.Session)
	assert.Equal(t, 1, *e.Error.Session)
	assert.NotContains(t, out, "results", "no partial results")

	badState := good
	badState.State = &State{Mu: 1, Steps: -2}
	_, err := HandleBatch(mustJSON(t, BatchRequest{Sessions: []StepRequest{good, badState}}))
	assert.Equal(t, "invalid_parameter", WireError(err).Code)
	assert.Equal(t, 1, *WireError(err).Session)
}

func TestPreviewAndWeights(t *testing.T) {
	out := Handle([]byte(`{"op":"preview","config":{"version":2,"tau":1,"eta":0.1},"weights":[5,3,2],"candidates":true}`))
	var resp PreviewResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	assert.Equal(t, 3, resp.Preview.Vocabulary)
	assert.Equal(t, 2, resp.Preview.Kept)
	assert.InDelta(t, 0.8, resp.Preview.RetainedMass, 1e-15)
	require.NotNil(t, resp.Candidates)
	assert.Equal(t, []int32{0, 1}, resp.Candidates.Tokens)
	assert.InDeltaSlice(t, []float64{0.625, 0.375}, resp.Candidates.Renormalized, 1e-15)

	out = Handle([]byte(`{"op":"preview","config":{"version":2,"tau":1,"eta":0.1},"logits":[1],"weights":[1]}`))
	assert.Contains(t, string(out), `"bad_request"`)

	out = Handle([]byte(`{"op":"weights","config":{"version":2,"tau":1,"eta":0.1},"weights":[5,3,2],"uniform":0.7}`))
	var st StepResponse
	require.NoError(t, json.Unmarshal(out, &st))
	assert.Equal(t, int32(1), st.Step.Token)
	assert.InDelta(t, 0.3, st.Step.Prob, 1e-15)

	out = Handle([]byte(`{"op":"weights","config":{"version":2,"tau":1,"eta":0.1},"weights":[5,-3,2],"uniform":0.7}`))
	var e ErrorResponse
	require.NoError(t, json.Unmarshal(out, &e))
	assert.Equal(t, "invalid_probability", e.Error.Code)
	require.NotNil(t, e.Error.Index)
	assert.Equal(t, 1, *e.Error.Index)
}

func TestErrorCodes(t *testing.T) {
	for req, code := range map[string]string{
		`not json`:                        "bad_request",
		`{"op":"dance"}`:                  "bad_request",
		`{"op":"init","config":{},"x":1}`: "bad_request",
		`{"op":"init","config":{"version":3,"tau":1}}`:                                        "invalid_parameter",
		`{"op":"step","config":{"version":2,"tau":1},"logits":[],"uniform":0.5}`:              "empty_row",
		`{"op":"step","config":{"version":2,"tau":1},"logits":[null,null],"uniform":0.5}`:     "all_masked",
		`{"op":"step","config":{"version":2,"tau":1},"logits":[1],"uniform":-1}`:              "invalid_uniform",
		`{"op":"step","config":{"version":2,"tau":1},"logits":[1]} {}`:                        "bad_request",
		`{"op":"weights","config":{"version":2,"tau":1},"weights":[1e308,1e308],"uniform":0}`: "numerical_failure",
	} {
		var e ErrorResponse
		require.NoError(t, json.Unmarshal(Handle([]byte(req)), &e), req)
		assert.Equal(t, code, e.Error.Code, req)
		assert.NotEmpty(t, e.Error.Message)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// Handle never panics and always answers a JSON object.
func FuzzHandle(f *testing.F) {
	for _, s := range []string{
		`{"op":"init","config":{"version":2,"tau":3,"eta":0.1}}`,
		`{"op":"step","config":{"version":1,"tau":3,"eta":0.1},"state":{"mu":4,"steps":2},"logits":[1,null,3],"uniform":0.5}`,
		`{"op":"batch","sessions":[{"config":{"version":2,"tau":1,"eta":1},"logits":[0,0],"uniform":0.1}]}`,
		`{"op":"preview","config":{"version":2,"tau":1},"weights":[1,0,2],"candidates":true}`,
		`{"op":"weights","config":{"version":1,"tau":2,"m":2},"weights":[3,2,1],"uniform":0.99}`,
		`[1,2]`, `null`, `{"op":"step","logits":[1e38,-1e38]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, req []byte) {
		var out map[string]json.RawMessage
		if err := json.Unmarshal(Handle(req), &out); err != nil {
			t.Fatalf("answer is not a JSON object: %v", err)
		}
		if len(out) == 0 {
			t.Fatalf("empty answer")
		}
	})
}
