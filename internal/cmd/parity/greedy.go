package main

import (
	"encoding/json"

	"github.com/llamaloop/llamaloop/internal/parity"
	"github.com/llamaloop/llamaloop/internal/parity/greedycheck"
)

// The greedy_logprobs kind replays each case through the decoding loop of
// package generation (see greedycheck.ReplayGreedy).
func init() { runners["greedy_logprobs"] = runGreedy }

func runGreedy(cases []json.RawMessage) []result {
	out := make([]result, 0, len(cases))
	for i, raw := range cases {
		c, err := parity.DecodeCase[parity.GreedyCase](raw)
		if err == nil {
			err = greedycheck.ReplayGreedy(c)
		}
		out = append(out, result{ID: caseID(raw, i), Err: err})
	}
	return out
}
