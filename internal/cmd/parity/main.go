// Command parity checks llamaloop against transformers' parity vectors.
//
// Usage:
//
//	go run ./internal/cmd/parity FILE...
//	go run ./internal/cmd/parity internal/parity/testdata/*.json
//
// Each FILE is a parity file in the schema of internal/parity/testdata/README.md, of kind "processors",
// "beam" or "greedy_logprobs". parity runs every case, prints one line per failing case with its id
// and the first difference, and ends with the line "N passed, M failed". The exit status is 1 when a
// case fails (or a file cannot be read, or its kind has no runner yet) and 2 on bad usage.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/llamaloop/llamaloop/internal/parity"
)

// result is the outcome of one case: Err is nil when the case passes, otherwise its message is the
// first difference.
type result struct {
	ID  string
	Err error
}

// runners maps a file kind to the function that runs its cases; each kind registers itself from its
// own file with func init() { runners["kind"] = ... }.
var runners = map[string]func(cases []json.RawMessage) []result{}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: parity FILE...")
		os.Exit(2)
	}
	_, failed := run(os.Args[1:], os.Stdout)
	if failed > 0 {
		os.Exit(1)
	}
}

// run checks every case of every file, writes one line per failing case and the summary line to w,
// and returns the counts. A file that cannot be read counts as one failure; a kind without a runner
// counts each of its cases as a failure, with one "not supported yet" line for the file.
func run(files []string, w io.Writer) (passed, failed int) {
	for _, path := range files {
		f, err := parity.ReadFile(path)
		if err != nil {
			fmt.Fprintf(w, "%s: %v\n", path, err)
			failed++
			continue
		}
		runner, ok := runners[f.Kind]
		if !ok {
			fmt.Fprintf(w, "%s: kind %s: not supported yet (%d cases not run)\n", path, f.Kind, len(f.Cases))
			failed += max(len(f.Cases), 1)
			continue
		}
		for _, r := range runner(f.Cases) {
			if r.Err != nil {
				fmt.Fprintf(w, "%s: %v\n", r.ID, r.Err)
				failed++
			} else {
				passed++
			}
		}
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", passed, failed)
	return passed, failed
}

// caseID returns a case's id for messages, or its position when it has none.
func caseID(raw json.RawMessage, i int) string {
	if id := parity.CaseID(raw); id != "" {
		return id
	}
	return fmt.Sprintf("case #%d", i)
}
