package main

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGreedyLogprobsRunner(t *testing.T) {
	data, err := os.ReadFile(vectors + "greedy_logprobs.json")
	require.NoError(t, err)
	var file struct {
		Kind  string            `json:"kind"`
		Cases []json.RawMessage `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(data, &file))
	require.Equal(t, "greedy_logprobs", file.Kind)
	results := runners[file.Kind](file.Cases)
	require.Len(t, results, 20)
	for _, r := range results {
		require.NoError(t, r.Err, r.ID)
	}
}
