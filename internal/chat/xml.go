package chat

import (
	"bytes"
	"encoding/json"
	"strings"
)

// xmlCall is the state of a call in an XML form inside <tool_call>: Qwen 3
// Coder's (and 3.5's)
//
//	<function=NAME>
//	<parameter=KEY>
//	VALUE
//	</parameter>
//	</function>
//
// or GLM's
//
//	NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>
//
// A value is JSON where it reads as JSON and its parameter is not a
// string, else text. Each parameter goes out when it closes.
type xmlCall struct {
	form   *xmlForm
	state  xmlState
	start  int // offset of the name, key or value being read
	search int // where to look for the value's end next
	call   int // the call (-1 when OneCall drops it)
	key    string
	params int               // parameters given out
	types  map[string]string // the parameters' JSON Schema types
}

// xmlForm is the markup of an XML form.
type xmlForm struct {
	nameEnd   byte   // the byte after the function's name (read with it when '>')
	open      string // opens a parameter, before its key
	keyEnd    string // after the key
	valueOpen string // after keyEnd and spaces, before the value ("": none)
	valueEnd  string // after the value
	callEnd   string // after the last parameter
	trimLines bool   // a value's first and last newline are markup
	inBlock   bool   // </tool_call> follows callEnd
}

var (
	qwenXML = xmlForm{nameEnd: '>', open: markParam, keyEnd: ">", valueEnd: markParamEnd,
		callEnd: markFunctionEnd, trimLines: true, inBlock: true}
	glmXML = xmlForm{nameEnd: '<', open: "<arg_key>", keyEnd: "</arg_key>", valueOpen: "<arg_value>",
		valueEnd: "</arg_value>", callEnd: markHermesEnd}
)

type xmlState uint8

const (
	xmlName      xmlState = iota // the function's name
	xmlBody                      // between parameters
	xmlKey                       // a parameter's key
	xmlValueOpen                 // after its key, before its value
	xmlValue                     // its value
)

// maxXMLName bounds a function's or parameter's name.
const maxXMLName = 128

func (r *Reader) enterXML(form *xmlForm) {
	r.mode = modeXML
	r.xml = xmlCall{form: form, state: xmlName, start: r.pos, call: -1}
}

// isNameStart reports whether c may begin a function's name.
func isNameStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// xmlStep reads the XML call.
func (r *Reader) xmlStep(end bool) bool {
	x := &r.xml
	f := x.form
	switch x.state {
	case xmlName, xmlKey:
		stop := f.nameEnd
		if x.state == xmlKey {
			stop = f.keyEnd[0]
		}
		i := r.findByte(stop, x.start, maxXMLName)
		if i == -2 || i == -1 && end {
			r.xmlBroken(x.state == xmlName)
			return true
		}
		if i < 0 {
			return false
		}
		name := strings.TrimSpace(r.text(x.start, i))
		if x.state == xmlKey {
			rest := r.rest(i)
			switch {
			case hasPrefix(rest, f.keyEnd):
			case !end && isPrefix(rest, f.keyEnd):
				return false
			default:
				r.xmlBroken(false)
				return true
			}
			r.pos = i + len(f.keyEnd)
			x.key, x.state = name, xmlValueOpen
			return true
		}
		if stop == '>' {
			r.pos = i + 1
		}
		t := r.tools[name]
		if t == nil {
			r.notCall(r.pos)
			return true
		}
		x.call = r.startCall(name)
		r.blk.region = -1
		x.types = paramTypes(t.Parameters)
		x.state = xmlBody
		r.discard(r.pos)
		return true
	case xmlBody:
		r.pos = r.spaceEnd(r.pos)
		rest := r.rest(r.pos)
		switch {
		case hasPrefix(rest, f.open):
			r.pos += len(f.open)
			x.state, x.start = xmlKey, r.pos
			return true
		case hasPrefix(rest, f.callEnd):
			if x.params == 0 {
				r.xmlArgs("{}")
			} else {
				r.xmlArgs("}")
			}
			if x.call >= 0 {
				r.calls[x.call].done = true
			}
			r.pos += len(f.callEnd)
			r.discard(r.pos)
			if f.inBlock {
				r.mode = modeAfterXML
			} else {
				r.toContent(r.pos, true)
			}
			return true
		case !end && (isPrefix(rest, f.open) || isPrefix(rest, f.callEnd)):
			return false
		}
		r.xmlBroken(false)
		return true
	case xmlValueOpen:
		if f.valueOpen != "" {
			r.pos = r.spaceEnd(r.pos)
			rest := r.rest(r.pos)
			switch {
			case hasPrefix(rest, f.valueOpen):
				r.pos += len(f.valueOpen)
			case !end && isPrefix(rest, f.valueOpen):
				return false
			default:
				r.xmlBroken(false)
				return true
			}
		}
		x.state, x.start, x.search = xmlValue, r.pos, r.pos
		return true
	case xmlValue:
		rest := r.rest(x.search)
		r.work += len(rest)
		i := bytes.Index(rest, []byte(f.valueEnd))
		if i >= 0 && x.search+i-x.start > r.opt.MaxHeld || i < 0 && r.end()-x.start >= r.opt.MaxHeld+len(f.valueEnd) {
			// Longer than MaxHeld (whether its end is known or not):
			// not read, the call is partial.
			r.toContent(x.start, false)
			return true
		}
		if i >= 0 {
			v := r.text(x.start, x.search+i)
			if f.trimLines {
				v = strings.TrimPrefix(v, "\n")
				v = strings.TrimSuffix(v, "\n")
			}
			r.xmlParam(x.key, v)
			r.pos = x.search + i + len(f.valueEnd)
			r.discard(r.pos)
			x.state = xmlBody
			return true
		}
		x.search = max(x.start, r.end()-len(f.valueEnd)+1)
		r.pos = r.end()
		if end {
			r.toContent(r.end(), false) // cut in the value: the call is partial
			return true
		}
		return false
	}
	return false
}

// xmlBroken ends an XML call whose markup breaks at pos: before its name
// is known, its text is content; after, the call is partial and the
// content goes on from pos.
func (r *Reader) xmlBroken(beforeName bool) {
	if beforeName {
		r.notCall(r.pos)
	} else {
		r.toContent(r.pos, false)
	}
}

// xmlParam gives out parameter key with value v.
func (r *Reader) xmlParam(key, v string) {
	x := &r.xml
	var val []byte
	if t := x.types[key]; t != "string" && json.Valid([]byte(v)) {
		var c bytes.Buffer
		json.Compact(&c, []byte(v))
		val = c.Bytes()
	} else {
		val, _ = json.Marshal(v)
	}
	k, _ := json.Marshal(key)
	sep := ","
	if x.params == 0 {
		sep = "{"
	}
	x.params++
	r.xmlArgs(sep + string(k) + ":" + string(val))
}

// xmlArgs gives out a piece of the XML call's arguments.
func (r *Reader) xmlArgs(s string) {
	if r.xml.call >= 0 {
		r.emitCall(r.xml.call, false, s)
	}
}

// afterXML reads the spaces and </tool_call> after </function>.
func (r *Reader) afterXML(end bool) bool {
	r.pos = r.spaceEnd(r.pos)
	rest := r.rest(r.pos)
	switch {
	case hasPrefix(rest, markHermesEnd):
		r.toContent(r.pos+len(markHermesEnd), true)
	case !end && isPrefix(rest, markHermesEnd):
		return false
	default:
		r.toContent(r.pos, true)
	}
	return true
}

// findByte is the offset of the first c from pos (which it moves along),
// -1 when it is not there yet, -2 when it is not within limit bytes of
// from.
func (r *Reader) findByte(c byte, from, limit int) int {
	for r.pos < r.end() {
		r.work++
		if r.at(r.pos) == c {
			return r.pos
		}
		if r.pos-from >= limit {
			return -2
		}
		r.pos++
	}
	return -1
}

// paramTypes reads the type of each property of a JSON Schema.
func paramTypes(schema json.RawMessage) map[string]string {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	out := make(map[string]string, len(s.Properties))
	for k, p := range s.Properties {
		if t, ok := p.Type.(string); ok {
			out[k] = t
		}
	}
	return out
}

// mistralName reads what follows [TOOL_CALLS]: JSON calls, or NAME[ARGS]
// and the arguments.
func (r *Reader) mistralName(end bool) bool {
	b := &r.blk
	if r.xml.start < 0 {
		r.pos = r.spaceEnd(r.pos)
		if r.pos == r.end() {
			if end {
				r.notCall(r.pos)
				return true
			}
			return false
		}
		if c := r.at(r.pos); c == '{' || c == '[' {
			r.enterBlock(b.region, "", false)
			return true
		}
		r.xml.start = r.pos
	}
	for r.pos < r.end() {
		c := r.at(r.pos)
		r.work++
		if c == '_' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			if r.pos-r.xml.start >= 64 {
				r.notCall(r.pos)
				return true
			}
			r.pos++
			continue
		}
		rest := r.rest(r.pos)
		switch {
		case hasPrefix(rest, markArgs):
			name := r.text(r.xml.start, r.pos)
			if r.tools[name] == nil {
				r.notCall(r.pos)
				return true
			}
			region := b.region
			r.pos += len(markArgs)
			r.enterBlock(region, "", false)
			b.one, b.pending = true, name
			return true
		case !end && isPrefix(rest, markArgs):
			return false
		}
		r.notCall(r.pos)
		return true
	}
	if end {
		r.notCall(r.pos)
		return true
	}
	return false
}
