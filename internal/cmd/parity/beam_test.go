package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBeamFilePasses(t *testing.T) {
	var out bytes.Buffer
	passed, failed := run([]string{vectors + "beam.json"}, &out)
	if passed != 60 || failed != 0 || out.String() != "60 passed, 0 failed\n" {
		t.Fatalf("%d passed, %d failed, want 60 and 0:\n%s", passed, failed, out.String())
	}
}

// TestBeamReportsFailures breaks copies of a real case: a wrong token, a
// wrong beam index and a model table missing a sequence the search needs.
func TestBeamReportsFailures(t *testing.T) {
	data, err := os.ReadFile(vectors + "beam.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []map[string]any `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	var base map[string]any
	for _, c := range file.Cases {
		if c["id"] == "beam-001" {
			base = c
		}
	}
	clone := func(id string) map[string]any {
		raw, _ := json.Marshal(base)
		var c map[string]any
		_ = json.Unmarshal(raw, &c)
		c["id"] = id
		return c
	}
	token := clone("bad-token")
	seqs := token["expected"].(map[string]any)["sequences"].([]any)
	row := seqs[0].([]any)
	row[len(row)-1] = row[len(row)-1].(float64) + 1
	bidx := clone("bad-beam-index")
	bi := bidx["expected"].(map[string]any)["beam_indices"].([]any)[0].([]any)
	bi[0] = bi[0].(float64) + 1
	diverged := clone("diverged")
	delete(diverged["logits_by_sequence"].(map[string]any), "2,2") // prompt [2] then token 2, scored at step 2

	out, err := json.Marshal(map[string]any{"kind": "beam", "cases": []any{base, token, bidx, diverged}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	passed, failed := run([]string{path}, &buf)
	text := buf.String()
	if passed != 1 || failed != 3 {
		t.Fatalf("%d passed, %d failed, want 1 and 3:\n%s", passed, failed, text)
	}
	for _, want := range []string{"bad-token: sequences: row 0: index", "bad-beam-index: beam_indices: row 0: index 0", "diverged: ", "1 passed, 3 failed\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}
