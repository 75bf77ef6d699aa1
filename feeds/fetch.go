package feeds

import (
	"context"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/upstreams"
)

// The upstream methods of a feed (the method label of web3gate_feed_upstream_calls_total).
const (
	methodBlockByNumber = "eth_getBlockByNumber"
	methodBlockByHash   = "eth_getBlockByHash"
	methodGetLogs       = "eth_getLogs"
)

// maxBatch is the most calls one upstream batch of a feed holds (providers commonly refuse
// batches over 100).
const maxBatch = 50

func blockByNumberCall(n uint64) upstreams.BatchCall {
	return upstreams.BatchCall{Method: methodBlockByNumber, Params: []byte(`["` + hexutil.EncodeUint64(n) + `",false]`)}
}

var latestCall = upstreams.BatchCall{Method: methodBlockByNumber, Params: []byte(`["latest",false]`)}

func blockByHashCall(h common.Hash) upstreams.BatchCall {
	return upstreams.BatchCall{Method: methodBlockByHash, Params: []byte(`["` + h.Hex() + `",false]`)}
}

func logsByHashCall(h common.Hash) upstreams.BatchCall {
	return upstreams.BatchCall{Method: methodGetLogs, Params: []byte(`[{"blockHash":"` + h.Hex() + `"}]`)}
}

func logsRangeCall(from, to uint64) upstreams.BatchCall {
	return upstreams.BatchCall{Method: methodGetLogs, Params: []byte(`[{"fromBlock":"` + hexutil.EncodeUint64(from) + `","toBlock":"` + hexutil.EncodeUint64(to) + `"}]`)}
}

// batch sends calls to the chain in one round trip, counting them.
func (f *Feed) batch(ctx context.Context, calls []upstreams.BatchCall) ([]upstreams.BatchResult, error) {
	for _, c := range calls {
		f.m.call(c.Method)
	}
	return f.chain.ForwardBatch(ctx, calls)
}

// latest asks for the chain's latest block (one call).
func (f *Feed) latest(ctx context.Context) (*Block, error) {
	f.m.call(methodBlockByNumber)
	res, err := f.chain.Forward(ctx, latestCall.Method, latestCall.Params)
	if err != nil {
		return nil, err
	}
	b, err := parseBlock(res)
	if err == nil && b == nil {
		err = fmt.Errorf("%w: no latest block", errNotYet)
	}
	return b, err
}

// fetchRun reads blocks from..to (to-from+1 <= maxBatch-1) in one round trip, with their
// logs when withLogs (one eth_getLogs over the range, checked against the blocks' hashes;
// the blocks whose logs do not check out get theirs by hash in a second round trip). The
// blocks follow each other; the answer stops before the first block the node does not have
// or that does not follow the one before (a reorg under way): the next round reads on
// from there. top, when not nil, is block to already read (the latest): it is not asked
// again, and is kept only if block to-1 is its parent.
func (f *Feed) fetchRun(ctx context.Context, from, to uint64, top *Block, withLogs bool) ([]*Block, error) {
	count := int(to - from + 1)
	ask := count // blocks asked for: from .. from+ask-1
	if top != nil {
		ask--
	}
	calls := make([]upstreams.BatchCall, 0, ask+1)
	for i := 0; i < ask; i++ {
		calls = append(calls, blockByNumberCall(from+uint64(i)))
	}
	if withLogs {
		calls = append(calls, logsRangeCall(from, to))
	}
	var res []upstreams.BatchResult
	if len(calls) > 0 {
		var err error
		if res, err = f.batch(ctx, calls); err != nil {
			return nil, err
		}
	}
	blocks := make([]*Block, 0, count)
	for i := 0; i < ask; i++ {
		r := res[i]
		if r.Err != nil {
			return nil, r.Err
		}
		b, err := parseBlock(r.Result)
		if err != nil {
			return nil, err
		}
		if b == nil || b.Number != from+uint64(i) || (i > 0 && b.ParentHash != blocks[i-1].Hash) {
			break
		}
		blocks = append(blocks, b)
	}
	if top != nil && len(blocks) == ask && (ask == 0 || top.ParentHash == blocks[ask-1].Hash) {
		blocks = append(blocks, top)
	}
	if !withLogs || len(blocks) == 0 {
		return blocks, nil
	}
	lr := res[len(res)-1]
	if lr.Err != nil {
		return nil, lr.Err
	}
	logs, err := parseLogs(lr.Result)
	if err != nil {
		return nil, err
	}
	return f.attachLogs(ctx, blocks, logs)
}

// attachLogs gives each of blocks (ascending) its logs from logs (an eth_getLogs answer over
// their range): the logs of its number whose blockHash is its hash. A block for which logs
// of another hash came, or none although its logsBloom is not empty, gets its logs by hash
// in one more round trip.
func (f *Feed) attachLogs(ctx context.Context, blocks []*Block, logs []rawLog) ([]*Block, error) {
	first := blocks[0].Number
	byBlock := make([][]rawLog, len(blocks))
	mismatch := make([]bool, len(blocks))
	for _, l := range logs {
		if l.number < first || l.number >= first+uint64(len(blocks)) {
			continue
		}
		i := l.number - first
		if l.blockHash != blocks[i].Hash {
			mismatch[i] = true
			continue
		}
		byBlock[i] = append(byBlock[i], l)
	}
	var again []int
	for i, b := range blocks {
		if mismatch[i] || (len(byBlock[i]) == 0 && !b.bloomEmpty) {
			again = append(again, i)
			continue
		}
		blocks[i] = withLogs(b, byBlock[i])
	}
	if len(again) == 0 {
		return blocks, nil
	}
	some := make([]*Block, len(again))
	for k, i := range again {
		some[k] = blocks[i]
	}
	filled, err := f.logsByHash(ctx, some)
	if err != nil {
		return nil, err
	}
	for k, i := range again {
		blocks[i] = filled[k]
	}
	return blocks, nil
}

// logsByHash returns copies of blocks with their logs, read by block hash (one eth_getLogs
// per block, maxBatch to a round trip). An answer naming another block is an error.
func (f *Feed) logsByHash(ctx context.Context, blocks []*Block) ([]*Block, error) {
	out := make([]*Block, len(blocks))
	for start := 0; start < len(blocks); start += maxBatch {
		end := min(start+maxBatch, len(blocks))
		calls := make([]upstreams.BatchCall, 0, end-start)
		for _, b := range blocks[start:end] {
			calls = append(calls, logsByHashCall(b.Hash))
		}
		res, err := f.batch(ctx, calls)
		if err != nil {
			return nil, err
		}
		for k, r := range res {
			b := blocks[start+k]
			if r.Err != nil {
				return nil, fmt.Errorf("logs of block %d: %w", b.Number, r.Err)
			}
			logs, err := parseLogs(r.Result)
			if err != nil {
				return nil, err
			}
			for _, l := range logs {
				if l.blockHash != b.Hash || l.number != b.Number {
					return nil, fmt.Errorf("%w: logs of another block than %d", errInconsistent, b.Number)
				}
			}
			out[start+k] = withLogs(b, logs)
		}
	}
	return out, nil
}

// headers reads blocks from..to (to-from+1 <= maxBatch) in one round trip, all of them and
// following each other, else errNotYet or errInconsistent.
func (f *Feed) headers(ctx context.Context, from, to uint64) ([]*Block, error) {
	blocks, err := f.fetchRun(ctx, from, to, nil, false)
	if err != nil {
		return nil, err
	}
	if len(blocks) != int(to-from+1) {
		return nil, fmt.Errorf("%w: blocks %d to %d changed while read", errNotYet, from, to)
	}
	return blocks, nil
}
