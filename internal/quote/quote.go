// Package quote shortens the input an error message quotes: a request or a
// file of megabytes gets an error of a line, which still shows how the
// input starts and how long it is.
package quote

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Max is the most bytes of an input that a message quotes.
const Max = 64

// MaxMessage is the most bytes of a whole message that Message keeps.
const MaxMessage = 1024

// Message returns msg cut after MaxMessage bytes, with "..." and its length:
// the last guard of a message that quotes what another package wrote (a
// grammar's error quoting a pattern).
func Message(msg string) string {
	if len(msg) <= MaxMessage {
		return msg
	}
	end := MaxMessage
	for end > 0 && !utf8.RuneStart(msg[end]) {
		end--
	}
	return fmt.Sprintf("%s... (%d bytes)", msg[:end], len(msg))
}

// String returns s quoted as %q does, cut after its first Max bytes (at a
// character boundary) with "..." and its length when it is longer.
func String(s string) string {
	head, n, cut := prefix(s)
	if !cut {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(head), n)
}

// Value returns v as %v shows it (a json.RawMessage as its text), cut as
// String cuts, without quotes.
func Value(v any) string {
	var s string
	switch x := v.(type) {
	case json.RawMessage:
		s = string(x)
	case string:
		s = x
	default:
		s = fmt.Sprint(v)
	}
	head, n, cut := prefix(s)
	if !cut {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", head, n)
}

// prefix is s cut to Max bytes at a character boundary.
func prefix(s string) (head string, n int, cut bool) {
	if len(s) <= Max {
		return s, len(s), false
	}
	end := Max
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end], len(s), true
}
