package main

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Ollama's /api/tags and /api/show describe the model from its GGUF file:
// the demo's architecture, sizes and chat template, the file's size and
// time.
func TestServeOllamaModel(t *testing.T) {
	s := startServer(t)
	st, err := os.Stat(demoModel)
	require.NoError(t, err)

	resp, data := rawDo(t, "GET", s.url+"/api/tags", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	var tags struct {
		Models []struct {
			Name       string
			ModifiedAt time.Time `json:"modified_at"`
			Size       int64
			Digest     string
			Details    struct{ Family, Format string }
		}
	}
	require.NoError(t, json.Unmarshal(data, &tags))
	require.Len(t, tags.Models, 1)
	m := tags.Models[0]
	assert.Equal(t, "demo:latest", m.Name)
	assert.Equal(t, st.Size(), m.Size)
	assert.True(t, st.ModTime().Equal(m.ModifiedAt))
	assert.Len(t, m.Digest, 64)
	assert.Equal(t, "llama", m.Details.Family)
	assert.Equal(t, "gguf", m.Details.Format)

	resp, data = rawDo(t, "POST", s.url+"/api/show", `{"model":"demo"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	var show struct {
		Template  string
		ModelInfo map[string]any `json:"model_info"`
	}
	require.NoError(t, json.Unmarshal(data, &show))
	assert.Equal(t, demo.Spec.Vocab.ChatTemplate, show.Template)
	assert.Equal(t, "llama", show.ModelInfo["general.architecture"])
	assert.EqualValues(t, demo.Spec.NCtxTrain, show.ModelInfo["llama.context_length"])
	assert.EqualValues(t, demo.Spec.NEmbd, show.ModelInfo["llama.embedding_length"])
	assert.EqualValues(t, demo.Spec.NLayer, show.ModelInfo["llama.block_count"])
}
