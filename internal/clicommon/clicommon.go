// Package clicommon is what the commands and the server (internal/serve)
// share in pure Go, so that the server's package needs no cgo: the single
// line of an error that a user reads (the commands print it after their
// name, the server sends it in an OpenAI error) and the bounds of user
// input.
package clicommon

import "strings"

// MaxChatMessages bounds the messages of one chat: a llamaserve request, a
// llamagen --chat conversation or --session file, a --prompts line. A
// message takes a few tokens of template at least, so that no context
// worth having holds many more; the bound keeps a hostile chat's rendering
// (twice, see llamacpp.Vocab.TokenizeChat) from running long before its
// length is refused.
const MaxChatMessages = 8192

// Line drops the package prefixes of llamacpp, logits, generation and beam
// from err's text and joins its lines.
func Line(err error) string {
	msg := err.Error()
	for _, pkg := range []string{"llamacpp: ", "logits: ", "generation: ", "beam: "} {
		msg = strings.ReplaceAll(msg, pkg, "")
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
}
