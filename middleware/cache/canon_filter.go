// The canonical form of eth_getLogs' filter, and of its sets of addresses and topics.

package cache

import "slices"

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
