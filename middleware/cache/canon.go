package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/tidwall/gjson"
)

// Canonical params: a cached method's params are read into their meaning and written back in
// one form, so that requests meaning the same share an entry: quantities in minimal hex
// (0x1 and 0x01), addresses, hashes and data in lowercase hex, absent optional arguments as
// their defaults (eth_call's block is "latest", eth_getLogs' range latest), eth_call's
// call object with its fields in one order and `data` as `input` (geth reads both and refuses
// them when they differ). A request the reader does not fully understand (an unknown field,
// another type, an override argument) is not cached: errCanon.
//
// The reader runs on every lookup, hits included, so it does not go through encoding/json:
// the params are validated once (gjson.ValidBytes, as strict as encoding/json's grammar) and
// then walked by the small scanner below, which relies on that validity; the canonical form
// is appended to the caller's buffer. It is byte for byte what encoding/json wrote for the
// same meaning before (arrays, objects with their keys sorted, strings), so the Redis keys
// that replicas of another version share stay the same.

var errCanon = errors.New("params not canonicalizable")

// refKind is the kind of a block reference.
type refKind uint8

const (
	refNumber    refKind = iota // a block number (earliest is 0)
	refTag                      // latest, safe or finalized: moves with the head
	refPending                  // pending: never cached
	refHash                     // a block hash: immutable
	refCanonHash                // a block hash with requireCanonical: true: holds while canonical
)

// blockRef is a block parameter as read.
type blockRef struct {
	kind refKind
	num  uint64
	tag  string // refTag: latest, safe or finalized
	hash []byte // refHash, refCanonHash: the 64 hex digits as sent (any case)
}

// appendJSON appends the canonical form of r: "0x<n>", the tag, the hash, or
// {"blockHash":…,"requireCanonical":true}.
func (r blockRef) appendJSON(b []byte) []byte {
	switch r.kind {
	case refNumber:
		b = append(b, `"0x`...)
		b = strconv.AppendUint(b, r.num, 16)
		return append(b, '"')
	case refTag:
		return appendQuoted(b, r.tag)
	case refPending:
		return append(b, `"pending"`...)
	case refHash:
		return appendHex(b, r.hash)
	default:
		b = append(b, `{"blockHash":`...)
		b = appendHex(b, r.hash)
		return append(b, `,"requireCanonical":true}`...)
	}
}

func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendHex appends "0x<digits>" with the digits lowercased.
func appendHex(b []byte, digits []byte) []byte {
	b = append(b, `"0x`...)
	for _, c := range digits {
		if 'A' <= c && c <= 'F' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return append(b, '"')
}

// maxArgs is the most params any cached method takes (eth_call's four).
const maxArgs = 4

// args are a call's params as read: n elements, null ones as nil (absent).
type args struct {
	n int
	v [maxArgs][]byte
}

// at is the i-th argument, nil when absent or null.
func (a *args) at(i int) []byte {
	if i < a.n {
		return a.v[i]
	}
	return nil
}

// readArgs reads params as a JSON array (absent or null: none) of at most max elements;
// null elements are read as nil (absent). Params that are not valid JSON are errCanon.
func readArgs(params []byte, max int, a *args) error {
	*a = args{}
	p := bytes.TrimSpace(params)
	if len(p) == 0 || string(p) == "null" {
		return nil
	}
	if p[0] != '[' || !gjson.ValidBytes(p) {
		return errCanon
	}
	it := newIter(p)
	for {
		_, v, ok := it.next()
		if !ok {
			return nil
		}
		if a.n == max || a.n == maxArgs {
			return errCanon
		}
		if string(v) != "null" {
			a.v[a.n] = v
		}
		a.n++
	}
}

// iter walks the elements of an array or the members of an object of valid JSON.
type iter struct {
	b   []byte
	i   int
	obj bool
}

// newIter walks raw, valid JSON starting with '[' or '{'.
func newIter(raw []byte) iter { return iter{b: raw, i: 1, obj: raw[0] == '{'} }

// next returns the next member's key (with its quotes; nil in an array) and value; false at
// the end.
func (it *iter) next() (key, val []byte, ok bool) {
	i := skipSpace(it.b, it.i)
	if it.b[i] == ',' {
		i = skipSpace(it.b, i+1)
	}
	if c := it.b[i]; c == ']' || c == '}' {
		it.i = i + 1
		return nil, nil, false
	}
	if it.obj {
		e := stringEnd(it.b, i)
		key = it.b[i:e]
		i = skipSpace(it.b, e)
		i = skipSpace(it.b, i+1) // the colon
	}
	e := valueEnd(it.b, i)
	it.i = e
	return key, it.b[i:e], true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the string starting at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd is the index just past the value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != ']' && b[j] != '}' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// readString decodes a JSON string (escapes included): without escapes the bytes inside the
// quotes, else a decoded copy.
func readString(raw []byte) ([]byte, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, errCanon
	}
	if body := raw[1 : len(raw)-1]; bytes.IndexByte(body, '\\') < 0 && bytes.IndexByte(body, '"') < 0 {
		// No escapes: the text is the value (raw was validated as JSON).
		return body, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, errCanon
	}
	return []byte(s), nil
}

// hexDigits returns the digits of a 0x-prefixed hex string (any case); errCanon when s is
// not one or has more than maxDigits digits (0: no limit) or none (unless allowEmpty).
func hexDigits(s []byte, maxDigits int, allowEmpty bool) ([]byte, error) {
	if len(s) < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return nil, errCanon
	}
	d := s[2:]
	if (!allowEmpty && len(d) == 0) || (maxDigits > 0 && len(d) > maxDigits) {
		return nil, errCanon
	}
	for _, c := range d {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return nil, errCanon
		}
	}
	return d, nil
}

// appendQuantity appends a hex quantity of at most 256 bits in minimal form (leading zeros
// dropped).
func appendQuantity(b, raw []byte) ([]byte, error) {
	s, err := readString(raw)
	if err != nil {
		return b, err
	}
	d, err := hexDigits(s, 64, false) // geth: at most 256 bits, 64 digits
	if err != nil {
		return b, err
	}
	for len(d) > 1 && d[0] == '0' {
		d = d[1:]
	}
	return appendHex(b, d), nil
}

// fixedDigits are the digits of 0x-hex of exactly n bytes (an address, a hash), any case.
func fixedDigits(raw []byte, n int) ([]byte, error) {
	s, err := readString(raw)
	if err != nil {
		return nil, err
	}
	d, err := hexDigits(s, 2*n, false)
	if err != nil || len(d) != 2*n {
		return nil, errCanon
	}
	return d, nil
}

// appendFixed appends 0x-hex of exactly n bytes, lowercase.
func appendFixed(b, raw []byte, n int) ([]byte, error) {
	d, err := fixedDigits(raw, n)
	if err != nil {
		return b, err
	}
	return appendHex(b, d), nil
}

func appendAddress(b, raw []byte) ([]byte, error) { return appendFixed(b, raw, 20) }
func appendHash(b, raw []byte) ([]byte, error)    { return appendFixed(b, raw, 32) }

// dataDigits are the digits of 0x-hex bytes (an even number of digits, possibly none).
func dataDigits(raw []byte) ([]byte, error) {
	s, err := readString(raw)
	if err != nil {
		return nil, err
	}
	d, err := hexDigits(s, 0, true)
	if err != nil || len(d)%2 != 0 {
		return nil, errCanon
	}
	return d, nil
}

func appendData(b, raw []byte) ([]byte, error) {
	d, err := dataDigits(raw)
	if err != nil {
		return b, err
	}
	return appendHex(b, d), nil
}

// readBool reads a JSON boolean; absent: def ("true" or "false"), or errCanon when def is "".
func readBool(raw []byte, def string) (bool, error) {
	s := string(raw)
	if raw == nil {
		s = def
	}
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errCanon
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// readBlockNumber reads a block number or tag (geth's rpc.BlockNumber); absent: def, or
// errCanon when def is "".
func readBlockNumber(raw []byte, def string) (blockRef, error) {
	if raw == nil && def == "" {
		return blockRef{}, errCanon
	}
	var s []byte
	if raw == nil {
		s = []byte(def)
	} else {
		var err error
		if s, err = readString(raw); err != nil {
			return blockRef{}, err
		}
	}
	switch string(s) {
	case "latest":
		return blockRef{kind: refTag, tag: "latest"}, nil
	case "safe":
		return blockRef{kind: refTag, tag: "safe"}, nil
	case "finalized":
		return blockRef{kind: refTag, tag: "finalized"}, nil
	case "pending":
		return blockRef{kind: refPending}, nil
	case "earliest":
		return blockRef{kind: refNumber}, nil
	}
	d, err := hexDigits(s, 16, false) // a uint64: at most 16 digits
	if err != nil {
		return blockRef{}, err
	}
	var n uint64
	for _, c := range d {
		n = n<<4 | uint64(unhex(c))
	}
	if n > 1<<62 {
		return blockRef{}, errCanon
	}
	return blockRef{kind: refNumber, num: n}, nil
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// objectKey is key (a JSON string with its quotes) decoded; callers switch on string(…) of
// it, which the compiler does without a copy.
func objectKey(key []byte) []byte {
	k, _ := readString(key)
	return k
}

// readBlockRef reads a block number, tag or hash, as a string or an EIP-1898 object
// (geth's rpc.BlockNumberOrHash); absent: def, or errCanon when def is "".
func readBlockRef(raw []byte, def string) (blockRef, error) {
	if len(raw) > 0 && raw[0] == '{' {
		// The last of duplicate keys counts, as in encoding/json.
		var num, hash, canon []byte
		it := newIter(raw)
		for {
			k, v, ok := it.next()
			if !ok {
				break
			}
			switch string(objectKey(k)) {
			case "blockNumber":
				num = v
			case "blockHash":
				hash = v
			case "requireCanonical":
				canon = v
			default:
				return blockRef{}, errCanon
			}
		}
		hasNum, hasHash, hasCanon := num != nil, hash != nil, canon != nil
		if hasNum == hasHash || (hasNum && hasCanon) {
			return blockRef{}, errCanon
		}
		if hasNum {
			if string(num) == "null" {
				return blockRef{}, errCanon
			}
			return readBlockNumber(num, "")
		}
		h, err := fixedDigits(hash, 32)
		if err != nil {
			return blockRef{}, err
		}
		rc := false
		if hasCanon {
			if rc, err = readBool(canon, "false"); err != nil {
				return blockRef{}, err
			}
		}
		if rc {
			return blockRef{kind: refCanonHash, hash: h}, nil
		}
		return blockRef{kind: refHash, hash: h}, nil
	}
	if len(raw) == 68 { // a hash as a plain string: "0x" and 64 digits, quoted
		h, err := fixedDigits(raw, 32)
		if err != nil {
			return blockRef{}, err
		}
		return blockRef{kind: refHash, hash: h}, nil
	}
	return readBlockNumber(raw, def)
}

// The call object's fields the reader knows, in the canonical (sorted) order; data is read
// as input.
const (
	cfChainID = iota
	cfFrom
	cfGas
	cfGasPrice
	cfInput
	cfMaxFeePerGas
	cfMaxPriorityFeePerGas
	cfNonce
	cfTo
	cfValue
	cfData // not written: merged into input
	cfCount
)

var callFieldNames = [cfCount]string{`"chainId":`, `"from":`, `"gas":`, `"gasPrice":`, `"input":`,
	`"maxFeePerGas":`, `"maxPriorityFeePerGas":`, `"nonce":`, `"to":`, `"value":`, ``}

func callField(key []byte) int {
	switch string(key) {
	case "chainId":
		return cfChainID
	case "from":
		return cfFrom
	case "gas":
		return cfGas
	case "gasPrice":
		return cfGasPrice
	case "input":
		return cfInput
	case "maxFeePerGas":
		return cfMaxFeePerGas
	case "maxPriorityFeePerGas":
		return cfMaxPriorityFeePerGas
	case "nonce":
		return cfNonce
	case "to":
		return cfTo
	case "value":
		return cfValue
	case "data":
		return cfData
	}
	return -1
}

// appendCall appends an eth_call object: known fields only, in one order, nulls dropped,
// data as input.
func appendCall(b, raw []byte) ([]byte, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return b, errCanon
	}
	var fields [cfCount][]byte // the last of duplicate keys counts, as in encoding/json
	it := newIter(raw)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		f := callField(objectKey(k))
		if f < 0 {
			return b, errCanon
		}
		fields[f] = v
	}
	for f, v := range fields {
		if string(v) == "null" {
			fields[f] = nil
		}
	}
	if d := fields[cfData]; d != nil {
		dd, err := dataDigits(d)
		if err != nil {
			return b, err
		}
		if in := fields[cfInput]; in != nil {
			id, err := dataDigits(in)
			if err != nil {
				return b, err
			}
			if !bytes.EqualFold(dd, id) {
				return b, errCanon // geth refuses both when they differ
			}
		}
		fields[cfInput] = d
	}
	b = append(b, '{')
	first := true
	for f, v := range fields[:cfData] {
		if v == nil {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, callFieldNames[f]...)
		var err error
		switch f {
		case cfFrom, cfTo:
			b, err = appendAddress(b, v)
		case cfInput:
			b, err = appendData(b, v)
		default:
			b, err = appendQuantity(b, v)
		}
		if err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// logFilter is an eth_getLogs filter as read.
type logFilter struct {
	from, to  blockRef
	blockHash bool
}

// appendFilter appends an eth_getLogs filter (geth's FilterCriteria): fromBlock and toBlock
// (absent: latest) or blockHash; address one or a list (a set: sorted, duplicates dropped,
// empty as absent); topics positions of null, a hash or a list of hashes (a set; empty as
// null). The keys in order: address, blockHash or fromBlock, toBlock, topics.
func appendFilter(b, raw []byte) ([]byte, logFilter, error) {
	var f logFilter
	if len(raw) == 0 || raw[0] != '{' {
		return b, f, errCanon
	}
	var from, to, hash, address, topics []byte // the last of duplicate keys counts
	it := newIter(raw)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch string(objectKey(k)) {
		case "fromBlock":
			from = v
		case "toBlock":
			to = v
		case "blockHash":
			hash = v
		case "address":
			address = v
		case "topics":
			topics = v
		default:
			return b, f, errCanon
		}
	}
	null := func(v []byte) []byte {
		if string(v) == "null" {
			return nil
		}
		return v
	}
	from, to, hash, address, topics = null(from), null(to), null(hash), null(address), null(topics)
	var err error
	if f.from, err = readBlockNumber(from, "latest"); err != nil {
		return b, f, err
	}
	if f.to, err = readBlockNumber(to, "latest"); err != nil {
		return b, f, err
	}
	var h []byte
	if hash != nil {
		if h, err = fixedDigits(hash, 32); err != nil {
			return b, f, err
		}
		if from != nil || to != nil {
			return b, f, errCanon // geth refuses a range with a block hash
		}
		f.blockHash = true
	}
	b = append(b, '{')
	n := len(b)
	if address != nil {
		b = append(b, `"address":`...)
		if b, err = appendSet(b, address, 20); err != nil {
			return b, f, err
		}
		if string(b[len(b)-2:]) == "[]" {
			b = b[:n] // an empty list: absent
		}
	}
	comma := func() {
		if len(b) > n {
			b = append(b, ',')
		}
	}
	if f.blockHash {
		comma()
		b = append(b, `"blockHash":`...)
		b = appendHex(b, h)
	} else {
		comma()
		b = append(b, `"fromBlock":`...)
		b = f.from.appendJSON(b)
		b = append(b, `,"toBlock":`...)
		b = f.to.appendJSON(b)
	}
	if topics != nil {
		m := len(b)
		comma()
		b = append(b, `"topics":`...)
		var any bool
		if b, any, err = appendTopics(b, topics); err != nil {
			return b, f, err
		}
		if !any {
			b = b[:m] // an empty list: absent
		}
	}
	return append(b, '}'), f, nil
}

// appendSet appends null, one value or a list of values, each 0x-hex of n bytes, as a sorted
// set without duplicates.
func appendSet(b, raw []byte, n int) ([]byte, error) {
	if raw[0] != '[' {
		b = append(b, '[')
		b, err := appendFixed(b, raw, n)
		return append(b, ']'), err
	}
	it := newIter(raw)
	_, v1, ok := it.next()
	if !ok {
		return append(b, "[]"...), nil
	}
	_, v2, ok := it.next()
	if !ok { // one element: nothing to sort
		b = append(b, '[')
		b, err := appendFixed(b, v1, n)
		return append(b, ']'), err
	}
	set := make([]string, 0, 4)
	for _, v := range [2][]byte{v1, v2} {
		d, err := fixedDigits(v, n)
		if err != nil {
			return b, err
		}
		set = append(set, string(appendHex(nil, d)))
	}
	for {
		_, v, ok := it.next()
		if !ok {
			break
		}
		d, err := fixedDigits(v, n)
		if err != nil {
			return b, err
		}
		set = append(set, string(appendHex(nil, d)))
	}
	slices.Sort(set)
	set = slices.Compact(set)
	b = append(b, '[')
	for i, s := range set {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, s...)
	}
	return append(b, ']'), nil
}

// appendTopics appends the topics list: each position null (any), a hash, or a list of
// hashes (any of them; an empty list is any). A null inside a list is not read. any reports
// whether the list has a position at all.
func appendTopics(b, raw []byte) (_ []byte, any bool, _ error) {
	if raw[0] != '[' {
		return b, false, errCanon
	}
	b = append(b, '[')
	it := newIter(raw)
	for i := 0; ; i++ {
		_, v, ok := it.next()
		if !ok {
			break
		}
		any = true
		if i > 0 {
			b = append(b, ',')
		}
		if string(v) == "null" {
			b = append(b, "null"...)
			continue
		}
		n := len(b)
		var err error
		if b, err = appendSet(b, v, 32); err != nil {
			return b, false, err
		}
		if string(b[n:]) == "[]" {
			b = append(b[:n], "null"...)
		}
	}
	return append(b, ']'), any, nil
}

// appendString appends s as encoding/json writes a string: as it is when it holds nothing
// that it escapes, else through encoding/json.
func appendString(b, s []byte) []byte {
	for _, c := range s {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(string(s))
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
