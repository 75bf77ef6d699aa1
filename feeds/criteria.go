package feeds

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Limits of a filter, go-ethereum's (eth/filters: maxTopics, maxSubTopics, and the default
// logQueryLimit of ethconfig).
const (
	// MaxTopics is the largest number of topic positions (LOG0 … LOG4: four topics).
	MaxTopics = 4
	// MaxSubTopics is the largest number of hashes one topic position may list.
	MaxSubTopics = 1000
	// MaxAddresses is the largest number of addresses a filter may list.
	MaxAddresses = 1000
)

// Criteria is a logs filter as geth reads it (eth_subscribe "logs", eth_newFilter,
// eth_getLogs): "address" one address or an array; "topics" up to 4 positions, each null
// (any), a hash, or an array of hashes (any of); "fromBlock"/"toBlock" (tags or numbers) and
// "blockHash" (exclusive with from/to) kept as given. Errors of ParseCriteria are
// *jsonrpc.Error -32602 with geth's wording where geth has one.
type Criteria struct {
	// Addresses: a log matches when it comes from one of them; empty: any address.
	Addresses []common.Address
	// Topics are the positions: a log matches when it has at least len(Topics) topics and
	// each position's list holds its topic there; a nil (empty) list matches any topic.
	Topics [][]common.Hash
	// FromBlock and ToBlock are the block tags or hex numbers as given ("" absent), checked
	// the way geth reads them ("earliest", "latest", "pending", "safe", "finalized", or a
	// hex quantity up to 2^63-1). Match does not look at them.
	FromBlock, ToBlock string
	// From and To are FromBlock and ToBlock as geth's rpc.BlockNumber reads them: a block
	// number or one of its negative tags; absent is rpc.LatestBlockNumber, as both geth's
	// filters and its log subscriptions take it.
	From, To rpc.BlockNumber
	// BlockHash is "blockHash", exclusive with FromBlock and ToBlock; Match does not look at
	// it.
	BlockHash *common.Hash
	// Raw is the object as given (a copy), for eth_getFilterLogs forwarding.
	Raw json.RawMessage
}

// Geth's errors (eth/filters/api.go).
var (
	errInvalidTopic        = errors.New("invalid topic(s)")
	errExceedMaxTopics     = errors.New("exceed max topics")
	errExceedLogQueryLimit = errors.New("exceed max addresses or topics per search position")
	errBlockHashWithRange  = errors.New("cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other")
)

// ParseCriteria reads a filter object the way go-ethereum's FilterCriteria.UnmarshalJSON
// does, with its error texts: JSON null, or nothing at all, is the empty filter (every log);
// a position's array holding null matches any topic at that position, as in geth. Beyond
// UnmarshalJSON it refuses, as geth's eth_subscribe, eth_newFilter and eth_getLogs do, more
// than MaxAddresses addresses or MaxSubTopics hashes in one position ("exceed max addresses
// or topics per search position"). The error is jsonrpc.ErrInvalidParams (-32602) with geth's
// message; geth's own answer prefixes it with "invalid argument N: " (N the parameter's
// index), which a caller that wants the identical text adds.
func ParseCriteria(raw json.RawMessage) (*Criteria, error) {
	c, err := parseCriteria(raw)
	if err != nil {
		return nil, jsonrpc.ErrInvalidParams.With(err.Error())
	}
	return c, nil
}

// parseCriteria is ParseCriteria with plain errors.
func parseCriteria(raw json.RawMessage) (*Criteria, error) {
	// The names and types of geth's, so that json's messages read the same ("json: cannot
	// unmarshal string into Go struct field input.topics of type []interface {}"), and the
	// errors come in the same order.
	type input struct {
		BlockHash *common.Hash  `json:"blockHash"`
		FromBlock *blockTag     `json:"fromBlock"`
		ToBlock   *blockTag     `json:"toBlock"`
		Addresses interface{}   `json:"address"`
		Topics    []interface{} `json:"topics"`
	}
	c := &Criteria{Raw: append(json.RawMessage(nil), raw...), From: rpc.LatestBlockNumber, To: rpc.LatestBlockNumber}
	if len(raw) == 0 {
		return c, nil
	}
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	if in.BlockHash != nil {
		if in.FromBlock != nil || in.ToBlock != nil {
			return nil, errBlockHashWithRange
		}
		c.BlockHash = in.BlockHash
	} else {
		if in.FromBlock != nil {
			c.FromBlock, c.From = in.FromBlock.given, in.FromBlock.n
		}
		if in.ToBlock != nil {
			c.ToBlock, c.To = in.ToBlock.given, in.ToBlock.n
		}
	}

	if in.Addresses != nil {
		switch a := in.Addresses.(type) {
		case []interface{}:
			for i, v := range a {
				s, ok := v.(string)
				if !ok {
					return nil, fmt.Errorf("non-string address at index %d", i)
				}
				addr, err := decodeAddress(s)
				if err != nil {
					return nil, fmt.Errorf("invalid address at index %d: %v", i, err)
				}
				c.Addresses = append(c.Addresses, addr)
			}
		case string:
			addr, err := decodeAddress(a)
			if err != nil {
				return nil, fmt.Errorf("invalid address: %v", err)
			}
			c.Addresses = []common.Address{addr}
		default:
			return nil, errors.New("invalid addresses in query")
		}
	}

	if len(in.Topics) > MaxTopics {
		return nil, errExceedMaxTopics
	}
	if len(in.Topics) > 0 {
		c.Topics = make([][]common.Hash, len(in.Topics))
		for i, t := range in.Topics {
			switch t := t.(type) {
			case nil:
				// Any topic.
			case string:
				h, err := decodeTopic(t)
				if err != nil {
					return nil, err
				}
				c.Topics[i] = []common.Hash{h}
			case []interface{}:
				if len(t) > MaxSubTopics {
					return nil, errExceedMaxTopics
				}
				for _, v := range t {
					if v == nil {
						// geth: a null among the alternatives matches any topic, and
						// what follows it is not read.
						c.Topics[i] = nil
						break
					}
					s, ok := v.(string)
					if !ok {
						return nil, errInvalidTopic
					}
					h, err := decodeTopic(s)
					if err != nil {
						return nil, err
					}
					c.Topics[i] = append(c.Topics[i], h)
				}
			default:
				return nil, errInvalidTopic
			}
		}
	}
	// Beyond UnmarshalJSON: geth's eth_subscribe, eth_newFilter and eth_getLogs refuse it.
	if len(c.Addresses) > MaxAddresses {
		return nil, errExceedLogQueryLimit
	}
	return c, nil
}

// blockTag is a "fromBlock" or "toBlock" value as geth's rpc.BlockNumber reads it (n), and
// as given (the JSON string's contents).
type blockTag struct {
	given string
	n     rpc.BlockNumber
}

// UnmarshalJSON implements json.Unmarshaler with rpc.BlockNumber's rules and errors.
func (t *blockTag) UnmarshalJSON(data []byte) error {
	if err := t.n.UnmarshalJSON(data); err != nil {
		return err
	}
	s := strings.TrimSpace(string(data))
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	t.given = s
	return nil
}

// decodeAddress is geth's: a 0x-prefixed hex string of 20 bytes.
func decodeAddress(s string) (common.Address, error) {
	b, err := hexutil.Decode(s)
	if err == nil && len(b) != common.AddressLength {
		err = fmt.Errorf("hex has invalid length %d after decoding; expected %d for address", len(b), common.AddressLength)
	}
	return common.BytesToAddress(b), err
}

// decodeTopic is geth's: a 0x-prefixed hex string of 32 bytes.
func decodeTopic(s string) (common.Hash, error) {
	b, err := hexutil.Decode(s)
	if err == nil && len(b) != common.HashLength {
		err = fmt.Errorf("hex has invalid length %d after decoding; expected %d for topic", len(b), common.HashLength)
	}
	return common.BytesToHash(b), err
}

// Match reports whether l passes c's addresses and topics as geth's filter does: its address
// among Addresses (when any), at least len(Topics) topics, and each position's topic among
// that position's hashes (an empty position matches any). The block range (FromBlock,
// ToBlock, BlockHash) is the caller's to apply. It does not allocate.
func (c *Criteria) Match(l *Log) bool {
	if len(c.Addresses) > 0 && !slices.Contains(c.Addresses, l.Address) {
		return false
	}
	if len(c.Topics) > len(l.Topics) {
		return false
	}
	for i, sub := range c.Topics {
		if len(sub) > 0 && !slices.Contains(sub, l.Topics[i]) {
			return false
		}
	}
	return true
}

// Bounds bounds the criteria a consumer may hold while it lives (a logs subscription): each
// is matched against every block's logs, and kept in memory with its key.
type Bounds struct {
	// Addresses bounds the addresses; TopicsPerPosition the hashes of one position.
	Addresses, TopicsPerPosition int
	// Product bounds the addresses (at least 1) times the hashes of all positions (at
	// least 1).
	Product int
	// Bytes bounds the filter object's JSON.
	Bytes int
}

// Check returns the -32602 error that refuses c, read from raw (its JSON), over b; or nil.
func (b Bounds) Check(c *Criteria, raw []byte) error {
	if b.Bytes > 0 && len(raw) > b.Bytes {
		return jsonrpc.ErrInvalidParams.Withf("filter too large: %d bytes, the most this server holds for a subscription is %d (server.websocket.logsCriteria.maxBytes)", len(raw), b.Bytes)
	}
	if b.Addresses > 0 && len(c.Addresses) > b.Addresses {
		return jsonrpc.ErrInvalidParams.Withf("filter too large: %d addresses, the most this server takes is %d (server.websocket.logsCriteria.maxAddresses)", len(c.Addresses), b.Addresses)
	}
	hashes := 0
	for i, pos := range c.Topics {
		if b.TopicsPerPosition > 0 && len(pos) > b.TopicsPerPosition {
			return jsonrpc.ErrInvalidParams.Withf("filter too large: %d topics at position %d, the most this server takes is %d (server.websocket.logsCriteria.maxTopicsPerPosition)", len(pos), i, b.TopicsPerPosition)
		}
		hashes += len(pos)
	}
	if p := max(len(c.Addresses), 1) * max(hashes, 1); b.Product > 0 && p > b.Product {
		return jsonrpc.ErrInvalidParams.Withf("filter too large: %d addresses × %d topics is %d, the most this server takes is %d (server.websocket.logsCriteria.maxProduct)", len(c.Addresses), hashes, p, b.Product)
	}
	return nil
}
