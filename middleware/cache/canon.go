package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Canonical params: a cached method's params are read into their meaning and written back in
// one form, so that requests meaning the same share an entry: quantities in minimal hex
// (0x1 and 0x01), addresses, hashes and data in lowercase hex, absent optional arguments as
// their defaults (eth_call's block is "latest", eth_getLogs' range latest), eth_call's
// call object with its fields in one order and `data` as `input` (geth reads both and refuses
// them when they differ). A request the reader does not fully understand (an unknown field,
// another type, an override argument) is not cached: errCanon.

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
	hash string // refHash, refCanonHash: lowercase
}

// json is the canonical form of r: "0x<n>", the tag, the hash, or {"blockHash":…,
// "requireCanonical":true}.
func (r blockRef) json() any {
	switch r.kind {
	case refNumber:
		return "0x" + strconv.FormatUint(r.num, 16)
	case refTag:
		return r.tag
	case refPending:
		return "pending"
	case refHash:
		return r.hash
	default:
		return map[string]any{"blockHash": r.hash, "requireCanonical": true}
	}
}

// readArgs reads params as a JSON array (absent or null: none) of at most max elements;
// null elements are returned as nil (absent).
func readArgs(params []byte, max int) ([]json.RawMessage, error) {
	p := bytes.TrimSpace(params)
	if len(p) == 0 || string(p) == "null" {
		return nil, nil
	}
	if p[0] != '[' {
		return nil, errCanon
	}
	var args []json.RawMessage
	if err := json.Unmarshal(p, &args); err != nil || len(args) > max {
		return nil, errCanon
	}
	for i, a := range args {
		if string(a) == "null" {
			args[i] = nil
		}
	}
	return args, nil
}

func arg(args []json.RawMessage, i int) json.RawMessage {
	if i < len(args) {
		return args[i]
	}
	return nil
}

// readString decodes a JSON string (escapes included).
func readString(raw json.RawMessage) (string, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", errCanon
	}
	if body := raw[1 : len(raw)-1]; raw[len(raw)-1] == '"' && bytes.IndexByte(body, '\\') < 0 && bytes.IndexByte(body, '"') < 0 {
		// No escapes: the text is the value (raw came from a JSON parser, so it is valid
		// UTF-8 without control characters).
		return string(body), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errCanon
	}
	return s, nil
}

// hexDigits returns the digits of a 0x-prefixed hex string, lowercase; errCanon when s is not
// one or has more than maxDigits digits (0: no limit) or none (unless allowEmpty).
func hexDigits(s string, maxDigits int, allowEmpty bool) (string, error) {
	if len(s) < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return "", errCanon
	}
	d := s[2:]
	if (!allowEmpty && len(d) == 0) || (maxDigits > 0 && len(d) > maxDigits) {
		return "", errCanon
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return "", errCanon
		}
	}
	return strings.ToLower(d), nil
}

// canonQuantity is a hex quantity of at most 256 bits in minimal form (leading zeros dropped).
func canonQuantity(raw json.RawMessage) (string, error) {
	s, err := readString(raw)
	if err != nil {
		return "", err
	}
	d, err := hexDigits(s, 64, false) // geth: at most 256 bits, 64 digits
	if err != nil {
		return "", err
	}
	d = strings.TrimLeft(d, "0")
	if d == "" {
		d = "0"
	}
	return "0x" + d, nil
}

// canonFixed is 0x-hex of exactly n bytes (an address, a hash), lowercase.
func canonFixed(raw json.RawMessage, n int) (string, error) {
	s, err := readString(raw)
	if err != nil {
		return "", err
	}
	d, err := hexDigits(s, 2*n, false)
	if err != nil || len(d) != 2*n {
		return "", errCanon
	}
	return "0x" + d, nil
}

func canonAddress(raw json.RawMessage) (string, error) { return canonFixed(raw, 20) }
func canonHash(raw json.RawMessage) (string, error)    { return canonFixed(raw, 32) }

// canonData is 0x-hex bytes (an even number of digits, possibly none), lowercase.
func canonData(raw json.RawMessage) (string, error) {
	s, err := readString(raw)
	if err != nil {
		return "", err
	}
	d, err := hexDigits(s, 0, true)
	if err != nil || len(d)%2 != 0 {
		return "", errCanon
	}
	return "0x" + d, nil
}

// canonBool is a JSON boolean; absent: def ("true" or "false"), or errCanon when def is "".
func canonBool(raw json.RawMessage, def string) (bool, error) {
	if raw == nil {
		raw = json.RawMessage(def)
	}
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errCanon
}

// readBlockNumber reads a block number or tag (geth's rpc.BlockNumber); absent: def, or
// errCanon when def is "".
func readBlockNumber(raw json.RawMessage, def string) (blockRef, error) {
	s := def
	if raw == nil && def == "" {
		return blockRef{}, errCanon
	}
	if raw != nil {
		var err error
		if s, err = readString(raw); err != nil {
			return blockRef{}, err
		}
	}
	switch s {
	case "latest", "safe", "finalized":
		return blockRef{kind: refTag, tag: s}, nil
	case "pending":
		return blockRef{kind: refPending}, nil
	case "earliest":
		return blockRef{kind: refNumber}, nil
	}
	d, err := hexDigits(s, 16, false) // a uint64: at most 16 digits
	if err != nil {
		return blockRef{}, err
	}
	n, err := strconv.ParseUint(d, 16, 64)
	if err != nil || n > 1<<62 {
		return blockRef{}, errCanon
	}
	return blockRef{kind: refNumber, num: n}, nil
}

// readBlockRef reads a block number, tag or hash, as a string or an EIP-1898 object
// (geth's rpc.BlockNumberOrHash); absent: def, or errCanon when def is "".
func readBlockRef(raw json.RawMessage, def string) (blockRef, error) {
	if len(raw) > 0 && raw[0] == '{' {
		var o map[string]json.RawMessage
		if err := json.Unmarshal(raw, &o); err != nil {
			return blockRef{}, errCanon
		}
		num, hasNum := o["blockNumber"]
		hash, hasHash := o["blockHash"]
		canon, hasCanon := o["requireCanonical"]
		if len(o) != btoi(hasNum)+btoi(hasHash)+btoi(hasCanon) || hasNum == hasHash || (hasNum && hasCanon) {
			return blockRef{}, errCanon
		}
		if hasNum {
			if string(num) == "null" {
				return blockRef{}, errCanon
			}
			return readBlockNumber(num, "")
		}
		h, err := canonHash(hash)
		if err != nil {
			return blockRef{}, err
		}
		rc := false
		if hasCanon {
			if rc, err = canonBool(canon, "false"); err != nil {
				return blockRef{}, err
			}
		}
		if rc {
			return blockRef{kind: refCanonHash, hash: h}, nil
		}
		return blockRef{kind: refHash, hash: h}, nil
	}
	if len(raw) == 68 { // a hash as a plain string: "0x" and 64 digits, quoted
		h, err := canonHash(raw)
		if err != nil {
			return blockRef{}, err
		}
		return blockRef{kind: refHash, hash: h}, nil
	}
	return readBlockNumber(raw, def)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// callFields are the call object's fields the reader knows, by kind.
var callFields = map[string]func(json.RawMessage) (string, error){
	"from": canonAddress, "to": canonAddress,
	"gas": canonQuantity, "gasPrice": canonQuantity, "maxFeePerGas": canonQuantity,
	"maxPriorityFeePerGas": canonQuantity, "value": canonQuantity, "nonce": canonQuantity,
	"chainId": canonQuantity,
	"data":    canonData, "input": canonData,
}

// canonCall reads an eth_call object: known fields only, nulls dropped, data as input.
// json.Marshal writes the map's keys sorted.
func canonCall(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errCanon
	}
	var o map[string]json.RawMessage
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, errCanon
	}
	out := make(map[string]string, len(o))
	for k, v := range o {
		f := callFields[k]
		if f == nil {
			return nil, errCanon
		}
		if string(v) == "null" {
			continue
		}
		c, err := f(v)
		if err != nil {
			return nil, err
		}
		out[k] = c
	}
	if d, ok := out["data"]; ok {
		if in, both := out["input"]; both && in != d {
			return nil, errCanon // geth refuses both when they differ
		}
		out["input"] = d
		delete(out, "data")
	}
	return out, nil
}

// logFilter is an eth_getLogs filter as read.
type logFilter struct {
	from, to  blockRef
	blockHash string
	canon     map[string]any
}

// canonFilter reads an eth_getLogs filter (geth's FilterCriteria): fromBlock and toBlock
// (absent: latest) or blockHash; address one or a list (a set: sorted, duplicates dropped,
// empty as absent); topics positions of null, a hash or a list of hashes (a set; empty as
// null).
func canonFilter(raw json.RawMessage) (logFilter, error) {
	var f logFilter
	if len(raw) == 0 || raw[0] != '{' {
		return f, errCanon
	}
	var o map[string]json.RawMessage
	if err := json.Unmarshal(raw, &o); err != nil {
		return f, errCanon
	}
	f.canon = map[string]any{}
	for k, v := range o {
		if string(v) == "null" {
			v = nil
		}
		var err error
		switch k {
		case "fromBlock":
			f.from, err = readBlockNumber(v, "latest")
		case "toBlock":
			f.to, err = readBlockNumber(v, "latest")
		case "blockHash":
			if v != nil {
				f.blockHash, err = canonHash(v)
			}
		case "address":
			var addrs []string
			if addrs, err = hashSet(v, canonAddress); err == nil && len(addrs) > 0 {
				f.canon["address"] = addrs
			}
		case "topics":
			var topics []any
			if topics, err = canonTopics(v); err == nil && len(topics) > 0 {
				f.canon["topics"] = topics
			}
		default:
			err = errCanon
		}
		if err != nil {
			return f, errCanon
		}
	}
	given := func(k string) bool { v, ok := o[k]; return ok && string(v) != "null" }
	if !given("fromBlock") {
		f.from = blockRef{kind: refTag, tag: "latest"}
	}
	if !given("toBlock") {
		f.to = blockRef{kind: refTag, tag: "latest"}
	}
	if f.blockHash != "" {
		if given("fromBlock") || given("toBlock") {
			return f, errCanon // geth refuses a range with a block hash
		}
		f.canon["blockHash"] = f.blockHash
		return f, nil
	}
	f.canon["fromBlock"], f.canon["toBlock"] = f.from.json(), f.to.json()
	return f, nil
}

// hashSet reads null, one value or a list of values, each canonicalized by c, as a sorted set.
func hashSet(raw json.RawMessage, c func(json.RawMessage) (string, error)) ([]string, error) {
	if raw == nil {
		return nil, nil
	}
	var list []json.RawMessage
	if raw[0] == '[' {
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, errCanon
		}
	} else {
		list = []json.RawMessage{raw}
	}
	out := make([]string, 0, len(list))
	for _, v := range list {
		s, err := c(v)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// canonTopics reads the topics list: each position null (any), a hash, or a list of hashes
// (any of them; an empty list is any). A null inside a list is not read.
func canonTopics(raw json.RawMessage) ([]any, error) {
	if raw == nil {
		return nil, nil
	}
	var list []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, errCanon
	}
	out := make([]any, len(list))
	for i, v := range list {
		if string(v) == "null" {
			continue
		}
		set, err := hashSet(v, canonHash)
		if err != nil {
			return nil, err
		}
		if len(set) > 0 {
			out[i] = set
		}
	}
	return out, nil
}
