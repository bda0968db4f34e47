package chat

import "strings"

// content reads the answer's content, up to a call's marker (or, at its
// start, a bare JSON call); spaces before a marker are dropped.
func (r *Reader) content(end bool) bool {
	r.skipSpaces()
	if r.tools == nil {
		r.emit(r.text(r.base, r.end()), false)
		r.discard(r.end())
		r.pos = r.base
		return false
	}
	if !r.started {
		r.pos = r.spaceEnd(r.pos)
		if r.pos == r.end() {
			if end {
				r.emit(r.text(r.base, r.end()), false)
				r.discard(r.end())
				r.pos = r.base
			}
			return false
		}
		rest := r.rest(r.pos)
		for _, m := range r.markers {
			if isPrefix(rest, m) && !end {
				return false
			}
		}
		switch {
		case r.markerAt(r.pos) != "":
		case rest[0] == '{' || rest[0] == '[':
			r.enterBlock(r.base, "", false)
			return true
		case hasPrefix(rest, markFence):
			r.mode, r.blk.region = modeFence, r.base
			r.pos += len(markFence)
			return true
		case isPrefix(rest, markFence) && !end:
			return false
		}
		r.started = true
	}
	from, i, safe := r.findMarker(r.markers, end)
	if i >= 0 {
		// The spaces before the marker are held with it: dropped if it
		// opens a call, content if not.
		q := r.base + len(strings.TrimRight(r.text(r.base, i), " \t\r\n"))
		r.emit(r.text(r.base, q), false)
		r.discard(q)
		r.started = true
		m := r.markerAt(i)
		r.pos = i + len(m)
		switch m {
		case markHermes:
			r.enterBlock(q, markHermesEnd, true)
		case markPython:
			r.enterBlock(q, "", false)
		case markMistral:
			r.mode, r.blk.region, r.xml.start = modeMistralName, q, -1
		}
		return true
	}
	if end {
		r.emit(r.text(r.base, r.end()), false)
		r.discard(r.end())
		r.pos = r.base
		return false
	}
	r.giveHeld(from, safe, false)
	return false
}

// markerAt is the marker at offset i.
func (r *Reader) markerAt(i int) string {
	rest := r.rest(i)
	for _, m := range r.markers {
		if hasPrefix(rest, m) {
			return m
		}
	}
	return ""
}

// fence reads a Markdown code fence's language and opens the calls it
// may hold.
func (r *Reader) fence(end bool) bool {
	const maxLang = 32
	for r.pos < r.end() && r.pos-r.blk.region < maxLang {
		c := r.at(r.pos)
		r.work++
		switch {
		case c == '\n':
			r.pos++
			region := r.blk.region
			r.enterBlock(region, markFence, false)
			return true
		case c == '{' || c == '[' || c == '`':
			r.notCall(r.pos)
			return true
		}
		r.pos++
	}
	if end || r.pos-r.blk.region >= maxLang {
		r.notCall(r.pos)
		return true
	}
	return false
}

// notCall gives out the text held since the block's region as content:
// it is not a call; the content goes on from offset at, with no bare
// JSON calls.
func (r *Reader) notCall(at int) {
	b := &r.blk
	if b.region >= 0 && at > b.region {
		r.emit(r.text(b.region, at), false)
	}
	r.toContent(at, false)
}

// toContent ends a block: the content goes on from offset at, with its
// spaces dropped after a call.
func (r *Reader) toContent(at int, afterCall bool) {
	r.blk.stream = -1
	r.discard(at)
	r.pos = at
	r.mode, r.started, r.skipSpace = modeContent, true, afterCall
}
