package spectok

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Render writes a chat's text with contents in place of its messages'
// texts (or of any texts the caller chose), in their order.
type Render func(contents []string) (string, error)

// Split renders the chat twice, with contents and with a placeholder in
// place of each non-empty content, and aligns the two texts: what the
// template wrote around the placeholders is Special, and each content, as
// it appears in the text (itself, or trimmed as templates often do), is
// not. placed tells the contents found in the text so; nil means that the
// two could not be aligned (the template changes contents in another way,
// or branches on them), and the text is then one Special span. The error is
// render's with contents.
func Split(render Render, contents []string) (spans []Span, placed []bool, err error) {
	text, err := render(contents)
	if err != nil {
		return nil, nil, err
	}
	whole := []Span{{Text: text, Special: true}}
	marker, ok := newMarker(text, contents)
	if !ok {
		return whole, nil, nil
	}
	ph := make([]string, len(contents))
	for i, c := range contents {
		if c != "" { // an empty content stays empty: templates test for it
			ph[i] = marker + strconv.Itoa(i) + "Z"
		}
	}
	shape, err := render(ph)
	if err != nil {
		return whole, nil, nil
	}
	placed = make([]bool, len(contents))
	spans, ok = align(text, shape, marker, contents, placed)
	if !ok {
		return whole, nil, nil
	}
	return spans, placed, nil
}

// newMarker returns a placeholder prefix found neither in text nor in any
// content: ASCII letters and digits, which templates, JSON and C strings
// carry unchanged.
func newMarker(text string, contents []string) (string, bool) {
	for range 4 {
		var b [8]byte
		rand.Read(b[:])
		m := "LLSPAN" + hex.EncodeToString(b[:]) + "N"
		clash := strings.Contains(text, m)
		for _, c := range contents {
			clash = clash || strings.Contains(c, m)
		}
		if !clash {
			return m, true
		}
	}
	return "", false
}

// align matches text with shape, the same rendering with placeholders:
// shape is template text and placeholders in turn, and text must be the
// same template text with a form of each content in place of its
// placeholder.
func align(text, shape, marker string, contents []string, placed []bool) ([]Span, bool) {
	var spans []Span
	pos := 0
	rest := shape
	// literal is the template text before the next placeholder (all of
	// rest when none is left); idx is that placeholder's content, or -1.
	next := func() (literal string, idx int, ok bool) {
		i := strings.Index(rest, marker)
		if i < 0 {
			literal, rest = rest, ""
			return literal, -1, true
		}
		literal = rest[:i]
		r := rest[i+len(marker):]
		j := strings.IndexByte(r, 'Z')
		if j <= 0 {
			return "", 0, false
		}
		n, err := strconv.Atoi(r[:j])
		if err != nil || n < 0 || n >= len(contents) || contents[n] == "" {
			return "", 0, false
		}
		rest = r[j+1:]
		return literal, n, true
	}
	literal, idx, ok := next()
	for {
		if !ok || !strings.HasPrefix(text[pos:], literal) {
			return nil, false
		}
		if literal != "" {
			spans = append(spans, Span{Text: literal, Special: true})
			pos += len(literal)
		}
		if idx < 0 {
			return spans, pos == len(text)
		}
		// The content as the template wrote it is the form after which
		// the next template text follows.
		nextLit, nextIdx, nextOK := next()
		matched := false
		for _, form := range forms(contents[idx]) {
			if strings.HasPrefix(text[pos:], form) && nextOK && strings.HasPrefix(text[pos+len(form):], nextLit) &&
				(nextIdx >= 0 || pos+len(form)+len(nextLit) == len(text)) {
				if form != "" {
					spans = append(spans, Span{Text: form})
				}
				placed[idx] = true
				pos += len(form)
				matched = true
				break
			}
		}
		if !matched {
			return nil, false
		}
		literal, idx, ok = nextLit, nextIdx, nextOK
	}
}

// forms are the ways templates write a content: as it is, or trimmed by
// Python's strip, Jinja's trim or C's isspace.
func forms(c string) []string {
	out := []string{c}
	add := func(f string) {
		for _, o := range out {
			if o == f {
				return
			}
		}
		out = append(out, f)
	}
	add(strings.TrimSpace(c))
	add(strings.TrimLeftFunc(c, unicode.IsSpace))
	add(strings.TrimRightFunc(c, unicode.IsSpace))
	ascii := func(r rune) bool { return r < 128 && isSpace(byte(r)) }
	add(strings.TrimFunc(c, ascii))
	add(strings.TrimLeftFunc(c, ascii))
	add(strings.TrimRightFunc(c, ascii))
	return out
}

// ContentError is a content holding the text of a control token that Split
// could not place in the chat's text (the template changes contents beyond
// what it follows, or writes this one otherwise): it cannot be kept as
// text, so it is refused rather than read as the token.
type ContentError struct {
	Index int    // in the contents
	Token string // the control token's text
}

// Error says which content holds which token's text.
func (e *ContentError) Error() string {
	return fmt.Sprintf("message %d holds the text of the control token %q, which the chat template writes so that it cannot stay text (remove it, or ask for special-token parsing)", e.Index, e.Token)
}
