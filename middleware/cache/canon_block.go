// Block references (numbers, tags, hashes, EIP-1898 objects) as read, and their canonical form.

package cache

import "strconv"

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
