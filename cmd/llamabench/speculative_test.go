package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --draft and --prompt-lookup measure plain and speculative generation side
// by side; a model drafting for itself has every candidate accepted.
func TestSpeculativeRows(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		accepts bool
	}{
		{[]string{"--draft", tinyModel, "--draft-tokens", "3", "--draft-threshold", "0"}, true},
		{[]string{"--prompt-lookup", "4"}, false},
	} {
		jsonPath := filepath.Join(t.TempDir(), "out.json")
		res := run(t, append([]string{"--threads", "1", "-r", "2", "--prompt", "4", "--tg", "12", "--bandwidth-mb", "0",
			"-m", tinyModel, "--json", jsonPath}, tc.args...)...)
		require.Equal(t, 0, res.Code, res.Stderr)
		for _, name := range []string{"tg12 greedy", "tg12 greedy spec.", "tg12 sampling", "tg12 sampling spec."} {
			assert.Contains(t, res.Stdout, name)
		}
		data, err := os.ReadFile(jsonPath)
		require.NoError(t, err)
		var rep report
		require.NoError(t, json.Unmarshal(data, &rep))
		require.Len(t, rep.Models, 1)
		rows := rep.Models[0].Results
		require.Len(t, rows, 4)
		for i, r := range rows {
			assert.Equal(t, groupSpeculative, r.Group)
			if i%2 == 0 {
				assert.Nil(t, r.Speculation)
				continue
			}
			require.NotNil(t, r.Speculation)
			assert.Positive(t, r.Speculation.Speedup)
			if tc.accepts && r.Name == "tg12 greedy spec." {
				assert.Equal(t, 1.0, r.Speculation.AcceptanceRate)
				assert.Greater(t, r.Speculation.MeanAccepted, 1.0)
			}
		}
	}
	res := run(t, "-m", tinyModel, "--prompt-lookup", "-1")
	assert.Contains(t, res.Stderr, "--prompt-lookup -1")
	res = run(t, "-m", tinyModel, "--draft", tinyModel, "--draft-threshold", "2")
	assert.Contains(t, res.Stderr, "--draft-threshold 2")
}
