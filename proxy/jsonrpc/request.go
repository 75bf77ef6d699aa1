package jsonrpc

import (
	"bytes"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Request is one parsed JSON-RPC request. ID and Params are the raw JSON bytes exactly as the
// client sent them (ids are echoed byte for byte); they alias the body they were parsed from,
// so they live only as long as that body: copy before keeping them past the handler.
type Request struct {
	ID     []byte // raw JSON id; nil for a notification (no id member)
	Method string
	Params []byte // raw JSON array, or nil when absent or null

	// Invalid is set when this element of a batch is not a valid request. It is answered with
	// this error and never served.
	Invalid *Error
}

// Notification reports whether r carries no id and so gets no response.
func (r *Request) Notification() bool { return r.ID == nil }

// Message is a parsed request body: one request or a batch.
type Message struct {
	Batch    bool
	Requests []Request

	one [1]Request // the storage of a single request, so that parsing one allocates nothing
}

// Parse parses and validates a request body. An error answers the whole body (a parse error,
// a body that is neither object nor array, an empty or oversize batch, or a single invalid
// request); an invalid element of a batch is marked Invalid instead. Parse never panics on
// any input.
func Parse(body []byte, maxBatch int) (Message, *Error) {
	var m Message
	err := ParseInto(&m, body, maxBatch)
	return m, err
}

// ParseInto is Parse into m, in one pass over body: validation (RFC 8259, any depth, without
// recursion) and the extraction of each request's members together. A single request is
// stored in m itself: m.Requests may point into m.
func ParseInto(m *Message, body []byte, maxBatch int) *Error {
	*m = Message{}
	p := scanner{b: body}
	p.ws()
	switch p.peek() {
	case '{':
		r := p.request()
		if !p.end() {
			return ErrParse
		}
		m.one[0] = r
		m.Requests = m.one[:]
		return r.Invalid
	case '[':
		m.Batch = true
		reqs, n := p.batch(maxBatch)
		if !p.end() {
			m.Batch = false
			return ErrParse
		}
		switch {
		case n == 0:
			return ErrInvalidRequest.With("empty batch")
		case n > maxBatch:
			return ErrInvalidRequest.Withf("batch exceeds the limit of %d requests", maxBatch)
		}
		m.Requests = reqs
		return nil
	default:
		if !p.value() || !p.end() {
			return ErrParse
		}
		return ErrInvalidRequest.With("request must be an object or an array")
	}
}

var null = []byte("null")

// MaxIDBytes is the longest id accepted, in bytes of its JSON text (quotes and escapes
// included): every answer echoes the id, and a longer one would make the answer as large as
// the request (even the 401 of a request without credentials). A longer id is an invalid
// request, answered with id null.
const MaxIDBytes = 128

// scanner validates JSON and extracts requests in one pass. Any syntax error sets bad; the
// caller then answers ErrParse whatever else was extracted.
type scanner struct {
	b   []byte
	i   int
	bad bool
}

// end reports whether the whole body was one well-formed value followed by whitespace.
func (p *scanner) end() bool {
	p.ws()
	return !p.bad && p.i == len(p.b)
}

func (p *scanner) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *scanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// batch reads an array of requests and returns them with their count; past maxBatch it
// goes on validating but keeps nothing.
func (p *scanner) batch(maxBatch int) ([]Request, int) {
	p.i++ // '['
	p.ws()
	if p.peek() == ']' {
		p.i++
		return nil, 0
	}
	var reqs []Request
	n := 0
	for {
		p.ws()
		n++
		var r Request
		if p.peek() == '{' {
			r = p.request()
		} else {
			p.value()
			r = Request{ID: null, Invalid: ErrInvalidRequest.With("batch element must be an object")}
		}
		if p.bad {
			return nil, n
		}
		if n <= maxBatch {
			if reqs == nil {
				reqs = make([]Request, 0, min(maxBatch, 16))
			}
			reqs = append(reqs, r)
		} else {
			reqs = nil
		}
		more, ok := p.more(']')
		if !ok {
			return nil, n
		}
		if !more {
			return reqs, n
		}
	}
}

// request reads one request object, validating every member, and checks it as a request.
// On failure the returned request has Invalid set and an ID of the request's id when that
// was valid (and not over MaxIDBytes), else null. Of a member given twice, the last counts.
func (p *scanner) request() Request {
	var (
		r                     Request
		version, method       []byte // raw string tokens
		params                []byte // raw value
		hasVersion, hasMethod bool
		idErr                 bool
	)
	p.i++ // '{'
	p.ws()
	if p.peek() == '}' {
		p.i++
	} else {
		for {
			key, raw, ok := p.field()
			if !ok {
				return Request{}
			}
			switch key {
			case "jsonrpc":
				version, hasVersion = raw, true
			case "id":
				switch raw[0] {
				case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
					r.ID, idErr = raw, false
				default:
					r.ID, idErr = nil, true
				}
			case "method":
				method, hasMethod = raw, true
			case "params":
				params = raw
			}
			more, ok := p.more('}')
			if !ok {
				return Request{}
			}
			if !more {
				break
			}
		}
	}
	invalid := func(e *Error) Request {
		if idErr || r.ID == nil {
			r.ID = null
		}
		r.Invalid = e
		return r
	}
	if idErr {
		return invalid(ErrInvalidRequest.With("id must be a string, a number or null"))
	}
	if len(r.ID) > MaxIDBytes {
		r.ID = nil
		return invalid(errIDTooLong)
	}
	if !hasVersion || version[0] != '"' || stringValue(version, hasEscape(version)) != "2.0" {
		return invalid(ErrInvalidRequest.With(`jsonrpc must be "2.0"`))
	}
	if !hasMethod || method[0] != '"' {
		return invalid(ErrInvalidRequest.With("method must be a string"))
	}
	r.Method = stringValue(method, hasEscape(method))
	if r.Method == "" {
		return invalid(ErrInvalidRequest.With("method must not be empty"))
	}
	switch {
	case params == nil, params[0] == 'n':
	case params[0] == '[':
		r.Params = params
	case params[0] == '{':
		return invalid(ErrInvalidParams.With("params must be an array"))
	default:
		return invalid(ErrInvalidRequest.With("params must be an array"))
	}
	return r
}

var errIDTooLong = ErrInvalidRequest.Withf("id too long: its JSON text exceeds %d bytes", MaxIDBytes)

// field reads an object member: its name (unescaped), a colon and its value, returned raw.
func (p *scanner) field() (key string, raw []byte, ok bool) {
	p.ws()
	tok, escaped, ok := p.str()
	if !ok {
		return "", nil, false
	}
	p.ws()
	if p.peek() != ':' {
		p.bad = true
		return "", nil, false
	}
	p.i++
	p.ws()
	start := p.i
	if !p.value() {
		return "", nil, false
	}
	return stringValue(tok, escaped), p.b[start:p.i], true
}

// more reads what follows a member or an element: ',' (more follows) or the container's end.
func (p *scanner) more(end byte) (more, ok bool) {
	p.ws()
	switch p.peek() {
	case ',':
		p.i++
		return true, true
	case end:
		p.i++
		return false, true
	}
	p.bad = true
	return false, false
}

// stringValue is the value of a string token (quotes included): an alias of its bytes, or,
// when it holds an escape, its unescaped copy (gjson's unescaping, for the rare case).
func stringValue(tok []byte, escaped bool) string {
	if escaped {
		return gjson.Parse(bytesToString(tok)).Str
	}
	return bytesToString(tok[1 : len(tok)-1])
}

// hasEscape reports whether a string token (valid) holds an escape.
func hasEscape(tok []byte) bool { return bytes.IndexByte(tok, '\\') >= 0 }

// str reads a string token and returns it with its quotes, and whether it holds an escape.
func (p *scanner) str() (tok []byte, escaped, ok bool) {
	start := p.i
	if p.peek() != '"' {
		p.bad = true
		return nil, false, false
	}
	b := p.b
	i := p.i + 1
	for i < len(b) {
		c := b[i]
		if plainChar[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			p.i = i + 1
			return b[start:p.i], escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				p.bad = true
				return nil, false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					p.bad = true
					return nil, false, false
				}
				i += 6
			default:
				p.bad = true
				return nil, false, false
			}
		default: // a control character
			p.bad = true
			return nil, false, false
		}
	}
	p.bad = true
	return nil, false, false
}

// plainChar marks the bytes a string holds as they are: not '"', '\\' or a control character.
var plainChar = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number reads a number token: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *scanner) number() bool {
	if p.peek() == '-' {
		p.i++
	}
	switch c := p.peek(); {
	case c == '0':
		p.i++
	case c >= '1' && c <= '9':
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			p.i++
		}
	default:
		return false
	}
	if p.peek() == '.' {
		p.i++
		if !isDigit(p.peek()) {
			return false
		}
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			p.i++
		}
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.i++
		if c := p.peek(); c == '+' || c == '-' {
			p.i++
		}
		if !isDigit(p.peek()) {
			return false
		}
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			p.i++
		}
	}
	return true
}

// literal reads want (true, false or null) at the current position.
func (p *scanner) literal(want string) bool {
	if len(p.b)-p.i < len(want) || bytesToString(p.b[p.i:p.i+len(want)]) != want {
		return false
	}
	p.i += len(want)
	return true
}

// value reads one JSON value of any depth. Nesting is tracked on an explicit stack of the
// closing brackets still expected, so no input can exhaust the goroutine stack.
func (p *scanner) value() bool {
	var inline [32]byte
	open := inline[:0] // the closing bracket of each container entered
	for {
		// A value starts here.
		p.ws()
		switch c := p.peek(); c {
		case '{', '[':
			p.i++
			p.ws()
			end := byte('}')
			if c == '[' {
				end = ']'
			}
			if p.peek() == end {
				p.i++
				break // an empty container is a complete value
			}
			open = append(open, end)
			if end == '}' && !p.member() {
				return false
			}
			continue // the first value of the container just opened
		case '"':
			if _, _, ok := p.str(); !ok {
				return false
			}
		case 't', 'f', 'n':
			lit := "true"
			if c == 'f' {
				lit = "false"
			} else if c == 'n' {
				lit = "null"
			}
			if !p.literal(lit) {
				p.bad = true
				return false
			}
		default:
			if !p.number() {
				p.bad = true
				return false
			}
		}
		// After a complete value: close containers until one continues with ','.
		for {
			if len(open) == 0 {
				return true
			}
			p.ws()
			c := p.peek()
			end := open[len(open)-1]
			if c == ',' {
				p.i++
				if end == '}' && !p.member() {
					return false
				}
				break
			}
			if c != end {
				p.bad = true
				return false
			}
			p.i++
			open = open[:len(open)-1]
		}
	}
}

// member reads an object member's name and colon; its value follows.
func (p *scanner) member() bool {
	p.ws()
	if _, _, ok := p.str(); !ok {
		return false
	}
	p.ws()
	if p.peek() != ':' {
		p.bad = true
		return false
	}
	p.i++
	return true
}

// bytesToString aliases without copying. The parsed strings point into the request body,
// which outlives the parse and is not modified while a request is served.
func bytesToString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
