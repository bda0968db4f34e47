package generation

import (
	"bytes"
	"unicode/utf8"
)

// completeUTF8 returns the end of the longest prefix of text, from sent on,
// that does not stop inside a UTF-8 character: when text ends with the first
// bytes of a multi-byte character, the end is where that character starts.
// Bytes that can never become a valid character are not held back.
func completeUTF8(text []byte, sent int) int {
	end := len(text)
	// A character has at most 4 bytes: look at the last 3 for its start.
	for i := end - 1; i >= sent && i >= end-3; i-- {
		c := text[i]
		if c < utf8.RuneSelf {
			return end // ASCII: nothing is pending
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(text[i:end]) {
				return i
			}
			return end
		}
	}
	return end
}

// matchStop reports whether a stop string of r ends within the bytes the
// last token added to its text (from start on), and names it in ev. Each
// stop string is searched only where an occurrence would overlap the new
// bytes, so a stop string met earlier never fires again.
func (r *seq) matchStop(start int, ev *Event) bool {
	for i, s := range r.stops {
		from := max(0, start-len(s)+1)
		if bytes.Index(r.text[from:], s) >= 0 {
			ev.StopString = r.req.StopStrings[i]
			return true
		}
	}
	return false
}

// TrimLeadingSpace drops one leading space of a generated text, as the
// Strip(content=" ", left=1) step of a SentencePiece tokenizer's decoder in
// transformers does (see Request.TrimLeadingSpace). It reuses text's
// storage. The decoding loop calls it while the text is still empty before
// the new piece, so a first token without text (a control token) leaves the
// space of the next one to trim.
func TrimLeadingSpace(text []byte) []byte {
	if len(text) > 0 && text[0] == ' ' {
		return text[:copy(text, text[1:])]
	}
	return text
}
