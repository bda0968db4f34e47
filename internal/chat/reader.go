// Package chat reads what a chat model writes: the text of a choice, as it
// comes, into content, reasoning and tool calls. It knows no HTTP and no
// API's types: the server's formatters (chat completions, Responses,
// Messages, Ollama) turn its deltas into their own.
//
// A Reader is given the text piece by piece (Add) and ended (End); a whole
// reply is the same reader given the whole text at once, so a streamed
// reply and a whole one are equal by construction. It keeps its state
// between pieces and never reads the answer again from its start: its
// cost is linear in the text (a byte is read about once, a marker's bytes
// a few times at most), and it sends each byte of a call's arguments once.
//
// Beside the reader are the chat's history (Message), as templates read
// it (TemplateMessages, Polyfill), and the model's Jinja chat template
// (Template), whose source tells the reader the answer's Format.
package chat

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
)

// Delta is a piece of a choice's answer: exactly one of its fields is set.
type Delta struct {
	// Content is text of the answer.
	Content string
	// Reasoning is text of the model's reasoning (between the template's
	// reasoning markers, which it does not include).
	Reasoning string
	// Call is a piece of a tool call.
	Call *CallDelta
}

// CallDelta is a piece of tool call Index (0, 1, ... in the order the
// model writes them): its first delta has its ID and Name, and each delta
// a fragment of its arguments; the fragments join into Call.Arguments.
type CallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// Call is a tool call the model made.
type Call struct {
	ID   string
	Name string
	// Arguments is the arguments object's text as the model wrote it
	// (compact JSON for the XML form); when Partial, the part the model
	// wrote before the answer ended or broke the call's syntax, which is
	// not a whole JSON value.
	Arguments json.RawMessage
	// Partial reports that the arguments do not close: the answer was cut
	// in the call (by its length or a stop string) or broke its syntax.
	Partial bool
}

// Tool is a function the model may call.
type Tool struct {
	Name string
	// Parameters is the function's JSON Schema (may be nil): the XML form
	// writes a parameter that is not a string as JSON.
	Parameters json.RawMessage
}

// Options are what a Reader needs of the request and the template.
type Options struct {
	// Format is the template's (FormatOf).
	Format Format
	// Tools are the functions the request offers: a call of any other is
	// not a call, and stays content. None: the reader reads no calls.
	Tools []Tool
	// OneCall keeps the first call only (OpenAI's parallel_tool_calls
	// false): later calls are read and dropped.
	OneCall bool
	// InReasoning tells that the prompt opened the reasoning
	// (Format.OpensReasoning): the answer begins in it.
	InReasoning bool
	// ReasoningInline keeps the reasoning in the content, with its
	// markers, as the model wrote it.
	ReasoningInline bool
	// NewID returns a call's ID; nil: "call_" and 24 random letters and
	// digits, as OpenAI's look.
	NewID func() string
	// MaxHeld bounds the text held back while it may still be a call (0:
	// DefaultMaxHeld): a call whose name is not known within as many bytes
	// of its start, or one parameter of the XML form longer, is not read
	// as a call.
	MaxHeld int
}

// DefaultMaxHeld is the default of Options.MaxHeld.
const DefaultMaxHeld = 1 << 20

// Reader reads one choice's answer; it is not safe for concurrent use.
// Its memory is the text it holds back and the calls' arguments, which
// End returns. It holds back a run of spaces that may come before a call,
// a part of a marker (a few bytes), and at most MaxHeld bytes of a call
// not yet known as one or of one parameter of the XML form; a call's
// arguments in JSON it gives out as they come, and holds none of them.
type Reader struct {
	opt     Options
	markers []string
	tools   map[string]*Tool

	// buf is the text not yet given out or dropped; base is the offset in
	// the answer of buf[0]. Offsets (pos, region, ...) are the answer's.
	buf  []byte
	base int
	pos  int // how far the current mode has read
	mode mode

	// started: the content phase has given content or calls, so bare
	// JSON no longer opens calls. skipSpace: spaces are dropped (after
	// the reasoning or a call).
	started, skipSpace bool

	blk   block
	xml   xmlCall
	calls []callState
	out   []Delta

	// added is the text of the Add in progress, from offset addedAt.
	added   string
	addedAt int

	// work counts the bytes the reader examines (for the linearity test).
	work int
}

// mode is what the reader is reading.
type mode uint8

const (
	modeThinkStart  mode = iota // the answer's start, where the reasoning may open
	modeThink                   // reasoning
	modeContent                 // content, where a call's marker may come
	modeFence                   // a code fence that may hold calls
	modeBlock                   // JSON calls
	modeMistralName             // [TOOL_CALLS]NAME[ARGS]
	modeXML                     // Qwen's XML call
	modeAfterXML                // after </function>, before </tool_call>
)

// callState is a call as read so far.
type callState struct {
	id, name string
	args     []byte
	done     bool // its arguments closed
}

// NewReader returns a reader of an answer under opt.
func NewReader(opt Options) *Reader {
	r := &Reader{opt: opt, mode: modeThinkStart}
	if r.opt.MaxHeld <= 0 {
		r.opt.MaxHeld = DefaultMaxHeld
	}
	if r.opt.NewID == nil {
		r.opt.NewID = newCallID
	}
	if len(opt.Tools) > 0 {
		r.tools = make(map[string]*Tool, len(opt.Tools))
		for i := range opt.Tools {
			r.tools[opt.Tools[i].Name] = &r.opt.Tools[i]
		}
		r.markers = opt.Format.Family.markers()
		if opt.Format.Family == "" {
			r.markers = JSON.markers()
		}
	}
	if opt.Format.Reasoning.Open == "" || opt.Format.Reasoning.Close == "" {
		r.mode = modeContent
	}
	return r
}

// Add reads the answer's next text and returns the deltas it completes
// (nil for none). Text that may still turn out to be a call, a marker or
// spaces before one is held back until it is known.
func (r *Reader) Add(text string) []Delta {
	r.added, r.addedAt = text, r.end()
	r.buf = append(r.buf, text...)
	r.run(false)
	r.added = ""
	return r.take()
}

// End ends the answer: it returns the deltas of the text held back and
// the calls made (nil for none); the reader reads nothing after it.
// stopped tells whether the model ended by itself rather than being cut
// by its length. What is read does not depend on it (a streamed and a
// whole reply agree however they end): a call the answer leaves open is
// Partial either way, and a reply cut by its length reports it with
// finish_reason "length", as OpenAI does.
func (r *Reader) End(stopped bool) ([]Delta, []Call) {
	r.run(true)
	var calls []Call
	for i := range r.calls {
		c := &r.calls[i]
		calls = append(calls, Call{ID: c.id, Name: c.name, Arguments: c.args, Partial: !c.done})
	}
	return r.take(), calls
}

// Read reads a whole answer: the reader run over text at once. Its content
// and reasoning are the deltas joined.
func Read(opt Options, text string, stopped bool) (content, reasoning string, calls []Call) {
	r := NewReader(opt)
	deltas := r.Add(text)
	last, calls := r.End(stopped)
	var c, re strings.Builder
	for _, d := range append(deltas, last...) {
		c.WriteString(d.Content)
		re.WriteString(d.Reasoning)
	}
	return c.String(), re.String(), calls
}

func (r *Reader) take() []Delta {
	out := r.out
	r.out = nil
	return out
}

// run reads what the modes can read; end: the answer is whole.
func (r *Reader) run(end bool) {
	for r.step(end) {
	}
	r.flushArgs(r.pos)
	if r.mode == modeBlock && r.blk.region < 0 {
		// A call holds the text read: its arguments are given out, and
		// no more of it can become content.
		r.discard(r.pos)
	}
	r.compact()
}

// step reads in the current mode; false when it needs more text (or, at
// the end, when all is read).
func (r *Reader) step(end bool) bool {
	switch r.mode {
	case modeThinkStart:
		return r.thinkStart(end)
	case modeThink:
		return r.think(end)
	case modeContent:
		return r.content(end)
	case modeFence:
		return r.fence(end)
	case modeBlock:
		return r.block(end)
	case modeMistralName:
		return r.mistralName(end)
	case modeXML:
		return r.xmlStep(end)
	case modeAfterXML:
		return r.afterXML(end)
	}
	return false
}

// The text of buf between answer offsets.
func (r *Reader) at(i int) byte { return r.buf[i-r.base] }

// text is the answer's text between offsets: a part of the text Add was
// given, when it lies in it (most tokens' text goes out whole), else a
// copy.
func (r *Reader) text(from, to int) string {
	if from >= r.addedAt && to <= r.addedAt+len(r.added) {
		return r.added[from-r.addedAt : to-r.addedAt]
	}
	return string(r.buf[from-r.base : to-r.base])
}

func (r *Reader) rest(from int) []byte { return r.buf[from-r.base:] }
func (r *Reader) end() int             { return r.base + len(r.buf) }

// discard drops the text before offset to, given out or dropped.
func (r *Reader) discard(to int) {
	if to > r.base {
		r.buf = r.buf[to-r.base:]
		r.base = to
	}
}

// compact moves what buf holds to the front of its array when most of
// the array is behind it.
func (r *Reader) compact() {
	if cap(r.buf) > 4096 && len(r.buf) < cap(r.buf)/4 {
		r.buf = append(make([]byte, 0, 2*len(r.buf)), r.buf...)
	}
}

// emit gives out text as content (reasoning false) or reasoning, joined to
// the last delta when it is of the same kind.
func (r *Reader) emit(text string, reasoning bool) {
	if text == "" {
		return
	}
	if reasoning && r.opt.ReasoningInline {
		reasoning = false
	}
	if n := len(r.out); n > 0 && r.out[n-1].Call == nil {
		last := &r.out[n-1]
		if reasoning && last.Reasoning != "" {
			last.Reasoning += text
			return
		}
		if !reasoning && last.Content != "" {
			last.Content += text
			return
		}
	}
	if reasoning {
		r.out = append(r.out, Delta{Reasoning: text})
	} else {
		r.out = append(r.out, Delta{Content: text})
	}
}

// emitCall gives out a piece of call i.
func (r *Reader) emitCall(i int, first bool, args string) {
	c := &r.calls[i]
	c.args = append(c.args, args...)
	if !first {
		if args == "" {
			return
		}
		if n := len(r.out); n > 0 && r.out[n-1].Call != nil && r.out[n-1].Call.Index == i {
			r.out[n-1].Call.Arguments += args
			return
		}
	}
	d := &CallDelta{Index: i, Arguments: args}
	if first {
		d.ID, d.Name = c.id, c.name
	}
	r.out = append(r.out, Delta{Call: d})
}

// startCall begins a call of name; its index, or -1 when OneCall drops
// it.
func (r *Reader) startCall(name string) int {
	if r.opt.OneCall && len(r.calls) > 0 {
		return -1
	}
	r.calls = append(r.calls, callState{id: r.opt.NewID(), name: name})
	i := len(r.calls) - 1
	r.emitCall(i, true, "")
	return i
}

// spaceEnd is the offset of the first byte at or after from that is not a
// space.
func (r *Reader) spaceEnd(from int) int {
	for from < r.end() && isSpace(r.at(from)) {
		from++
		r.work++
	}
	return from
}

// skipSpaces drops the spaces at pos while skipSpace holds.
func (r *Reader) skipSpaces() {
	if r.skipSpace {
		r.pos = r.spaceEnd(r.pos)
		r.discard(r.pos)
		if r.pos < r.end() {
			r.skipSpace = false
		}
	}
}

// thinkStart reads the answer's start: spaces, then the reasoning's open
// marker or not.
func (r *Reader) thinkStart(end bool) bool {
	open := r.opt.Format.Reasoning.Open
	q := r.spaceEnd(r.pos)
	r.pos = q
	rest := r.rest(q)
	switch {
	case hasPrefix(rest, open):
		if r.opt.ReasoningInline {
			r.emit(r.text(r.base, q+len(open)), false)
		}
		r.discard(q + len(open))
		r.pos = r.base
	case !end && (len(rest) == 0 || isPrefix(rest, open)):
		return false
	case r.opt.InReasoning:
		if !r.opt.ReasoningInline {
			r.discard(q)
		}
		r.pos = r.base
	default:
		r.mode, r.pos = modeContent, r.base
		return true
	}
	r.mode, r.skipSpace = modeThink, !r.opt.ReasoningInline
	return true
}

// think reads reasoning up to its close marker; the spaces around it are
// dropped.
func (r *Reader) think(end bool) bool {
	if !r.opt.ReasoningInline {
		r.skipSpaces()
	}
	close := r.opt.Format.Reasoning.Close
	from, i, safe := r.findMarker([]string{close}, end)
	if i >= 0 {
		if r.opt.ReasoningInline {
			r.emit(r.text(r.base, i+len(close)), false)
		} else {
			r.emit(strings.TrimRight(r.text(r.base, i), " \t\r\n"), true)
		}
		r.discard(i + len(close))
		r.pos = r.base
		r.mode, r.skipSpace, r.started = modeContent, !r.opt.ReasoningInline, false
		return true
	}
	if end {
		t := r.text(r.base, r.end())
		if !r.opt.ReasoningInline {
			t = strings.TrimRight(t, " \t\r\n")
		}
		r.emit(t, true)
		r.discard(r.end())
		r.pos = r.base
		return false
	}
	r.giveHeld(from, safe, true)
	return false
}

// findMarker looks for the first of markers from pos. It returns from,
// where it looked; i, the marker's offset (-1: none); and safe, the
// offset up to which no marker can begin (the rest may be part of one).
// At the end, safe is the end.
func (r *Reader) findMarker(markers []string, end bool) (from, i, safe int) {
	from = r.pos
	rest := r.rest(from)
	r.work += len(rest)
	i = -1
	for _, m := range markers {
		if j := bytes.Index(rest, []byte(m)); j >= 0 && (i < 0 || j < i) {
			i = j
		}
	}
	if i >= 0 {
		return from, from + i, from + i
	}
	if end {
		return from, -1, r.end()
	}
	h := 0
	for _, m := range markers {
		for k := min(len(m)-1, len(rest)); k > h; k-- {
			if string(rest[len(rest)-k:]) == m[:k] {
				h = k
				break
			}
		}
	}
	return from, -1, r.end() - h
}

// giveHeld gives out the text up to safe but for the spaces at its end,
// which may come before a marker; from is where findMarker looked (the
// text before it is spaces held back).
func (r *Reader) giveHeld(from, safe int, reasoning bool) {
	q := safe
	for q > from && isSpace(r.at(q-1)) {
		q--
	}
	if q > from {
		r.emit(r.text(r.base, q), reasoning)
		r.discard(q)
		if !reasoning {
			r.started = true
		}
	}
	r.pos = safe
}

func hasPrefix(b []byte, s string) bool { return len(b) >= len(s) && string(b[:len(s)]) == s }

// isPrefix reports whether b is a proper start of s.
func isPrefix(b []byte, s string) bool { return len(b) < len(s) && string(b) == s[:len(b)] }

// newCallID returns a new tool call id, as OpenAI's look.
func newCallID() string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 24)
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	return "call_" + string(b)
}
