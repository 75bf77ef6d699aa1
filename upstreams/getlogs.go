package upstreams

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/internal/rpchex"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// eth_getLogs over large ranges. A filter's block range (fromBlock..toBlock, tags resolved
// against the pool's head: latest and pending are the head, earliest is 0, an absent bound
// is latest) larger than upstreams.getLogs.maxRange is refused with -32005 naming both
// sizes. A range larger than the chunk size is split into chunks of that size, fetched
// getLogs.concurrency at a time (each as a read of its own: failover, hedging) and joined
// in order into one array, at most maxResponseBytes long.
//
// A node's refusal is read with the table of getlogs_refusals.go. Only a refusal of the
// query's size (range too large, too many results) makes the range be halved and fetched
// again; any other error (past the head, invalid params, a rate limit, anything unknown) is
// the client's answer, as the node gave it. A "range too large" refusal is the node's own
// bound: that node gets chunks of the halved size from then on (never below
// getLogs.minChunkSize), and the size doubles back toward getLogs.chunkSize every
// getLogs.recoverEvery. A "too many results" refusal depends on the query (its addresses and
// topics), so it splits that call only and teaches nothing: no client's query changes what
// another's costs. A range within the chunk size goes as the client sent it, and is split
// only if refused. Chunks cover the range up to the pool's head (see logsQuery); a range that
// starts past it goes as it came. Never split: the blockHash form, ranges bounded by safe or
// finalized (the pool does not know those blocks), malformed bounds (the node answers them)
// and calls in a ForwardBatch.

// maxLogsChunks bounds the chunks of one call: a range that the nodes' learned chunk size
// would cut into more is refused, like one over maxRange.
const maxLogsChunks = 10_000

// logsConf is one pool's eth_getLogs splitting.
type logsConf struct {
	cfg   GetLogsConfig
	limit int        // maxResponseBytes of a joined answer
	spans []nodeSpan // learned chunk size by node index
	now   func() time.Time

	split, chunks, halvings prometheus.Counter
}

// nodeSpan is the chunk size learned of one node: size blocks (0: none learned) since at.
type nodeSpan struct {
	mu   sync.Mutex
	size uint64
	at   time.Time
}

func newLogsConf(cfg GetLogsConfig, limit, nodes int, m *metrics, chain string) *logsConf {
	return &logsConf{cfg: cfg, limit: limit, spans: make([]nodeSpan, nodes), now: time.Now,
		split: m.logsSplit.WithLabelValues(chain), chunks: m.logsChunks.WithLabelValues(chain),
		halvings: m.logsHalving.WithLabelValues(chain)}
}

// span is the chunk size for n (nil: none known): the size learned of it, doubled once per
// recoverEvery since it was learned, at most chunkSize.
func (l *logsConf) span(n *node) uint64 {
	if n == nil {
		return l.cfg.ChunkSize
	}
	s := &l.spans[nodeIndex(n)]
	s.mu.Lock()
	defer s.mu.Unlock()
	return l.recovered(s)
}

// recovered is s's size now (s locked).
func (l *logsConf) recovered(s *nodeSpan) uint64 {
	if s.size == 0 || s.size >= l.cfg.ChunkSize {
		return l.cfg.ChunkSize
	}
	size := s.size
	for steps := l.now().Sub(s.at) / l.cfg.RecoverEvery; steps > 0 && size < l.cfg.ChunkSize; steps-- {
		size *= 2
	}
	return min(size, l.cfg.ChunkSize)
}

// halve records that n refused a range of size blocks for reason r (a TooLarge kind) and
// returns the chunk size to use for the rest of this call: half of it. Only a refusal of the
// range teaches n's chunk size: half of the refused size, not below minChunkSize, unless n
// already takes less.
func (l *logsConf) halve(n *node, size uint64, r LogsRefusal) uint64 {
	half := max(1, size/2)
	l.halvings.Inc()
	if n == nil || r != RefusalRangeTooLarge {
		return half
	}
	learned := max(half, min(l.cfg.MinChunkSize, l.cfg.ChunkSize))
	s := &l.spans[nodeIndex(n)]
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.recovered(s) <= learned {
		return half
	}
	s.size, s.at = learned, l.now()
	n.log.Info("upstream node refused an eth_getLogs range as too large; it gets smaller chunks for a while",
		zap.Uint64("refused_blocks", size), zap.Uint64("chunk_blocks", learned))
	return half
}

// logsQuery is a split-able eth_getLogs filter: its numeric range and its other members.
// Chunks cover from..last, the part of the range at or below the pool's head; the chunk that
// ends at last asks up to the client's toBlock, so that a node past the pool's head (polled
// a moment ago) answers for the blocks it has, as it would unsplit.
type logsQuery struct {
	rest     map[string]json.RawMessage // the filter less fromBlock and toBlock
	from, to uint64
	last     uint64 // min(to, the pool's head)
}

// params are the call's params for blocks from..to. The members come from a decoded filter,
// so they encode again; an error would be invalid params.
func (q *logsQuery) params(from, to uint64) ([]byte, error) {
	f := maps.Clone(q.rest)
	f["fromBlock"] = json.RawMessage(`"0x` + strconv.FormatUint(from, 16) + `"`)
	f["toBlock"] = json.RawMessage(`"0x` + strconv.FormatUint(to, 16) + `"`)
	b, err := json.Marshal([1]map[string]json.RawMessage{f})
	if err != nil {
		return nil, jsonrpc.ErrInvalidParams.With("eth_getLogs filter: " + err.Error())
	}
	return b, nil
}

// Errors of eth_getLogs besides the pool's. -32005 "limit exceeded" (EIP-1474) with HTTP
// 200, as the nodes and providers refuse log queries: the request is valid but over a
// limit, and retrying it as is cannot help (not 429).
var errLogsLimit = &jsonrpc.Error{Code: jsonrpc.ErrLimitExceeded.Code, Message: "limit exceeded", HTTPStatus: 200}

func errRangeTooLarge(size, limit uint64) *jsonrpc.Error {
	return errLogsLimit.Withf("block range too large: %d blocks, at most %d", size, limit)
}

func errLogsTooLarge(limit int) *jsonrpc.Error {
	return errLogsLimit.Withf("eth_getLogs result too large: more than %d bytes; query fewer blocks, addresses or topics", limit)
}

var errLogsNotArray = jsonrpc.ErrUpstreamUnavailable.With("upstream eth_getLogs answer is not an array")

// logsQueryOf reads the params of eth_getLogs; ok false when they are not to be split
// (forwarded as they are), err when the range is over maxRange.
func (p *Pool) logsQueryOf(params []byte) (q logsQuery, ok bool, err error) {
	var args []json.RawMessage
	if json.Unmarshal(params, &args) != nil || len(args) != 1 {
		return q, false, nil
	}
	// Members are matched without regard to case, as go-ethereum reads the filter.
	var f struct {
		BlockHash json.RawMessage `json:"blockHash"`
		FromBlock json.RawMessage `json:"fromBlock"`
		ToBlock   json.RawMessage `json:"toBlock"`
	}
	if json.Unmarshal(args[0], &f) != nil || json.Unmarshal(args[0], &q.rest) != nil || q.rest == nil {
		return q, false, nil
	}
	if len(f.BlockHash) > 0 && string(f.BlockHash) != "null" {
		return q, false, nil
	}
	head := p.Head()
	from, okFrom := resolveBlock(f.FromBlock, head)
	to, okTo := resolveBlock(f.ToBlock, head)
	if !okFrom || !okTo || from > to || head != 0 && from > head {
		// Nothing to split: the node answers (an error for a range past its head).
		return q, false, nil
	}
	if size := to - from + 1; size > p.logs.cfg.MaxRange || size == 0 {
		return q, false, errRangeTooLarge(to-from+1, p.logs.cfg.MaxRange)
	}
	for k := range q.rest {
		if strings.EqualFold(k, "fromBlock") || strings.EqualFold(k, "toBlock") || strings.EqualFold(k, "blockHash") {
			delete(q.rest, k)
		}
	}
	q.from, q.to, q.last = from, to, to
	if head != 0 && to > head {
		q.last = head
	}
	return q, true, nil
}

// resolveBlock reads a filter's block bound: ok false when it is not a number the pool can
// resolve (safe, finalized, malformed, or latest before any head is known).
func resolveBlock(raw json.RawMessage, head uint64) (uint64, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`"latest"`)
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, false
	}
	switch s {
	case "latest", "pending":
		return head, head != 0
	case "earliest":
		return 0, true
	}
	if len(s) > 3 && s[2] == '0' {
		return 0, false // leading zeros: the node refuses them, let it say so
	}
	v, err := rpchex.Quantity(s)
	return v, err == nil
}

// getLogs is Forward for eth_getLogs.
func (p *Pool) getLogs(ctx context.Context, params []byte) ([]byte, error) {
	q, ok, err := p.logsQueryOf(params)
	if err != nil {
		return nil, err
	}
	if !ok {
		res, _, err := p.forward(ctx, "eth_getLogs", params)
		return res, err
	}
	span := p.logs.span(p.pick(0))
	if q.last-q.from < span {
		res, n, err := p.forward(ctx, "eth_getLogs", params)
		r := logsRefusal(err)
		if err == nil || q.from == q.last || !r.TooLarge() {
			return res, err
		}
		span = p.logs.halve(n, q.last-q.from+1, r)
	}
	return p.splitLogs(ctx, &q, span)
}

// splitLogs fetches q's range (from..last) in chunks of span blocks, getLogs.concurrency at a time, and
// joins their logs in order. The first failure cancels the chunks not yet fetched.
func (p *Pool) splitLogs(ctx context.Context, q *logsQuery, span uint64) ([]byte, error) {
	chunks := (q.last-q.from)/span + 1
	if chunks > maxLogsChunks {
		return nil, errLogsLimit.Withf("block range too large: %d blocks, at most %d in chunks of %d the nodes take",
			q.to-q.from+1, maxLogsChunks*span, span)
	}
	p.logs.split.Inc()
	n := int(chunks)
	parts := make([][]byte, n)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		total    atomic.Int64
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= n || ctx.Err() != nil {
				return
			}
			from := q.from + uint64(i)*span
			to := min(from+span-1, q.last)
			res, err := p.fetchLogs(ctx, q, from, to, to == q.last && q.to > q.last)
			if err != nil {
				fail(err)
				return
			}
			if total.Add(int64(len(res))) > int64(p.logs.limit) {
				fail(errLogsTooLarge(p.logs.limit))
				return
			}
			parts[i] = res
		}
	}
	for range min(n, p.logs.cfg.Concurrency) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return joinLogs(parts, p.logs.limit)
}

// fetchLogs fetches q's logs of blocks from..to in one call, or, when the node refuses the
// range as too large, in halves. open: the call asks up to the client's toBlock, past the
// pool's head (to); refused, it asks up to to before it halves.
func (p *Pool) fetchLogs(ctx context.Context, q *logsQuery, from, to uint64, open bool) ([]byte, error) {
	upTo := to
	if open {
		upTo = q.to
	}
	params, err := q.params(from, upTo)
	if err != nil {
		return nil, err
	}
	res, n, err := p.forward(ctx, "eth_getLogs", params)
	p.logs.chunks.Inc()
	r := logsRefusal(err)
	switch {
	case err == nil || !r.TooLarge():
		return res, err
	case open:
		return p.fetchLogs(ctx, q, from, to, false)
	case from == to:
		return nil, err
	}
	half := p.logs.halve(n, to-from+1, r)
	a, err := p.fetchLogs(ctx, q, from, from+half-1, false)
	if err != nil {
		return nil, err
	}
	b, err := p.fetchLogs(ctx, q, from+half, to, false)
	if err != nil {
		return nil, err
	}
	return joinLogs([][]byte{a, b}, p.logs.limit)
}

// joinLogs joins JSON arrays into one; an error when one is not an array (null counts as
// empty) or the result is over limit bytes.
func joinLogs(parts [][]byte, limit int) ([]byte, error) {
	size := 2
	for _, b := range parts {
		size += len(b)
	}
	out := make([]byte, 0, size)
	out = append(out, '[')
	empty := true
	for _, b := range parts {
		inner, ok := arrayContents(b)
		if !ok {
			return nil, errLogsNotArray
		}
		if len(inner) == 0 {
			continue
		}
		if !empty {
			out = append(out, ',')
		}
		out, empty = append(out, inner...), false
	}
	out = append(out, ']')
	if len(out) > limit {
		return nil, errLogsTooLarge(limit)
	}
	return out, nil
}

// arrayContents returns what lies between the brackets of a JSON array, trimmed of
// whitespace; "null" has none.
func arrayContents(b []byte) ([]byte, bool) {
	b = trimJSONSpace(b)
	if string(b) == "null" {
		return nil, true
	}
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, false
	}
	return trimJSONSpace(b[1 : len(b)-1]), true
}

func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
