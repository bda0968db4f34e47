package chat

// scanner reads JSON a byte at a time, keeping its state between calls,
// so a value that arrives in pieces is read once: the reader's cost is
// linear in the answer. It reports where values, keys and containers
// begin and end; it checks the syntax but keeps no text.
type scanner struct {
	stack []byte // the open containers, '{' or '['
	state scanState
	key   bool   // the string being read is an object's key
	lit   string // the rest of the literal being read (true, false, null)
	hex   int    // the hex digits of a \u escape still to come
	num   numState
}

type scanState uint8

const (
	stValue        scanState = iota // a value begins
	stValueOrClose                  // after '[': a value or ']'
	stKeyOrClose                    // after '{': a key or '}'
	stKey                           // after ',' in an object: a key
	stColon                         // after a key
	stAfter                         // after a value: ',', a close, or the end
	stString
	stEscape
	stNumber
	stLiteral
	stError
)

// numState is where a number is in its grammar.
type numState uint8

const (
	numMinus   numState = iota // after '-'
	numZero                    // after a leading 0
	numInt                     // in the integer digits
	numDot                     // after '.'
	numFrac                    // in the fraction digits
	numExp                     // after 'e'
	numExpSign                 // after the exponent's sign
	numExpInt                  // in the exponent's digits
)

// event is what a byte did.
type event uint8

const (
	evNone event = iota
	// evStart: the byte begins a value, at depth (the containers around
	// it, before it opens one).
	evStart
	// evEnd: the value at depth ended with this byte; for a number, just
	// before it (step then asks for the byte again).
	evEnd
	evKeyStart
	evKeyEnd
	evError
)

// depth is the number of open containers.
func (s *scanner) depth() int { return len(s.stack) }

// done reports whether a whole top-level value has been read.
func (s *scanner) done() bool { return s.state == stAfter && len(s.stack) == 0 }

// reset readies s for a new top-level value.
func (s *scanner) reset() {
	s.stack = s.stack[:0]
	s.state = stValue
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// step reads c. again: the byte ended a number and must be read again.
func (s *scanner) step(c byte) (ev event, again bool) {
	switch s.state {
	case stValue, stValueOrClose:
		if isSpace(c) {
			return evNone, false
		}
		if c == ']' && s.state == stValueOrClose {
			return s.close(c), false
		}
		return s.begin(c), false
	case stKeyOrClose, stKey:
		switch {
		case isSpace(c):
			return evNone, false
		case c == '"':
			s.state, s.key = stString, true
			return evKeyStart, false
		case c == '}' && s.state == stKeyOrClose:
			return s.close(c), false
		}
	case stColon:
		switch {
		case isSpace(c):
			return evNone, false
		case c == ':':
			s.state = stValue
			return evNone, false
		}
	case stAfter:
		switch {
		case isSpace(c):
			return evNone, false
		case len(s.stack) == 0:
			// The top-level value is whole: the byte is not JSON's.
		case c == ',':
			if s.stack[len(s.stack)-1] == '{' {
				s.state = stKey
			} else {
				s.state = stValue
			}
			return evNone, false
		case c == '}' || c == ']':
			return s.close(c), false
		}
	case stString:
		switch {
		case c == '"':
			if s.key {
				s.state, s.key = stColon, false
				return evKeyEnd, false
			}
			s.state = stAfter
			return evEnd, false
		case c == '\\':
			s.state = stEscape
			return evNone, false
		case c >= 0x20:
			return evNone, false
		}
	case stEscape:
		if s.hex > 0 {
			if isHex(c) {
				if s.hex--; s.hex == 0 {
					s.state = stString
				}
				return evNone, false
			}
			break
		}
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			s.state = stString
			return evNone, false
		case 'u':
			s.hex = 4
			return evNone, false
		}
	case stNumber:
		if s.number(c) {
			return evNone, false
		}
		switch s.num {
		case numZero, numInt, numFrac, numExpInt:
			s.state = stAfter
			return evEnd, true
		}
	case stLiteral:
		if c == s.lit[0] {
			if s.lit = s.lit[1:]; s.lit == "" {
				s.state = stAfter
				return evEnd, false
			}
			return evNone, false
		}
	}
	s.state = stError
	return evError, false
}

// begin reads the first byte of a value.
func (s *scanner) begin(c byte) event {
	switch {
	case c == '{':
		s.stack = append(s.stack, c)
		s.state = stKeyOrClose
	case c == '[':
		s.stack = append(s.stack, c)
		s.state = stValueOrClose
	case c == '"':
		s.state, s.key = stString, false
	case c == '-':
		s.state, s.num = stNumber, numMinus
	case c == '0':
		s.state, s.num = stNumber, numZero
	case c >= '1' && c <= '9':
		s.state, s.num = stNumber, numInt
	case c == 't':
		s.state, s.lit = stLiteral, "rue"
	case c == 'f':
		s.state, s.lit = stLiteral, "alse"
	case c == 'n':
		s.state, s.lit = stLiteral, "ull"
	default:
		s.state = stError
		return evError
	}
	return evStart
}

// close reads '}' or ']'.
func (s *scanner) close(c byte) event {
	open := s.stack[len(s.stack)-1]
	if open == '{' && c != '}' || open == '[' && c != ']' {
		s.state = stError
		return evError
	}
	s.stack = s.stack[:len(s.stack)-1]
	s.state = stAfter
	return evEnd
}

// number reads c in a number; false when c does not continue it.
func (s *scanner) number(c byte) bool {
	digit := c >= '0' && c <= '9'
	switch s.num {
	case numMinus:
		switch {
		case c == '0':
			s.num = numZero
		case digit:
			s.num = numInt
		default:
			return false
		}
	case numZero, numInt:
		switch {
		case digit && s.num == numInt:
		case c == '.':
			s.num = numDot
		case c == 'e' || c == 'E':
			s.num = numExp
		default:
			return false
		}
	case numDot, numFrac:
		switch {
		case digit:
			s.num = numFrac
		case (c == 'e' || c == 'E') && s.num == numFrac:
			s.num = numExp
		default:
			return false
		}
	case numExp:
		switch {
		case c == '+' || c == '-':
			s.num = numExpSign
		case digit:
			s.num = numExpInt
		default:
			return false
		}
	case numExpSign, numExpInt:
		if !digit {
			return false
		}
		s.num = numExpInt
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
