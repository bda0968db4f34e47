package main

import (
	"encoding/json"

	"github.com/llamaloop/llamaloop/internal/parity/beamcheck"
)

// The beam kind replays each case through package beam over the in-memory
// backend (see beamcheck.Replay).
func init() { runners["beam"] = runBeam }

func runBeam(cases []json.RawMessage) []result {
	out := make([]result, 0, len(cases))
	for i, raw := range cases {
		out = append(out, result{ID: caseID(raw, i), Err: beamcheck.Run(raw)})
	}
	return out
}
