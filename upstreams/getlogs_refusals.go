package upstreams

import (
	"errors"
	"strings"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// LogsRefusal is what a node's error to eth_getLogs means, read from its message with
// logsRefusals. Only the two "too large" kinds make web3gate split the range; any other
// error is the client's answer as the node gave it.
type LogsRefusal uint8

const (
	// RefusalOther: not one of the kinds below (an unknown message, a node fault).
	RefusalOther LogsRefusal = iota
	// RefusalRangeTooLarge: the node's own bound on the block range of one query (the same
	// for every client); its chunk size is learned from it.
	RefusalRangeTooLarge
	// RefusalTooManyResults: the query matched more logs (or bytes) than the node returns at
	// once. A property of this query, not of the node: the range is split for this call only.
	RefusalTooManyResults
	// RefusalBeyondHead: the range reaches past the node's head, or names a block the node
	// does not have.
	RefusalBeyondHead
	// RefusalInvalidParams: the filter itself is refused (fromBlock after toBlock, too many
	// topics or addresses, blockHash with a range, pending logs).
	RefusalInvalidParams
	// RefusalRateLimited: a provider's rate limit, which no smaller range cures.
	RefusalRateLimited
)

// TooLarge reports whether r is a refusal of the query's size, which smaller ranges pass.
func (r LogsRefusal) TooLarge() bool {
	return r == RefusalRangeTooLarge || r == RefusalTooManyResults
}

func (r LogsRefusal) String() string {
	switch r {
	case RefusalRangeTooLarge:
		return "range too large"
	case RefusalTooManyResults:
		return "too many results"
	case RefusalBeyondHead:
		return "beyond head"
	case RefusalInvalidParams:
		return "invalid params"
	case RefusalRateLimited:
		return "rate limited"
	}
	return "other"
}

// logsRefusals is the one table of what nodes and providers answer when they refuse an
// eth_getLogs call: a phrase of the lowercased message, its meaning, and who says it. The
// first row whose phrase the message contains decides, so the rows that would otherwise be
// taken for "too large" ("block range extends beyond current head block" holds "block
// range") come first. docs/json-rpc.md shows the table; getlogs_refusals_test.go holds the
// full messages.
var logsRefusals = []struct {
	phrase string
	kind   LogsRefusal
	source string
}{
	// Rate limits first: some providers answer them with -32005 and "limit exceeded".
	{"rate limit", RefusalRateLimited, "Infura, Alchemy, QuickNode, Ankr"},
	{"rate-limit", RefusalRateLimited, "providers"},
	{"request rate", RefusalRateLimited, "providers"},
	{"too many requests", RefusalRateLimited, "HTTP 429 bodies"},
	{"per second", RefusalRateLimited, "Alchemy (compute units per second)"},
	{"request count exceeded", RefusalRateLimited, "Infura (daily request count)"},

	// Past the head, or an unknown block.
	{"extends beyond current head", RefusalBeyondHead, "geth"},
	{"beyond the current head", RefusalBeyondHead, "geth-based forks"},
	{"cannot be found", RefusalBeyondHead, "Alchemy (one of the blocks specified in filter cannot be found)"},
	{"header not found", RefusalBeyondHead, "geth, Erigon"},
	{"unknown block", RefusalBeyondHead, "geth, reth, Nethermind"},
	{"block not found", RefusalBeyondHead, "Nethermind, Besu, reth"},
	{"after last accepted block", RefusalBeyondHead, "Avalanche (geth fork)"},
	{"blockoutofrangeerror", RefusalBeyondHead, "anvil (BlockOutOfRangeError: block height is 9 but requested was 13)"},

	// The filter itself.
	{"invalid block range params", RefusalInvalidParams, "geth, reth (fromBlock after toBlock)"},
	{"exceed max topics", RefusalInvalidParams, "geth"},
	{"exceed max addresses", RefusalInvalidParams, "geth (addresses or topics per position)"},
	{"can't specify fromblock/toblock with blockhash", RefusalInvalidParams, "geth"},
	{"pending logs are not supported", RefusalInvalidParams, "geth"},
	{"invalid argument", RefusalInvalidParams, "geth (a malformed member)"},
	{"invalid params", RefusalInvalidParams, "Erigon, Nethermind, Tenderly (details in data)"},
	{"invalid block range", RefusalInvalidParams, "Nethermind, Besu"},

	// The query's results (before the range rows: Alchemy's "log response size exceeded"
	// goes on to name a block range).
	{"query returned more than", RefusalTooManyResults, "geth-based providers, Infura (query returned more than 10000 results)"},
	{"query exceeds max results", RefusalTooManyResults, "reth (query exceeds max results 20000, retry with the range …)"},
	{"query returns too many logs", RefusalTooManyResults, "Erigon --rpc.logs.maxresults"},
	{"log response size exceeded", RefusalTooManyResults, "Alchemy"},
	{"response size exceeded", RefusalTooManyResults, "providers"},
	{"length limit exceeded", RefusalTooManyResults, "reth (response length)"},
	{"response is too big", RefusalTooManyResults, "providers"},
	{"too many results", RefusalTooManyResults, "providers"},
	{"too many logs", RefusalTooManyResults, "providers"},
	{"max results", RefusalTooManyResults, "providers"},
	// The node's bound on the range.
	{"exceed maximum block range", RefusalRangeTooLarge, "geth --rpc.rangelimit, BSC, PublicNode (exceed maximum block range: 50000)"},
	{"query exceeds max block range", RefusalRangeTooLarge, "reth (query exceeds max block range 100000)"},
	{"block range exceeds server limit", RefusalRangeTooLarge, "Erigon --rpc.blockrange.limit"},
	{"exceeds maximum rpc range limit", RefusalRangeTooLarge, "Besu --rpc-max-logs-range (requested range exceeds maximum RPC range limit)"},
	{"exceeds limit of", RefusalRangeTooLarge, "Infura (range 1000000 exceeds limit of 10000)"},
	{"block range is too wide", RefusalRangeTooLarge, "Ankr, Moonbeam/Frontier (block range is too wide (maximum 1024))"},
	{"eth_getlogs requests with up to a", RefusalRangeTooLarge, "Alchemy (you can make eth_getLogs requests with up to a 2K block range)"},
	{"eth_getlogs is limited to", RefusalRangeTooLarge, "QuickNode (eth_getLogs is limited to a 10,000 range), 1RPC"},
	{"eth_getlogs and eth_newfilter are limited to", RefusalRangeTooLarge, "QuickNode"},
	{"ranges over", RefusalRangeTooLarge, "dRPC (ranges over 10000 blocks are not supported on freetier)"},
	{"block range is bigger than", RefusalRangeTooLarge, "Scroll (block range is bigger than maxBlockRange)"},
	{"block range is larger than", RefusalRangeTooLarge, "Morph (block range is larger than max block range)"},
	{"bigger than range limit", RefusalRangeTooLarge, "Tenderly"},
	{"range limit exceeded", RefusalRangeTooLarge, "Chainstack"},
	{"block range too large", RefusalRangeTooLarge, "providers, web3gate"},
	{"block range is too large", RefusalRangeTooLarge, "Nethermind"},
	{"range is too large", RefusalRangeTooLarge, "providers"},
	{"block range limit", RefusalRangeTooLarge, "providers"},
}

// ClassifyLogsRefusal reads a node's error message to eth_getLogs (any case).
func ClassifyLogsRefusal(msg string) LogsRefusal {
	msg = strings.ToLower(msg)
	for _, r := range logsRefusals {
		if strings.Contains(msg, r.phrase) {
			return r.kind
		}
	}
	return RefusalOther
}

// logsRefusal is what err means when a node answered it to eth_getLogs. web3gate's own
// errors (timeouts, no node, an answer over maxResponseBytes: a smaller range would not cure
// it, since the joined answer has the same bound) are RefusalOther.
func logsRefusal(err error) LogsRefusal {
	var je *jsonrpc.Error
	if !errors.As(err, &je) || errors.Is(err, jsonrpc.ErrUpstreamTimeout) || errors.Is(err, jsonrpc.ErrUpstreamUnavailable) {
		return RefusalOther
	}
	return ClassifyLogsRefusal(je.Message)
}

// RangeRefusal reports whether an error message (lowercased) is a node's or provider's way of
// saying an eth_getLogs query is too large (the owners indexer reads them too).
func RangeRefusal(msg string) bool { return ClassifyLogsRefusal(msg).TooLarge() }
