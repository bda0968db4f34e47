package main

import (
	"encoding/json"

	"github.com/llamaloop/llamaloop/internal/parity"
)

func init() { runners["processors"] = runProcessors }

// runProcessors checks each case of a "processors" file with parity.CheckProcessors.
func runProcessors(cases []json.RawMessage) []result {
	out := make([]result, len(cases))
	for i, raw := range cases {
		out[i].ID = caseID(raw, i)
		c, err := parity.DecodeCase[parity.ProcessorsCase](raw)
		if err == nil {
			err = parity.CheckProcessors(c)
		}
		out[i].Err = err
	}
	return out
}
