package ratelimit

import (
	"math"

	"github.com/tidwall/gjson"

	"github.com/web3gate/web3gate/internal/rpchex"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// DefaultCost is the cost of a method the table does not name: most reads.
const DefaultCost = 1

// DefaultCosts is the cost table in compute units (CU); docs/rate-limits.md shows it.
// rateLimit.costs and a client's costs override it.
// Only the methods of LocalMethods may cost 0: whatever reaches a node costs at least a unit.
var DefaultCosts = map[string]uint64{
	// Answered by web3gate itself, never forwarded: free.
	"eth_chainId":         0,
	"net_version":         0,
	"web3_clientVersion":  0,
	"eth_unsubscribe":     0,
	"eth_uninstallFilter": 0,
	// Executions on the node.
	"eth_call":             2,
	"eth_estimateGas":      2,
	"eth_createAccessList": 2,
	"eth_getProof":         2,
	"eth_getBlockReceipts": 2,
	// eth_getLogs: this base, plus a unit per getLogsBlocksPerUnit blocks of its range.
	"eth_getLogs":       2,
	"eth_getFilterLogs": 2,
	// State that lives on: a filter or a subscription; eth_subscribe, this base plus a unit
	// per subscribeBytesPerUnit bytes of its params.
	"eth_subscribe":                   5,
	"eth_newFilter":                   5,
	"eth_newBlockFilter":              2,
	"eth_newPendingTransactionFilter": 2,
	// Signing and sending.
	"eth_sendRawTransaction": 10,
	"eth_sendTransaction":    20,
	"eth_signTransaction":    10,
	"eth_sign":               5,
	"personal_sign":          5,
	"eth_signTypedData":      5,
	"eth_signTypedData_v3":   5,
	"eth_signTypedData_v4":   5,
}

// LocalMethods are the methods web3gate answers itself and never forwards to a node: the
// route stage's eth_chainId, net_version and web3_clientVersion, the subscription stage's
// eth_unsubscribe and the filters stage's eth_uninstallFilter. They alone may cost 0; any
// other method (web3_sha3, net_listening, eth_syncing, ...) reaches a node and costs at least
// one unit, so that a spent budget refuses it.
var LocalMethods = map[string]bool{
	"eth_chainId": true, "net_version": true, "web3_clientVersion": true,
	"eth_unsubscribe": true, "eth_uninstallFilter": true,
}

// addCost is a + b, or the largest cost when that overflows: a batch of calls over huge
// ranges must not wrap around to a small cost.
func addCost(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// openRangeUnits are the units added to eth_getLogs's base cost when its range cannot be
// told: a block tag while the chain's head is not known.
const openRangeUnits = 10

// costTable is a compiled cost table: the defaults with the overrides.
type costTable map[string]uint64

func newCostTable(layers ...map[string]uint64) costTable {
	t := costTable{}
	for _, l := range layers {
		for m, v := range l {
			t[m] = v
		}
	}
	return t
}

func (t costTable) method(m string) uint64 {
	if v, ok := t[m]; ok {
		return v
	}
	return DefaultCost
}

// cost is the cost of request r on chainID.
func (s *Stage) cost(t costTable, r *jsonrpc.Request, chainID uint64) uint64 {
	c := t.method(r.Method)
	if r.Method == "eth_getLogs" && c > 0 {
		c = addCost(c, s.logsUnits(r.Params, chainID))
	}
	if r.Method == "eth_subscribe" && c > 0 {
		// What a subscription holds while it lives grows with its filter: a unit more per
		// subscribeBytesPerUnit bytes of its params.
		c = addCost(c, uint64(len(r.Params))/s.subBytesPerUnit)
	}
	return c
}

// logsUnits are the units eth_getLogs's range adds: one per getLogsBlocksPerUnit blocks from
// fromBlock to toBlock. A blockHash query adds none. Tags resolve against the chain's head
// (earliest: 0; latest, pending, safe, finalized and an absent bound: the head); when the
// head is not known, a range with a tag adds openRangeUnits, unless both bounds are head
// tags (a range at the head), and so does a bound that is neither a number nor a tag. A
// fromBlock past toBlock adds none (the node refuses it).
func (s *Stage) logsUnits(params []byte, chainID uint64) uint64 {
	if len(params) == 0 {
		return 0
	}
	f := gjson.GetBytes(params, "0")
	if !f.IsObject() || f.Get("blockHash").Exists() {
		return 0
	}
	var head uint64
	if s.head != nil {
		head = s.head(chainID)
	}
	from, fromOK, fromHead := s.bound(f.Get("fromBlock"), head)
	to, toOK, toHead := s.bound(f.Get("toBlock"), head)
	switch {
	case fromHead && toHead:
		return 0
	case !fromOK || !toOK:
		return openRangeUnits
	case to < from:
		return 0
	}
	return (to - from) / s.blocksPerUnit
}

// bound reads a block bound: its number and whether it is known, and whether it is a tag of
// the head (latest, pending, safe, finalized, absent).
func (s *Stage) bound(v gjson.Result, head uint64) (n uint64, known, atHead bool) {
	if !v.Exists() || v.Type == gjson.Null {
		return head, head > 0, true
	}
	if v.Type != gjson.String {
		return 0, false, false
	}
	switch v.Str {
	case "earliest":
		return 0, true, false
	case "latest", "pending", "safe", "finalized":
		return head, head > 0, true
	}
	q, err := rpchex.Quantity(v.Str)
	if err != nil {
		return 0, false, false
	}
	return q, true, false
}
