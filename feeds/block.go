package feeds

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/tidwall/gjson"

	"github.com/web3gate/web3gate/internal/rpchex"
)

// Block is one block of the feed. Immutable once delivered: share, never modify.
type Block struct {
	Number     uint64
	Hash       common.Hash
	ParentHash common.Hash
	// Header is the newHeads payload, geth's form: the block object as
	// eth_getBlockByNumber(n,false) returned it WITHOUT "transactions", "uncles", "size",
	// "totalDifficulty", "withdrawals" (the other members as the node sent them, in its
	// order). Nil only for a removed block of Changes whose content is unknowable (see
	// Changes).
	Header json.RawMessage
	// Logs are the block's logs in log-index order, fetched when the feed had a log consumer
	// (HasLogs true): for ALL consumers together, one eth_getLogs per block by its hash, or
	// one eth_getLogs per run of blocks fetched in the same round trip as their headers and
	// checked against their hashes.
	Logs    []Log
	HasLogs bool

	// bloomEmpty: the header's logsBloom is all zero, so the block has no logs.
	bloomEmpty bool
}

// Log is one log of a block.
type Log struct {
	Address common.Address
	Topics  []common.Hash
	// Raw is the log object as the node returned it (its members in the node's order) with
	// "removed": false (set in place, or added last when the node left it out).
	Raw json.RawMessage
	// RawRemoved is the same object with "removed": true, for the removed logs of a reorg.
	RawRemoved json.RawMessage
}

// Errors of reading the chain. Both end a round, which the next poll retries.
var (
	// errNotYet: the node does not have a block the feed asked for (it is behind another
	// node, or its chain is shorter after a reorg).
	errNotYet = errors.New("block not available yet")
	// errInconsistent: an answer that does not fit with the rest (a malformed object, a
	// block that does not follow the one before in the same answer, logs of another block):
	// a reorg under way, or a node switching forks.
	errInconsistent = errors.New("inconsistent answer")
)

// headerDropped are the members of a block object that geth's newHeads leaves out.
var headerDropped = map[string]bool{
	"transactions": true, "uncles": true, "size": true, "totalDifficulty": true, "withdrawals": true,
}

// parseBlock reads an eth_getBlockBy*(…, false) result: nil, nil for JSON null (no such
// block on the node).
func parseBlock(raw []byte) (*Block, error) {
	if !gjson.ValidBytes(raw) {
		return nil, fmt.Errorf("%w: a block that is not JSON", errInconsistent)
	}
	r := gjson.ParseBytes(raw)
	if r.Type == gjson.Null {
		return nil, nil
	}
	if !r.IsObject() {
		return nil, fmt.Errorf("%w: a block that is not an object", errInconsistent)
	}
	b := &Block{}
	hdr := make([]byte, 0, len(raw))
	hdr = append(hdr, '{')
	var number, hash, parent, bloom string
	r.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "number":
			number = v.Str
		case "hash":
			hash = v.Str
		case "parentHash":
			parent = v.Str
		case "logsBloom":
			bloom = v.Str
		}
		if headerDropped[k.Str] {
			return true
		}
		if len(hdr) > 1 {
			hdr = append(hdr, ',')
		}
		hdr = append(hdr, k.Raw...)
		hdr = append(hdr, ':')
		hdr = append(hdr, v.Raw...)
		return true
	})
	b.Header = append(hdr, '}')
	n, err := rpchex.Quantity(number)
	if err != nil || !decodeHash(&b.Hash, hash) || !decodeHash(&b.ParentHash, parent) {
		return nil, fmt.Errorf("%w: a block without a number, hash or parentHash", errInconsistent)
	}
	b.Number = n
	b.bloomEmpty = bloom != "" && allZeroHex(bloom)
	return b, nil
}

// rawLog is one element of an eth_getLogs answer, read but not yet copied into its block.
type rawLog struct {
	number    uint64
	blockHash common.Hash
	index     uint64
	address   common.Address
	topics    []gjson.Result
	obj       gjson.Result
}

// parseLogs reads an eth_getLogs result.
func parseLogs(raw []byte) ([]rawLog, error) {
	if !gjson.ValidBytes(raw) {
		return nil, fmt.Errorf("%w: logs that are not JSON", errInconsistent)
	}
	r := gjson.ParseBytes(raw)
	if !r.IsArray() {
		return nil, fmt.Errorf("%w: logs that are not an array", errInconsistent)
	}
	var out []rawLog
	var bad error
	r.ForEach(func(_, v gjson.Result) bool {
		if !v.IsObject() {
			bad = fmt.Errorf("%w: a log that is not an object", errInconsistent)
			return false
		}
		l := rawLog{obj: v}
		var number, hash, index, address string
		ok := true
		v.ForEach(func(k, m gjson.Result) bool {
			switch k.Str {
			case "blockNumber":
				number = m.Str
			case "blockHash":
				hash = m.Str
			case "logIndex":
				index = m.Str
			case "address":
				address = m.Str
			case "topics":
				if !m.IsArray() {
					ok = false
					return false
				}
				l.topics = m.Array()
			}
			return true
		})
		var err error
		if l.number, err = rpchex.Quantity(number); err != nil {
			ok = false
		}
		if index != "" {
			if l.index, err = rpchex.Quantity(index); err != nil {
				ok = false
			}
		}
		if !ok || !decodeHash(&l.blockHash, hash) || !decodeAddress20(&l.address, address) || len(l.topics) > MaxTopics {
			bad = fmt.Errorf("%w: a malformed log", errInconsistent)
			return false
		}
		for _, t := range l.topics {
			var h common.Hash
			if !decodeHash(&h, t.Str) {
				bad = fmt.Errorf("%w: a log with a malformed topic", errInconsistent)
				return false
			}
		}
		out = append(out, l)
		return true
	})
	if bad != nil {
		return nil, bad
	}
	return out, nil
}

// withLogs returns a copy of b holding logs (all of them b's, by number and hash), sorted by
// log index, with Raw and RawRemoved built in one buffer for the block.
func withLogs(b *Block, logs []rawLog) *Block {
	c := *b
	c.HasLogs = true
	c.Logs = nil
	if len(logs) == 0 {
		return &c
	}
	slices.SortStableFunc(logs, func(x, y rawLog) int {
		switch {
		case x.index < y.index:
			return -1
		case x.index > y.index:
			return 1
		}
		return 0
	})
	size, ntopics := 0, 0
	for _, l := range logs {
		size += 2 * (len(l.obj.Raw) + len(`,"removed":false`))
		ntopics += len(l.topics)
	}
	buf := make([]byte, 0, size)
	topics := make([]common.Hash, ntopics)
	c.Logs = make([]Log, len(logs))
	type span struct{ raw, removed [2]int }
	spans := make([]span, len(logs))
	for i, l := range logs {
		lg := &c.Logs[i]
		lg.Address = l.address
		lg.Topics = topics[:len(l.topics):len(l.topics)]
		topics = topics[len(l.topics):]
		for k, t := range l.topics {
			decodeHash(&lg.Topics[k], t.Str)
		}
		start := len(buf)
		buf = appendWithRemoved(buf, l.obj, false)
		spans[i].raw = [2]int{start, len(buf)}
		start = len(buf)
		buf = appendWithRemoved(buf, l.obj, true)
		spans[i].removed = [2]int{start, len(buf)}
	}
	for i, s := range spans {
		c.Logs[i].Raw = buf[s.raw[0]:s.raw[1]:s.raw[1]]
		c.Logs[i].RawRemoved = buf[s.removed[0]:s.removed[1]:s.removed[1]]
	}
	return &c
}

// appendWithRemoved appends the log object obj with "removed" set to removed: its members in
// the node's order, the "removed" member's value replaced where it is, or the member added
// last.
func appendWithRemoved(dst []byte, obj gjson.Result, removed bool) []byte {
	val := "false"
	if removed {
		val = "true"
	}
	dst = append(dst, '{')
	first, seen := true, false
	obj.ForEach(func(k, v gjson.Result) bool {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, k.Raw...)
		dst = append(dst, ':')
		if k.Str == "removed" && !seen {
			seen = true
			dst = append(dst, val...)
		} else {
			dst = append(dst, v.Raw...)
		}
		return true
	})
	if !seen {
		if !first {
			dst = append(dst, ',')
		}
		dst = append(dst, `"removed":`...)
		dst = append(dst, val...)
	}
	return append(dst, '}')
}

// decodeHash decodes a 0x-prefixed 32-byte hex string into h.
func decodeHash(h *common.Hash, s string) bool { return rpchex.Fixed(h[:], s) }

// decodeAddress20 decodes a 0x-prefixed 20-byte hex string into a.
func decodeAddress20(a *common.Address, s string) bool { return rpchex.Fixed(a[:], s) }

// allZeroHex reports whether the 0x-prefixed hex string s is all zero digits.
func allZeroHex(s string) bool {
	if len(s) < 2 {
		return false
	}
	for i := 2; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
