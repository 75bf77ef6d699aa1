package owners

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/tidwall/gjson"

	"github.com/web3gate/web3gate/internal/rpchex"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/upstreams"
)

// Chain is what the index needs of a chain's upstream pool (*upstreams.Pool): one JSON-RPC
// batch per round trip, sent to one node, with the pool's failover.
type Chain interface {
	Name() string
	ForwardBatch(ctx context.Context, calls []upstreams.BatchCall) ([]upstreams.BatchResult, error)
}

// header is what the index reads of a block header.
type header struct {
	number       uint64
	hash, parent common.Hash
}

// errNotYet: the node does not have a block the fetch needs (it is behind the head another
// node reported, or the chain is shorter after a reorg); the fetch is retried later.
var errNotYet = errors.New("block not available yet")

// getBlockCall is eth_getBlockByNumber(n, false).
func getBlockCall(n uint64) upstreams.BatchCall {
	return upstreams.BatchCall{Method: "eth_getBlockByNumber", Params: []byte(`["` + quantity(n) + `",false]`)}
}

func quantity(n uint64) string { return "0x" + strconv.FormatUint(n, 16) }

// parseHeader reads an eth_getBlockByNumber answer for block n: errNotYet when null.
func parseHeader(r upstreams.BatchResult, n uint64) (header, error) {
	if r.Err != nil {
		return header{}, r.Err
	}
	res := gjson.ParseBytes(r.Result)
	if res.Type == gjson.Null {
		return header{}, fmt.Errorf("%w: block %d", errNotYet, n)
	}
	h := header{}
	num, err := rpchex.Quantity(res.Get("number").Str)
	if err != nil || !rpchex.Fixed(h.hash[:], res.Get("hash").Str) || !rpchex.Fixed(h.parent[:], res.Get("parentHash").Str) {
		return header{}, fmt.Errorf("%w: malformed header of block %d", errInconsistent, n)
	}
	if num != n {
		return header{}, fmt.Errorf("%w: asked for block %d, got %d", errInconsistent, n, num)
	}
	h.number = num
	return h, nil
}

// readHead reads the chain's head block number and, withTip, the header of block tip, in one
// round trip: the head, and whether the last indexed block is still on the chain.
func readHead(ctx context.Context, chain Chain, tip uint64, withTip bool) (head uint64, tipHeader header, err error) {
	calls := []upstreams.BatchCall{{Method: "eth_blockNumber"}}
	if withTip {
		calls = append(calls, getBlockCall(tip))
	}
	res, err := chain.ForwardBatch(ctx, calls)
	if err != nil {
		return 0, header{}, err
	}
	if res[0].Err != nil {
		return 0, header{}, res[0].Err
	}
	var s string
	if r := gjson.ParseBytes(res[0].Result); r.Type == gjson.String {
		s = r.Str
	}
	if head, err = rpchex.Quantity(s); err != nil {
		return 0, header{}, fmt.Errorf("%w: eth_blockNumber answered %s", errInconsistent, res[0].Result)
	}
	if withTip {
		tipHeader, err = parseHeader(res[1], tip)
	}
	return head, tipHeader, err
}

// fetched is one range of blocks read from the chain: its logs, and the headers the index
// keeps and checks.
type fetched struct {
	from, to uint64
	// undoFrom: blocks from here on were near the head when fetched; their hashes and undo
	// data are kept.
	undoFrom uint64
	head     uint64
	headers  []header // ascending: from, every block >= undoFrom, and to
	logs     *logBatch
}

func (f *fetched) header(n uint64) (header, bool) {
	i, ok := slices.BinarySearchFunc(f.headers, n, func(h header, n uint64) int {
		switch {
		case h.number < n:
			return -1
		case h.number > n:
			return 1
		}
		return 0
	})
	if !ok {
		return header{}, false
	}
	return f.headers[i], true
}

// logFilter is the eth_getLogs filter of blocks from..to, less the range: the three
// signatures in topic 0 and four topic positions, which keeps the nodes that apply
// positions strictly from sending ERC20 transfers (three topics); the parser ignores them
// anyway.
func logFilter(contracts []common.Address) string {
	var b strings.Builder
	b.WriteString(`"topics":[["` + topicTransfer.Hex() + `","` + topicTransferSingle.Hex() + `","` + topicTransferBatch.Hex() + `"],null,null,null]`)
	if len(contracts) > 0 {
		b.WriteString(`,"address":[`)
		for i, c := range contracts {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"` + strings.ToLower(c.Hex()) + `"`)
		}
		b.WriteByte(']')
	}
	return b.String()
}

// fetchRange reads blocks from..to in one round trip: the headers of from, to and every
// block from undoFrom on, and the logs. It checks that the headers chain up and that the
// logs name the same hashes; an answer that does not is errInconsistent (a reorg under way,
// or a node switching forks), and a header the node does not have is errNotYet.
func fetchRange(ctx context.Context, chain Chain, filter string, from, to, undoFrom, head uint64) (*fetched, error) {
	nums := []uint64{from}
	for n := max(from, undoFrom); n <= to; n++ {
		if n != from {
			nums = append(nums, n)
		}
	}
	if nums[len(nums)-1] != to {
		nums = append(nums, to)
	}
	calls := make([]upstreams.BatchCall, 0, len(nums)+1)
	for _, n := range nums {
		calls = append(calls, getBlockCall(n))
	}
	calls = append(calls, upstreams.BatchCall{Method: "eth_getLogs",
		Params: []byte(`[{"fromBlock":"` + quantity(from) + `","toBlock":"` + quantity(to) + `",` + filter + `}]`)})
	res, err := chain.ForwardBatch(ctx, calls)
	if err != nil {
		return nil, err
	}
	logsRes := res[len(res)-1]
	if logsRes.Err != nil {
		return nil, logsRes.Err
	}
	f := &fetched{from: from, to: to, undoFrom: undoFrom, head: head, headers: make([]header, 0, len(nums))}
	for i, n := range nums {
		h, err := parseHeader(res[i], n)
		if err != nil {
			return nil, err
		}
		if i > 0 && n == f.headers[i-1].number+1 && h.parent != f.headers[i-1].hash {
			return nil, fmt.Errorf("%w: block %d does not follow block %d", errInconsistent, n, n-1)
		}
		f.headers = append(f.headers, h)
	}
	if f.logs, err = parseLogs(logsRes.Result, from, to); err != nil {
		return nil, err
	}
	for n, hash := range f.logs.blockHashes {
		if h, ok := f.header(n); ok && h.hash != hash {
			return nil, fmt.Errorf("%w: the logs of block %d name another block hash than its header", errInconsistent, n)
		}
	}
	return f, nil
}

// rangeRefused reports whether err is a node refusing the size of an eth_getLogs request,
// which a smaller range may pass: a timeout, a response over the pool's size limit, or the
// node's own error for too many results or too wide a range. The node's errors are told
// apart by their code and wording, the only thing providers have in common: -32005 (limit
// exceeded: Infura's "query returned more than 10000 results"), "block range", "too many",
// "exceed", "response size", ...
func rangeRefused(err error) bool {
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		return false
	}
	if errors.Is(err, jsonrpc.ErrUpstreamTimeout) || errors.Is(err, jsonrpc.ErrUpstreamUnavailable) {
		// Timeouts, and "upstream response too large", which the pool reports as
		// unavailable (it also covers a node down: the range then shrinks needlessly and
		// grows back after the node returns).
		return true
	}
	if je.Code == -32005 {
		return true
	}
	// What providers say of a query too large, or that it timed out (a range too slow to
	// serve).
	msg := strings.ToLower(je.Message)
	return upstreams.RangeRefusal(msg) || strings.Contains(msg, "timeout") || strings.Contains(msg, "timed out")
}
