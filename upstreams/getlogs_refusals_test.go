package upstreams

import (
	"errors"
	"testing"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// TestClassifyLogsRefusal: the messages nodes and providers answer to eth_getLogs, as they
// word them, each read as what it means. Only the two "too large" kinds split a range.
func TestClassifyLogsRefusal(t *testing.T) {
	for _, tc := range []struct {
		source, msg string
		want        LogsRefusal
	}{
		// Past the head or an unknown block: the client's answer, as the node gave it.
		{"geth", "block range extends beyond current head block", RefusalBeyondHead},
		{"Alchemy", "One of the blocks specified in filter (fromBlock, toBlock or blockHash) cannot be found.", RefusalBeyondHead},
		{"geth, Erigon", "header not found", RefusalBeyondHead},
		{"geth", "unknown block", RefusalBeyondHead},
		{"anvil", "BlockOutOfRangeError: block height is 9 but requested was 13", RefusalBeyondHead},
		// The filter itself.
		{"geth, reth", "invalid block range params", RefusalInvalidParams},
		{"geth", "exceed max topics", RefusalInvalidParams},
		{"geth", "exceed max addresses or topics per search position", RefusalInvalidParams},
		{"geth", "can't specify fromBlock/toBlock with blockHash", RefusalInvalidParams},
		{"geth", "pending logs are not supported", RefusalInvalidParams},
		{"geth", "invalid argument 0: hex string without 0x prefix", RefusalInvalidParams},
		{"Tenderly", "invalid params", RefusalInvalidParams},
		// The node's bound on the range.
		{"geth --rpc.rangelimit, PublicNode, BSC", "exceed maximum block range: 50000", RefusalRangeTooLarge},
		{"reth", "query exceeds max block range 100000", RefusalRangeTooLarge},
		{"Erigon", "query block range exceeds server limit, narrow your filter: 1000", RefusalRangeTooLarge},
		{"Besu", "Requested range exceeds maximum RPC range limit", RefusalRangeTooLarge},
		{"Infura", "range 1000000 exceeds limit of 10000", RefusalRangeTooLarge},
		{"Alchemy", "You can make eth_getLogs requests with up to a 500 block range. Based on your parameters, this block range should work: [0x123c9b2, 0x123cba5]", RefusalRangeTooLarge},
		{"Alchemy free tier", "Under the Free tier plan, you can make eth_getLogs requests with up to a 10 block range.", RefusalRangeTooLarge},
		{"QuickNode", "eth_getLogs is limited to a 10,000 range", RefusalRangeTooLarge},
		{"QuickNode", "eth_getLogs and eth_newFilter are limited to a 10,000 blocks range", RefusalRangeTooLarge},
		{"1RPC", "eth_getLogs is limited to 0 - 50 blocks range", RefusalRangeTooLarge},
		{"Ankr, Frontier", "block range is too wide (maximum 1024)", RefusalRangeTooLarge},
		{"dRPC", "ranges over 10000 blocks are not supported on freetier", RefusalRangeTooLarge},
		{"Scroll", "block range is bigger than maxBlockRange", RefusalRangeTooLarge},
		{"Morph", "block range is larger than max block range, block range = 5120, max block range = 5000", RefusalRangeTooLarge},
		{"Chainstack", "range limit exceeded", RefusalRangeTooLarge},
		// The query's results.
		{"Infura, geth-based", "query returned more than 10000 results", RefusalTooManyResults},
		{"reth", "query exceeds max results 20000, retry with the range 25766988-25775072", RefusalTooManyResults},
		{"Erigon", "query returns too many logs, narrow your filter: 20000", RefusalTooManyResults},
		{"Alchemy", "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response.", RefusalTooManyResults},
		{"reth", "length limit exceeded", RefusalTooManyResults},
		// Rate limits: no smaller range cures them.
		{"Infura", "daily request count exceeded, request rate limited", RefusalRateLimited},
		{"Alchemy", "Your app has exceeded its compute units per second capacity.", RefusalRateLimited},
		{"providers", "Too Many Requests", RefusalRateLimited},
		// Anything else.
		{"node fault", "missing trie node", RefusalOther},
		{"geth", "execution reverted", RefusalOther},
		{"unknown provider", "something went wrong", RefusalOther},
		{"broad words alone", "limit exceeded", RefusalOther},
	} {
		t.Run(tc.source+": "+tc.msg, func(t *testing.T) {
			if got := ClassifyLogsRefusal(tc.msg); got != tc.want {
				t.Fatalf("%q read as %v, want %v", tc.msg, got, tc.want)
			}
			if RangeRefusal(tc.msg) != tc.want.TooLarge() {
				t.Fatalf("RangeRefusal disagrees with the table")
			}
		})
	}
}

// TestLogsRefusalOwnErrors: web3gate's own errors are never a node's refusal.
func TestLogsRefusalOwnErrors(t *testing.T) {
	for _, err := range []error{
		jsonrpc.ErrUpstreamTimeout.With("upstream timeout: query returned more than 10000 results"),
		jsonrpc.ErrUpstreamUnavailable.With("upstream response too large"),
		errors.New("query returned more than 10000 results"),
	} {
		if r := logsRefusal(err); r != RefusalOther {
			t.Errorf("%v read as %v", err, r)
		}
	}
	if r := logsRefusal(&jsonrpc.Error{Code: -32602, Message: "block range extends beyond current head block"}); r != RefusalBeyondHead {
		t.Errorf("geth's refusal read as %v", r)
	}
}
