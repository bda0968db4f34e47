package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// vectors is the repository's copy of transformers' parity vectors.
const vectors = "../../parity/testdata/"

func TestProcessorsFilePasses(t *testing.T) {
	var out bytes.Buffer
	passed, failed := run([]string{vectors + "processors.json"}, &out)
	if passed != 287 || failed != 0 {
		t.Fatalf("%d passed, %d failed, want 287 and 0:\n%s", passed, failed, out.String())
	}
	if got := out.String(); got != "287 passed, 0 failed\n" {
		t.Fatalf("output %q", got)
	}
}

func TestReportsFailures(t *testing.T) {
	dir := t.TempDir()
	// One passing case, one whose expected value is wrong, one with a wrong name list.
	file := `{"kind": "processors", "meta": {}, "cases": [
	 {"id": "ok", "generation_config": {"do_sample": true, "top_k": 2, "max_new_tokens": 3},
	  "vocab_size": 4, "prompt_length": 1, "input_ids": [[1]], "scores": [["1", "3", "2", "0"]],
	  "processor_names": ["TopKLogitsWarper"], "expected": [["-inf", "3", "2", "-inf"]]},
	 {"id": "bad-value", "generation_config": {"do_sample": true, "temperature": 2.0, "top_k": 0, "max_new_tokens": 3},
	  "vocab_size": 2, "prompt_length": 1, "input_ids": [[1]], "scores": [["1", "3"]],
	  "processor_names": ["TemperatureLogitsWarper"], "expected": [["0.5", "1.6"]]},
	 {"id": "bad-names", "generation_config": {"max_new_tokens": 3},
	  "vocab_size": 2, "prompt_length": 1, "input_ids": [[1]], "scores": [["1", "3"]],
	  "processor_names": ["TopKLogitsWarper"], "expected": [["1", "3"]]}]}`
	path := filepath.Join(dir, "p.json")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	beam := filepath.Join(dir, "b.json")
	if err := os.WriteFile(beam, []byte(`{"kind": "no-such-kind", "cases": [{"id": "x"}, {"id": "y"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	passed, failed := run([]string{path, beam, filepath.Join(dir, "missing.json")}, &out)
	text := out.String()
	if passed != 1 || failed != 5 {
		t.Fatalf("%d passed, %d failed, want 1 and 5:\n%s", passed, failed, text)
	}
	for _, want := range []string{
		"bad-value: row 0: index 1: got 1.5, want 1.6\n",
		"bad-names: processor_names: got 0 names [], want 1 [TopKLogitsWarper]\n",
		"kind no-such-kind: not supported yet (2 cases not run)\n",
		"missing.json: parity:",
		"1 passed, 5 failed\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}
