package serve

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Ollama's options map onto the chat request's fields and the generation
// config's; Ollama's "unset" values (-1 seed, num_predict -1 or -2) leave
// the field unset, the runner's options change nothing, and an unknown
// option is named.
func TestOllamaOptions(t *testing.T) {
	req := &apiRequest{config: map[string]json.RawMessage{}}
	require.NoError(t, applyOllamaOptions(req, json.RawMessage(`{"temperature":0.5,"top_p":0.9,"top_k":7,"min_p":0.1,
		"typical_p":0.8,"repeat_penalty":1.2,"presence_penalty":0.3,"frequency_penalty":-0.4,"seed":42,"num_predict":9,
		"stop":["a","b"],"mirostat":2,"mirostat_tau":4,"mirostat_eta":0.2,"num_ctx":99999,"repeat_last_n":64,"num_gpu":1,"num_thread":3}`)))
	assert.Equal(t, 0.5, *req.Temperature)
	assert.Equal(t, 0.9, *req.TopP)
	assert.Equal(t, int64(42), *req.Seed)
	assert.Equal(t, 9, *req.MaxTokens)
	assert.Equal(t, 0.3, *req.PresencePenalty)
	assert.Equal(t, -0.4, *req.FrequencyPenalty)
	assert.JSONEq(t, `["a","b"]`, string(req.Stop))
	assert.Equal(t, 2, *req.Mirostat)
	assert.Equal(t, 4.0, *req.MirostatTau)
	assert.Equal(t, 0.2, *req.MirostatEta)
	config, err := json.Marshal(req.config)
	require.NoError(t, err)
	assert.JSONEq(t, `{"top_k":7,"min_p":0.1,"typical_p":0.8,"repetition_penalty":1.2}`, string(config))

	for _, unset := range []string{`{"seed":-1,"num_predict":-1}`, `{"num_predict":-2}`, `{"num_predict":0}`, `{"seed":null}`} {
		req := &apiRequest{config: map[string]json.RawMessage{}}
		require.NoError(t, applyOllamaOptions(req, json.RawMessage(unset)))
		assert.Nil(t, req.Seed, unset)
		assert.Nil(t, req.MaxTokens, unset)
	}

	for opts, want := range map[string]string{
		`{"tfs_z":1}`:           `unknown option "tfs_z"`,
		`{"num_predict":"ten"}`: `option "num_predict": "ten" is not of its type`,
		`[1]`:                   "options must be an object",
	} {
		err := applyOllamaOptions(&apiRequest{config: map[string]json.RawMessage{}}, json.RawMessage(opts))
		require.Error(t, err, opts)
		assert.Equal(t, want, err.Error(), opts)
	}
}
