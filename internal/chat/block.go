package chat

import (
	"bytes"
	"encoding/json"
)

// block is the state of JSON calls being read: one or more JSON values
// (objects, arrays of them, {"tool_calls": [...]}), separated by spaces,
// ";" or ",", up to a closer.
type block struct {
	sc     scanner
	frames []frame // one for each container the scanner has open
	// region is the offset of the text held back since the last call
	// (it goes out as content when it is not a call); -1 while a call
	// holds it.
	region int
	closer string // the text that ends the block ("" for none)
	xml    bool   // Qwen's XML form may open it (inside <tool_call>)
	fresh  bool   // no value read yet
	// one: the block is one value, the arguments of call pending, named
	// before them (Mistral's NAME[ARGS]).
	one     bool
	pending string
	calls   int // calls begun in the current top-level value
	// stream is the call whose arguments are read now, from offset
	// streamFrom (not yet given out); -1 for none.
	stream     int
	streamFrom int
	// The scalar being read: its role and offset.
	scalar      role
	scalarStart int
}

// role is what a JSON value is to the calls.
type role uint8

const (
	roleOther    role = iota // nothing
	roleCand                 // an object that may be a call
	roleList                 // an array of calls
	roleArgs                 // a call's arguments object
	roleName                 // a call's name
	roleArgsText             // a call's arguments as a JSON string
	roleArgsNull             // null arguments
	roleNot                  // a value that makes the block no call
)

// frame is an open container.
type frame struct {
	role     role
	key      string // the key being read (objects)
	keyStart int
	// A call's candidate (roleCand): whether it wraps calls
	// ({"function": {...}} or {"tool_calls": [...]}), its name (when
	// known and a tool's), and its arguments: their offsets when read as
	// an object, their text when read as a string or null.
	wrapper            bool
	named              bool
	name               string
	argsStart, argsEnd int
	argsText           string
	hasArgs, argsWhole bool
	call               int // the call it began (-1 none, -2 dropped by OneCall)
	keys               int // the keys read
}

// callKeys are the keys a call may open with.
var callKeys = map[string]bool{"name": true, "arguments": true, "parameters": true, "function": true,
	"tool_calls": true, "type": true, "id": true}

// enterBlock begins a block at pos: region is the offset of its held
// text (its marker, or the answer's spaces), closer its end.
func (r *Reader) enterBlock(region int, closer string, xml bool) {
	b := &r.blk
	b.frames = b.frames[:0]
	b.sc.reset()
	b.region, b.closer, b.xml, b.fresh, b.one = region, closer, xml, true, false
	b.calls, b.stream = 0, -1
	r.mode = modeBlock
}

// block reads a block's JSON.
func (r *Reader) block(end bool) bool {
	b := &r.blk
	for r.pos < r.end() {
		if b.region >= 0 && r.pos-b.region > r.opt.MaxHeld {
			r.notCall(r.pos)
			return true
		}
		if b.fresh || b.sc.done() {
			rest := r.rest(r.pos)
			c := rest[0]
			switch {
			case isSpace(c) || !b.fresh && (c == ';' || c == ','):
				r.pos++
				r.work++
				continue
			case c == '{' || c == '[':
				if !b.fresh {
					b.region = r.pos
					r.discard(r.pos)
				}
				b.fresh, b.calls = false, 0
				b.sc.reset()
			case b.fresh && b.xml && hasPrefix(rest, markFunction):
				r.pos += len(markFunction)
				r.enterXML(&qwenXML)
				return true
			case b.fresh && b.xml && isNameStart(c):
				r.enterXML(&glmXML)
				return true
			case b.closer != "" && hasPrefix(rest, b.closer) && !b.fresh:
				r.toContent(r.pos+len(b.closer), true)
				return true
			case !end && (b.fresh && b.xml && isPrefix(rest, markFunction) || b.closer != "" && isPrefix(rest, b.closer)):
				return false
			case b.fresh:
				r.notCall(r.pos)
				return true
			default:
				r.toContent(r.pos, true)
				return true
			}
		}
		c := r.at(r.pos)
		d := b.sc.depth()
		ev, again := b.sc.step(c)
		r.work++
		switch ev {
		case evStart:
			r.valueStart(c, d)
		case evEnd:
			end := r.pos + 1
			if again {
				end = r.pos
			}
			r.valueEnd(b.sc.depth(), end)
		case evKeyStart:
			b.frames[len(b.frames)-1].keyStart = r.pos
		case evKeyEnd:
			// Only a candidate's keys matter, and its text is held
			// until it is a call.
			if f := &b.frames[len(b.frames)-1]; f.role == roleCand && f.keyStart >= r.base {
				f.key = jsonString(r.rest(f.keyStart)[:r.pos+1-f.keyStart])
				if f.keys++; f.keys == 1 && !callKeys[f.key] {
					// A call opens with one of its keys: an answer in
					// JSON goes out without waiting for its end.
					r.broken(r.pos + 1)
				}
			}
		case evError:
			r.broken(r.pos)
		}
		if r.mode != modeBlock {
			return true
		}
		if !again {
			r.pos++
		}
	}
	if !end {
		return false
	}
	// The answer ended in the block: a call begun stays, partial; text
	// held back is content.
	r.flushArgs(r.pos)
	if b.region >= 0 && (b.fresh || !b.sc.done()) {
		r.notCall(r.pos)
	} else {
		r.toContent(r.pos, true)
	}
	return true
}

// jsonString decodes a JSON string ("" when it is not one).
func jsonString(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	json.Unmarshal(raw, &s)
	return s
}

// parent is the container of a value at depth d (nil at the top).
func (r *Reader) parent(d int) *frame {
	if d == 0 {
		return nil
	}
	return &r.blk.frames[d-1]
}

// roleOf is the role of a value at depth d that begins with c.
func (r *Reader) roleOf(d int, c byte) role {
	b := &r.blk
	p := r.parent(d)
	switch {
	case p == nil && b.one:
		if c == '{' {
			return roleArgs
		}
		return roleNot
	case p == nil || p.role == roleList:
		switch {
		case c == '{':
			return roleCand
		case c == '[' && p == nil:
			return roleList
		}
		return roleNot
	case p.role != roleCand:
		return roleOther
	}
	// A call holds no calls, and a wrapper of calls is none.
	switch k := p.key; {
	case p.named && (k == "function" || k == "tool_calls"):
		return roleOther
	case p.wrapper && (k == "name" || k == "arguments" || k == "parameters"):
		return roleOther
	}
	switch p.key {
	case "name":
		if p.named || p.name != "" {
			return roleOther
		}
		if c == '"' {
			return roleName
		}
		return roleNot
	case "arguments", "parameters":
		if p.hasArgs {
			return roleOther
		}
		switch c {
		case '{':
			return roleArgs
		case '"':
			return roleArgsText
		case 'n':
			return roleArgsNull
		}
		return roleNot
	case "function":
		if c == '{' {
			p.wrapper = true
			return roleCand
		}
	case "tool_calls":
		if c == '[' {
			p.wrapper = true
			return roleList
		}
	}
	return roleOther
}

// valueStart begins a value at depth d with byte c (at pos).
func (r *Reader) valueStart(c byte, d int) {
	b := &r.blk
	ro := r.roleOf(d, c)
	if ro == roleNot {
		r.broken(r.pos)
		return
	}
	if c != '{' && c != '[' {
		b.scalar, b.scalarStart = ro, r.pos
		return
	}
	b.frames = append(b.frames, frame{role: ro, call: -1})
	if ro != roleArgs {
		return
	}
	if p := r.parent(d); p != nil {
		p.hasArgs, p.argsStart = true, r.pos
		if p.named {
			r.begin(p)
		}
		return
	}
	// Mistral's NAME[ARGS]{...}: the call is named.
	f := &b.frames[len(b.frames)-1]
	f.named, f.name, f.hasArgs, f.argsStart = true, b.pending, true, r.pos
	r.begin(f)
}

// valueEnd ends the value at depth d, whose text ends at offset end.
func (r *Reader) valueEnd(d, end int) {
	b := &r.blk
	if len(b.frames) > d {
		f := b.frames[d]
		b.frames = b.frames[:d]
		switch f.role {
		case roleArgs:
			r.argsEnd(r.parent(d), &f, end)
		case roleCand:
			r.candEnd(&f, end)
		}
		if r.mode != modeBlock {
			return
		}
	} else {
		p := r.parent(d)
		var raw []byte
		if b.scalar != roleOther {
			raw = r.rest(b.scalarStart)[:end-b.scalarStart] // held: no call holds the text
		}
		switch b.scalar {
		case roleName:
			p.name = jsonString(raw)
			if r.tools[p.name] == nil {
				r.broken(end)
				return
			}
			p.named = true
			if p.argsWhole {
				r.begin(p)
			}
		case roleArgsText:
			var text string
			json.Unmarshal(raw, &text)
			var obj map[string]json.RawMessage
			if json.Unmarshal([]byte(text), &obj) != nil || obj == nil {
				r.broken(end)
				return
			}
			p.hasArgs, p.argsWhole, p.argsText = true, true, string(bytes.TrimSpace([]byte(text)))
			if p.named {
				r.begin(p)
			}
		case roleArgsNull:
			p.hasArgs, p.argsWhole, p.argsText = true, true, "{}"
			if p.named {
				r.begin(p)
			}
		}
		b.scalar = roleOther
	}
	if d == 0 {
		// A top-level value is whole: a call (or calls), or not one.
		if b.calls == 0 {
			r.notCall(end)
			return
		}
		if b.one {
			r.toContent(end, true)
			return
		}
		b.region = end
		r.discard(end)
	}
}

// argsEnd ends the arguments object of candidate p (f: the arguments
// frame, or p itself for Mistral's).
func (r *Reader) argsEnd(p, f *frame, end int) {
	b := &r.blk
	if p == nil {
		p = f
	}
	p.argsEnd, p.argsWhole = end, true
	if b.stream >= 0 {
		r.flushArgs(end)
		r.calls[b.stream].done = true
		b.stream = -1
	}
	if p == f {
		b.calls++ // Mistral's call is whole with its arguments
	}
}

// candEnd ends candidate f, a call when it is named.
func (r *Reader) candEnd(f *frame, end int) {
	b := &r.blk
	switch {
	case f.named:
		if f.call == -1 {
			if !f.hasArgs {
				f.hasArgs, f.argsWhole, f.argsText = true, true, "{}"
			}
			r.begin(f)
		}
		b.calls++
	case f.wrapper:
		return
	default:
		r.broken(end)
		return
	}
	b.region = end
	r.discard(end)
}

// begin begins the call of candidate f, named: with its arguments when
// they are whole, else streaming them from their start.
func (r *Reader) begin(f *frame) {
	b := &r.blk
	if f.call != -1 {
		return
	}
	f.call = r.startCall(f.name)
	b.region = -1
	if f.call < 0 {
		f.call = -2
		return
	}
	switch {
	case f.argsText != "":
		r.emitCall(f.call, false, f.argsText)
		r.calls[f.call].done = true
	case f.argsWhole:
		r.emitCall(f.call, false, r.text(f.argsStart, f.argsEnd))
		r.calls[f.call].done = true
	default:
		b.stream, b.streamFrom = f.call, f.argsStart
	}
}

// flushArgs gives out the arguments of the call streaming, up to offset
// to.
func (r *Reader) flushArgs(to int) {
	b := &r.blk
	if r.mode != modeBlock || b.stream < 0 || to <= b.streamFrom {
		return
	}
	r.emitCall(b.stream, false, r.text(b.streamFrom, to))
	b.streamFrom = to
}

// broken ends the block at offset at, where the JSON is not a call's: a
// call streaming stays partial; text held back since the last call is
// content.
func (r *Reader) broken(at int) {
	b := &r.blk
	if b.stream >= 0 {
		r.flushArgs(at)
		r.toContent(at, false)
		return
	}
	r.notCall(at)
}
