package jsonrpc

// Reply is a JSON value of an upstream node's answer, read as a JSON-RPC response: the
// value's bytes and, when it is an object, the raw values of its id, result and error members
// (nil when absent; of a member given twice, the last counts). All alias the scanned body.
type Reply struct {
	Raw               []byte
	ID, Result, Error []byte
}

// IsObject reports whether the reply is a JSON object (a response to one request).
func (r *Reply) IsObject() bool { return len(r.Raw) > 0 && r.Raw[0] == '{' }

// IsArray reports whether the reply is a JSON array (the answer to a batch).
func (r *Reply) IsArray() bool { return len(r.Raw) > 0 && r.Raw[0] == '[' }

// ScanReply validates body as one JSON value (RFC 8259, any depth) and reads it as a Reply,
// in one pass. When the value is an array, each of its elements is appended to elems, read as
// a Reply too. ok is false when body is not valid JSON; the reply and elems then mean nothing.
func ScanReply(body []byte, elems []Reply) (r Reply, _ []Reply, ok bool) {
	p := scanner{b: body}
	p.ws()
	start := p.i
	switch p.peek() {
	case '{':
		r = p.reply()
	case '[':
		elems = p.replies(elems)
	default:
		p.value()
	}
	if !p.end() {
		return Reply{}, elems, false
	}
	if r.Raw == nil {
		r.Raw = trimSpace(body[start:])
	}
	return r, elems, true
}

// trimSpace drops the JSON whitespace that ends b.
func trimSpace(b []byte) []byte {
	for len(b) > 0 {
		switch b[len(b)-1] {
		case ' ', '\t', '\n', '\r':
			b = b[:len(b)-1]
		default:
			return b
		}
	}
	return b
}

// reply reads one object, validating every member, and keeps its id, result and error.
func (p *scanner) reply() Reply {
	var r Reply
	start := p.i
	p.i++ // '{'
	p.ws()
	if p.peek() == '}' {
		p.i++
		r.Raw = p.b[start:p.i]
		return r
	}
	for {
		key, raw, ok := p.field()
		if !ok {
			return Reply{}
		}
		switch key {
		case "id":
			r.ID = raw
		case "result":
			r.Result = raw
		case "error":
			r.Error = raw
		}
		more, ok := p.more('}')
		if !ok {
			return Reply{}
		}
		if !more {
			r.Raw = p.b[start:p.i]
			return r
		}
	}
}

// replies reads an array, appending each element to elems as a Reply.
func (p *scanner) replies(elems []Reply) []Reply {
	p.i++ // '['
	p.ws()
	if p.peek() == ']' {
		p.i++
		return elems
	}
	for {
		p.ws()
		var r Reply
		if p.peek() == '{' {
			r = p.reply()
		} else {
			start := p.i
			p.value()
			r.Raw = p.b[start:p.i]
		}
		if p.bad {
			return elems
		}
		elems = append(elems, r)
		if more, ok := p.more(']'); !more || !ok {
			return elems
		}
	}
}
