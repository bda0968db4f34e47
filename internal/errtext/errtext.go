// Package errtext turns an error into the single line a user reads: the
// commands print it after their name, and the server sends it in an
// OpenAI error. It is pure Go, so that the server's package needs no cgo
// for it.
package errtext

import "strings"

// Line drops the package prefixes of llamacpp, logits, generation and beam
// from err's text and joins its lines.
func Line(err error) string {
	msg := err.Error()
	for _, pkg := range []string{"llamacpp: ", "logits: ", "generation: ", "beam: "} {
		msg = strings.ReplaceAll(msg, pkg, "")
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
}
