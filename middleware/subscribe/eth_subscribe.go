package subscribe

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/ethereum/go-ethereum/rpc"

	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// The kinds of eth_subscribe.
const (
	kindNewHeads = "newHeads"
	kindLogs     = "logs"
	kindPending  = "newPendingTransactions"
	kindSyncing  = "syncing"
)

// subscribe answers eth_subscribe on a socket: the subscription's id. newHeads and logs
// subscribe to the chain's feed; syncing notifies false once (the feed follows nodes in sync
// only); newPendingTransactions is not offered: the feed follows blocks through the
// upstream pool and sees no node's transaction pool.
func (s *Stage) subscribe(c *proxy.Call) (*proxy.Response, error) {
	kind, args, err := subscriptionArgs(c.Request.Params)
	if err != nil {
		return nil, err
	}
	var (
		crit *feeds.Criteria
		span blockRange
	)
	switch kind {
	case kindNewHeads, kindSyncing:
		if len(args) > 0 {
			return nil, jsonrpc.ErrInvalidParams.With("too many arguments, want at most 1")
		}
	case kindLogs:
		if len(args) > 1 {
			return nil, jsonrpc.ErrInvalidParams.With("too many arguments, want at most 2")
		}
		if crit, span, err = logsCriteria(args, s.bounds); err != nil {
			return nil, err
		}
	case kindPending:
		return nil, errPendingNotOffered
	default:
		return nil, jsonrpc.ErrMethodNotFound.Withf("no %s subscription in eth namespace", strconv.Quote(clip(kind)))
	}
	var feed *feeds.Feed
	if kind != kindSyncing {
		f, ok := s.feeds.Feed(c.ChainID)
		if !ok {
			return nil, jsonrpc.ErrMethodNotFound.Withf("notifications are not offered on chain %d", c.ChainID)
		}
		feed = f
	}
	sub, err := c.Exchange.Socket.Subscribe(c, kind)
	if err != nil {
		return nil, err
	}
	switch kind {
	case kindNewHeads:
		sub.OnEnd(feed.Subscribe(&headsSink{sub: sub}, false))
	case kindLogs:
		sink := &logsSink{sub: sub, crit: crit, span: span, key: criteriaKey(crit), memo: s.memo(c.ChainID)}
		sub.OnEnd(feed.Subscribe(sink, true))
	case kindSyncing:
		sub.Notify(notSyncing) // sent after the answer: the socket holds it until then
	}
	return &proxy.Response{Result: strconv.AppendQuote(nil, sub.ID())}, nil
}

var notSyncing = []byte("false")

var errPendingNotOffered = jsonrpc.ErrMethodNotFound.With("newPendingTransactions is not offered on this chain: web3gate follows blocks through its upstream pool and sees no node's transaction pool")

// subscriptionArgs reads eth_subscribe's params: the kind, then its arguments. The errors
// are geth's.
func subscriptionArgs(params []byte) (string, []json.RawMessage, error) {
	var args []json.RawMessage
	if p := bytes.TrimSpace(params); len(p) == 0 || p[0] != '[' || json.Unmarshal(p, &args) != nil {
		return "", nil, jsonrpc.ErrInvalidParams.With("non-array args")
	}
	var kind string
	if len(args) == 0 || json.Unmarshal(args[0], &kind) != nil {
		return "", nil, jsonrpc.ErrInvalidParams.With("expected subscription name as first argument")
	}
	return kind, args[1:], nil
}

// logsCriteria reads the filter of a logs subscription (absent or null: every log) and its
// block range, as geth's SubscribeLogs does: fromBlock and toBlock absent or "latest" are no
// bound, "earliest" is block 0, a number bounds the blocks whose logs are delivered (new
// blocks only: a subscription never replays past ones); "pending" is refused, and so is any
// other combination ("safe", "finalized", toBlock below fromBlock, a numbered toBlock after
// a "latest" fromBlock). go-ethereum's ethclient.SubscribeFilterLogs (and so abigen's Watch
// methods) sends fromBlock "0x0" and toBlock "latest" when the query has none. A blockHash is
// refused: a subscription follows new blocks.
//
// The filter is refused (-32602) over bounds, and what the subscription keeps of it is its
// addresses and topics only (not its JSON).
func logsCriteria(args []json.RawMessage, bounds feeds.Bounds) (*feeds.Criteria, blockRange, error) {
	all := blockRange{to: math.MaxUint64}
	if len(args) == 0 || string(bytes.TrimSpace(args[0])) == "null" {
		return &feeds.Criteria{}, all, nil
	}
	if bounds.Bytes > 0 && len(args[0]) > bounds.Bytes {
		return nil, all, bounds.Check(&feeds.Criteria{}, args[0]) // not parsed at all
	}
	crit, err := feeds.ParseCriteria(args[0])
	if err != nil {
		return nil, all, err
	}
	if err := bounds.Check(crit, args[0]); err != nil {
		return nil, all, err
	}
	crit.Raw = nil
	if crit.BlockHash != nil {
		return nil, all, errBlockRange
	}
	if crit.From == rpc.PendingBlockNumber || crit.To == rpc.PendingBlockNumber {
		return nil, all, errPendingLogs
	}
	from, to := bound(crit.From), bound(crit.To)
	switch {
	case from == rpc.LatestBlockNumber && to == rpc.LatestBlockNumber:
		return crit, all, nil
	case from >= 0 && to >= 0 && to >= from:
		return crit, blockRange{from: uint64(from), to: uint64(to)}, nil
	case from >= 0 && to == rpc.LatestBlockNumber:
		return crit, blockRange{from: uint64(from), to: math.MaxUint64}, nil
	}
	return nil, all, errBlockRange
}

// blockRange is the blocks whose logs a logs subscription delivers, from and to included.
type blockRange struct{ from, to uint64 }

// bound is a range's end as geth's SubscribeLogs takes it: "earliest" is block 0; "latest"
// stays itself, and "safe" and "finalized" stay negative (no valid range).
func bound(n rpc.BlockNumber) rpc.BlockNumber {
	if n == rpc.EarliestBlockNumber {
		return 0
	}
	return n
}

var (
	errBlockRange  = jsonrpc.ErrInvalidParams.With("invalid block range params")
	errPendingLogs = jsonrpc.ErrInvalidParams.With("pending logs are not supported")
)

// clip bounds a client's string before it goes into a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
