package subscribe

import (
	"bytes"
	"encoding/json"
	"strconv"

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
	var crit *feeds.Criteria
	switch kind {
	case kindNewHeads, kindSyncing:
		if len(args) > 0 {
			return nil, jsonrpc.ErrInvalidParams.With("too many arguments, want at most 1")
		}
	case kindLogs:
		if len(args) > 1 {
			return nil, jsonrpc.ErrInvalidParams.With("too many arguments, want at most 2")
		}
		if crit, err = logsCriteria(args); err != nil {
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
		sink := &logsSink{sub: sub, crit: crit, key: criteriaKey(crit), memo: s.memo(c.ChainID)}
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

// logsCriteria reads the filter of a logs subscription (absent or null: every log). A
// subscription delivers the logs of new blocks: a block range or hash is refused, as geth
// refuses pending logs.
func logsCriteria(args []json.RawMessage) (*feeds.Criteria, error) {
	if len(args) == 0 || string(bytes.TrimSpace(args[0])) == "null" {
		return &feeds.Criteria{}, nil
	}
	crit, err := feeds.ParseCriteria(args[0])
	if err != nil {
		return nil, err
	}
	for _, b := range []string{crit.FromBlock, crit.ToBlock} {
		switch b {
		case "", "latest":
		case "pending":
			return nil, jsonrpc.ErrInvalidParams.With("pending logs are not supported")
		default:
			return nil, errBlockRange
		}
	}
	if crit.BlockHash != nil {
		return nil, errBlockRange
	}
	return crit, nil
}

var errBlockRange = jsonrpc.ErrInvalidParams.With(`invalid block range params: a logs subscription delivers the logs of new blocks (fromBlock and toBlock may only be "latest", blockHash is refused); use eth_getLogs for past blocks`)

// clip bounds a client's string before it goes into a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
