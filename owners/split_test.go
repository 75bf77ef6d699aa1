package owners

import (
	"bytes"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// refusingNode is a real HTTP server in front of a node that answers eth_getLogs over more
// than maxRange blocks with -32005 "query returned more than 10000 results", as Infura does,
// and passes everything else on. Accepted eth_getLogs answers are delayed by delay.
type refusingNode struct {
	next     http.Handler
	maxRange uint64
	delay    time.Duration
	refused  atomic.Int64
	served   atomic.Int64
}

type rpcReq struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params []struct {
		FromBlock hexutil.Uint64 `json:"fromBlock"`
		ToBlock   hexutil.Uint64 `json:"toBlock"`
	} `json:"params"`
}

func (n *refusingNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var batch []json.RawMessage
	if json.Unmarshal(body, &batch) != nil {
		batch = nil // a single call: eth_chainId, eth_blockNumber
	}
	refuse := map[string]bool{}
	logs := false
	for _, raw := range batch {
		var q rpcReq
		if json.Unmarshal(raw, &q) != nil || q.Method != "eth_getLogs" {
			continue // eth_getBlockByNumber's params are not a filter
		}
		logs = true
		if len(q.Params) == 1 && uint64(q.Params[0].ToBlock-q.Params[0].FromBlock)+1 > n.maxRange {
			refuse[string(q.ID)] = true
		}
	}
	rec := httptest.NewRecorder()
	fwd := r.Clone(r.Context())
	fwd.Body = io.NopCloser(bytes.NewReader(body))
	n.next.ServeHTTP(rec, fwd)
	out := rec.Body.Bytes()
	switch {
	case len(refuse) > 0:
		n.refused.Add(1)
		var answers []map[string]json.RawMessage
		if err := json.Unmarshal(out, &answers); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for _, a := range answers {
			if refuse[string(a["id"])] {
				delete(a, "result")
				a["error"] = json.RawMessage(`{"code":-32005,"message":"query returned more than 10000 results"}`)
			}
		}
		out, _ = json.Marshal(answers)
	case logs:
		n.served.Add(1)
		time.Sleep(n.delay)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// TestRefusedRangesAreSplit: behind a node that refuses eth_getLogs over more than 2 blocks,
// a backfill of 25 blocks of mints still indexes every one, halving its ranges, and logs its
// progress with blocks/s and an ETA.
func TestRefusedRangesAreSplit(t *testing.T) {
	dev, chain := devNode(t)
	proxy := &refusingNode{next: chain.Handler(), maxRange: 2, delay: 100 * time.Millisecond}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	node := &chainNode{chainID: dev.chainID, url: srv.URL, client: dev.client}
	cfg := testChainConfig(node.chainID)
	cfg.MaxBlockRange = 4
	e := newEnv(t, node, &cfg)

	tr := newTracked(e.addrs)
	nft := e.deploy(erc721C, "Alpha", "A")
	for i := range 20 {
		id := big.NewInt(int64(i + 1))
		e.transact(0, erc721C, nft, "mint", e.addrs[i%4], id)
		tr.addID(tr.erc721, nft, id)
		tr.minted[nft]++
	}
	multi := e.deploy(erc1155C, "Multi", "M", "")
	for i := range 3 {
		e.transact(0, erc1155C, multi, "mintBatch", e.addrs[i], ids(1, 2), ids(int64(i+1), 9))
	}
	tr.addID(tr.erc1155, multi, big.NewInt(1))
	tr.addID(tr.erc1155, multi, big.NewInt(2))
	tr.minted[multi] = 1 + 2 + 3 + 27

	e.start()
	e.check(tr)
	chainName := e.ups.Pools()[0].Name()
	if splits := e.counter("web3gate_owners_range_splits_total", map[string]string{"chain": chainName}); splits < 2 || proxy.refused.Load() < 2 {
		t.Errorf("range splits = %v, refusals = %d; want at least 2 of each", splits, proxy.refused.Load())
	}
	var progress, started, caughtUp bool
	for _, l := range e.logs.All() {
		fields := l.ContextMap()
		switch l.Message {
		case "owners index: backfill progress":
			_, hasRate := fields["blocks_per_s"]
			_, hasETA := fields["eta"]
			progress = progress || (hasRate && hasETA && fields["chain"] == chainName)
		case "owners index: backfill started":
			started = true
		case "owners index: backfill caught up":
			caughtUp = fields["logs"] == int64(23)
		}
	}
	if !started || !progress || !caughtUp {
		t.Errorf("backfill logs: started %v, progress with blocks_per_s and eta %v, caught up with 23 logs %v:\n%s",
			started, progress, caughtUp, strings.Join(e.logsSeen(), "\n"))
	}
	if slices.Contains(e.logsSeen(), "owners index: round failed; retrying") {
		t.Errorf("a refusal failed a round instead of splitting it: %v", e.logsSeen())
	}
}

// TestRangeRefused: which errors of a fetch halve the range.
func TestRangeRefused(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{rpcError(-32005, "query returned more than 10000 results. Try with this block range [0x1, 0x2]."), true},
		{rpcError(-32602, "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range"), true},
		{rpcError(-32000, "block range is too large"), true},
		{rpcError(-32000, "exceed maximum block range: 5000"), true},
		{rpcError(-32000, "query timeout exceeded"), true},
		{rpcError(-32000, "response is too big"), true},
		{upstreamTimeout(), true},
		{upstreamTooLarge(), true},
		{rpcError(-32000, "header not found"), false},
		{rpcError(-32601, "the method eth_getLogs does not exist/is not available"), false},
		{errInconsistent, false},
		{errNotYet, false},
	} {
		t.Run(c.err.Error(), func(t *testing.T) {
			if got := rangeRefused(c.err); got != c.want {
				t.Errorf("rangeRefused = %v, want %v", got, c.want)
			}
		})
	}
}

func rpcError(code int, msg string) error { return &jsonrpc.Error{Code: code, Message: msg} }

func upstreamTimeout() error { return jsonrpc.ErrUpstreamTimeout }

// upstreamTooLarge is how the pool reports an answer over upstreams.maxResponseBytes.
func upstreamTooLarge() error {
	return jsonrpc.ErrUpstreamUnavailable.With("upstream response too large")
}
