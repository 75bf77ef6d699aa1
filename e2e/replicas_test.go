package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/jackc/pgx/v5"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/testengine"
)

// Several web3gate replicas on one PostgreSQL database (and one Redis), signing for one account
// whose key is in the store: nonces handed out by any of them are one contiguous sequence, and whatever a
// client was answered with a hash is mined.

// replicaMaxConns is each test replica's store pool: the shared PostgreSQL serves 100
// connections to every test running at once.
const replicaMaxConns = 8

// replicaConfig is gatewayConfig for a replica on the PostgreSQL database dsn: keys in the
// store, the dev chain off, the given wallet.transactions settings, and extra YAML appended.
func replicaConfig(dsn string, chainID uint64, transactions, extra string, urls ...string) string {
	return gatewayConfig(chainID, fmt.Sprintf(`
devchain: {enabled: false}
store:
  driver: postgres
  dsn: %s
  maxConns: %d
wallet:
  keys:
    backend: store
    lightScrypt: true
  transactions: %s
%s`, dsn, replicaMaxConns, transactions, extra), urls...)
}

// replicaSet is a PostgreSQL database, an anvil node and web3gate replicas on both, sharing
// one account of principal e2e whose key is in the store.
type replicaSet struct {
	node  *anvil.Node
	dsn   string
	acct  common.Address
	start uint64 // the account's nonce on anvil before the replicas sent anything
	gws   []*gateway
}

// newReplicaSet starts anvil on chainID, creates a database and the account in its store
// with `web3gate accounts new` (once: every replica finds it there), and gives the account
// funds and a starting nonce of 7 on anvil.
func newReplicaSet(t *testing.T, chainID uint64) *replicaSet {
	t.Helper()
	rs := &replicaSet{node: anvil.Start(t, chainID), dsn: testengine.Postgres(t)}
	t.Setenv("WEB3GATE_KEYSTORE_PASSPHRASE", signingPassphrase)
	rs.acct = newAccount(t, writeConfig(t, t.TempDir(), replicaConfig(rs.dsn, chainID, "{}", "", rs.node.URL)))
	fund(t, rs.node, rs.acct)
	// A nonce the account used before web3gate: the replicas start from the chain's.
	if _, err := rs.node.Call("anvil_setNonce", rs.acct.Hex(), "0x7"); err != nil {
		t.Fatalf("anvil_setNonce: %v", err)
	}
	rs.start = 7
	return rs
}

// startReplica starts one more replica (cluster.replicaId r<n>) with the given
// wallet.transactions settings and extra configuration, and waits until it is ready.
func (rs *replicaSet) startReplica(t *testing.T, transactions, extra string) *gateway {
	t.Helper()
	extra += fmt.Sprintf("cluster: {replicaId: r%d, leaseTimeout: %s}\n", len(rs.gws), replicaLeaseTimeout)
	g := startGateway(t, replicaConfig(rs.dsn, rs.node.ChainID, transactions, extra, rs.node.URL))
	waitReady(t, g)
	rs.gws = append(rs.gws, g)
	return g
}

// replicaLeaseTimeout is the replicas' cluster.leaseTimeout: a killed holder's jobs run on
// another replica within it (within 1.5 s for a kill -9, see docs/leases.md).
const replicaLeaseTimeout = 5 * time.Second

// startReplicas is newReplicaSet and n replicas.
func startReplicas(t *testing.T, n int, chainID uint64, transactions, extra string) *replicaSet {
	t.Helper()
	rs := newReplicaSet(t, chainID)
	for range n {
		rs.startReplica(t, transactions, extra)
	}
	return rs
}

// replicaClient speaks to the replicas with enough kept-alive connections for a burst.
var replicaClient = &http.Client{
	Transport: answers.Wrap(&http.Transport{Proxy: nil, MaxIdleConns: 512, MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second}),
	Timeout:   60 * time.Second,
}

// callH is call with replicaClient and extra headers (Idempotency-Key).
func callH(url string, headers map[string]string, method string, params ...any) (int, rpcReply, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return 0, rpcReply{}, err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, rpcReply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", "e2e")
	req.Header.Set("Authorization", "Bearer e2e-token")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := replicaClient.Do(req)
	if err != nil {
		return 0, rpcReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, rpcReply{}, err
	}
	var r rpcReply
	if err := json.Unmarshal(b, &r); err != nil {
		return resp.StatusCode, rpcReply{}, fmt.Errorf("HTTP %d, not a JSON-RPC response: %s", resp.StatusCode, b)
	}
	if r.Error == nil && r.Result == nil {
		return resp.StatusCode, rpcReply{}, fmt.Errorf("HTTP %d, neither result nor error: %s", resp.StatusCode, b)
	}
	return resp.StatusCode, r, nil
}

// burstResult is what a burst of requests got back.
type burstResult struct {
	mu      sync.Mutex
	results []string // hashes (send) or raw transactions (sign), in the order they came back
	failed  []string // the failures, as text
}

// burst sends total requests of method with txObject(acct) from workers goroutines, request i
// to replica i mod len(urls). stop, when it returns true, ends the burst early.
func burst(acct common.Address, urls []string, method string, total, workers int, stop func() bool) *burstResult {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		res  = &burstResult{}
	)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= total || stop != nil && stop() {
					return
				}
				code, r, err := callH(urls[i%len(urls)], nil, method, txObject(acct, i%2 == 0, nil))
				var s string
				res.mu.Lock()
				if err == nil && code == 200 && r.Error == nil && json.Unmarshal(r.Result, &s) == nil && strings.HasPrefix(s, "0x") {
					res.results = append(res.results, s)
				} else {
					res.failed = append(res.failed, fmt.Sprintf("replica %d: HTTP %d, %v, %v", i%len(urls), code, r, err))
				}
				res.mu.Unlock()
			}
		})
	}
	wg.Wait()
	return res
}

// waitMined waits until every hash has a successful receipt on node, clearing anvil's stuck
// pool when needed (anvilUnsticker); resend, when set, is called with the hashes still
// missing after each clearing (a client submitting its raw transactions again). It returns the
// unsticker, for callers that go on watching the pool.
func waitMined(t *testing.T, node *anvil.Node, acct common.Address, hashes []string, within time.Duration, resend func([]string), dump func(missing []string)) *anvilUnsticker {
	t.Helper()
	until := time.Now().Add(within)
	stuck := &anvilUnsticker{node: node, addr: acct}
	pending := slices.Clone(hashes)
	lastResend := time.Now()
	for len(pending) > 0 {
		cleared := stuck.cleared
		stuck.check(t)
		var still []string
		for _, h := range pending {
			rc := receiptOf(t, node, h)
			if rc == nil {
				still = append(still, h)
				continue
			}
			if rc.Status != "0x1" {
				t.Fatalf("%s mined with status %s", h, rc.Status)
			}
		}
		pending = still
		if len(pending) == 0 {
			return stuck
		}
		if resend != nil && (stuck.cleared != cleared || time.Since(lastResend) > 2*time.Second) {
			resend(pending)
			lastResend = time.Now()
		}
		if time.Now().After(until) {
			if dump != nil {
				dump(pending)
			}
			t.Fatalf("%d of %d hashes have no receipt within %v, e.g. %s", len(pending), len(hashes), within, pending[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	return stuck
}

// checkMinedNonces checks that the account's mined nonces on node from nonce from on are
// exactly from..to-1, each once, and that every hash of want is among them.
func checkMinedNonces(t *testing.T, node *anvil.Node, acct common.Address, from, to uint64, want []string) {
	t.Helper()
	all, byHash := accountNonces(t, node, acct)
	var nonces []uint64
	for _, n := range all {
		if n >= from {
			nonces = append(nonces, n)
		}
	}
	if uint64(len(nonces)) != to-from {
		t.Fatalf("%d transactions from the account in anvil's blocks, want %d (nonces %d..%d)", len(nonces), to-from, from, to-1)
	}
	for i, n := range nonces {
		if n != from+uint64(i) {
			t.Fatalf("nonce %d at position %d of the mined nonces: want %d..%d without gap or repeat", n, i, from, to-1)
		}
	}
	for _, h := range want {
		if _, ok := byHash[strings.ToLower(h)]; !ok {
			t.Fatalf("hash %s is not in any block", h)
		}
	}
}

// storeRow is one txs row of the store.
type storeRow struct {
	nonce       uint64
	kind, state string
	hash        string
}

// storeRows reads the account's transaction rows from the PostgreSQL store, by nonce and id.
func storeRows(t *testing.T, dsn string, acct common.Address) []storeRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to the store: %v", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT nonce, kind, state, COALESCE(hash, '') FROM txs
		WHERE lower(address) = lower($1) ORDER BY nonce, id`, acct.Hex())
	if err != nil {
		t.Fatalf("read the store: %v", err)
	}
	var out []storeRow
	for rows.Next() {
		var r storeRow
		var n int64
		if err := rows.Scan(&n, &r.kind, &r.state, &r.hash); err != nil {
			t.Fatalf("read the store: %v", err)
		}
		r.nonce = uint64(n)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read the store: %v", err)
	}
	return out
}

// checkStore checks the store's rows of acct from nonce from on: once every returned hash is
// mined or confirmed there, the live rows (not failed, released or abandoned) hold each nonce
// from..to-1 exactly once, and every hash of want is one of them.
func checkStore(t *testing.T, rs *replicaSet, from, to uint64, want []string, within time.Duration) {
	t.Helper()
	until := time.Now().Add(within)
	wanted := map[string]bool{}
	for _, h := range want {
		wanted[strings.ToLower(h)] = true
	}
	for {
		rows := storeRows(t, rs.dsn, rs.acct)
		live := map[uint64]storeRow{}
		var problems []string
		open := 0
		for _, r := range rows {
			if r.nonce < from || r.state == "failed" || r.state == "released" || r.state == "abandoned" {
				continue
			}
			if prev, dup := live[r.nonce]; dup {
				t.Fatalf("the store holds two live rows at nonce %d: %+v and %+v", r.nonce, prev, r)
			}
			live[r.nonce] = r
			if wanted[r.hash] && r.state != "mined" && r.state != "confirmed" {
				open++
			}
		}
		for n := from; n < to; n++ {
			if _, ok := live[n]; !ok {
				problems = append(problems, fmt.Sprintf("no live row at nonce %d", n))
			}
		}
		if uint64(len(live)) != to-from {
			problems = append(problems, fmt.Sprintf("%d live rows from nonce %d, want %d", len(live), from, to-from))
		}
		found := 0
		for _, r := range live {
			if wanted[r.hash] {
				found++
			}
		}
		if found != len(wanted) {
			problems = append(problems, fmt.Sprintf("%d of the %d returned hashes among the live rows", found, len(wanted)))
		}
		if open > 0 {
			problems = append(problems, fmt.Sprintf("%d returned transactions not mined in the store yet", open))
		}
		if len(problems) == 0 {
			return
		}
		if time.Now().After(until) {
			t.Fatalf("the store after %v: %s", within, strings.Join(problems, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// chainNonce is the account's nonce on node (latest block).
func chainNonce(t *testing.T, node *anvil.Node, acct common.Address) uint64 {
	t.Helper()
	return nodeUint(t, node, "eth_getTransactionCount", acct.Hex(), "latest")
}

func TestReplicasSend(t *testing.T) {
	const (
		chainID = 31337
		total   = 1000
		workers = 48
	)
	// The replicas share a Redis too (a prefix of the test's own on the shared one), as
	// deployed: the second cache level must not change what a send gets.
	redisURL, prefix := testengine.Redis(t)
	rs := startReplicas(t, 3, chainID, "{maxInFlight: 2000, pollInterval: 100ms, rebroadcastAfter: 2s}",
		fmt.Sprintf("redis: {url: %q, keyPrefix: %q}\n", redisURL, prefix))
	for i, g := range rs.gws {
		if up := metric(t, g, "web3gate_redis_up"); len(up) != 1 || !strings.HasSuffix(up[0], " 1") {
			t.Fatalf("replica %d: Redis not up: %v", i, up)
		}
	}
	var urls, chainURLs []string
	for _, g := range rs.gws {
		urls = append(urls, g.API+"/v1/web3/mainnet")
		chainURLs = append(chainURLs, g.API+fmt.Sprintf("/v1/web3/chains/%d", chainID))
	}

	t.Run("eth_sendTransaction", func(t *testing.T) {
		from := chainNonce(t, rs.node, rs.acct)
		if from != rs.start {
			t.Fatalf("the account's nonce on anvil is %d before any send, want %d", from, rs.start)
		}
		res := burst(rs.acct, urls, "eth_sendTransaction", total, workers, nil)
		if len(res.failed) > 0 {
			t.Fatalf("%d of %d sends failed; first: %s", len(res.failed), total, res.failed[0])
		}
		checkDistinct(t, res.results)
		waitMined(t, rs.node, rs.acct, res.results, 60*time.Second, nil, nil)
		checkMinedNonces(t, rs.node, rs.acct, from, from+total, res.results)
		checkStore(t, rs, from, from+total, res.results, 30*time.Second)
	})

	t.Run("eth_signTransaction", func(t *testing.T) {
		from := chainNonce(t, rs.node, rs.acct)
		// The caller submits each signed transaction to the node as it gets it back, from
		// its own workers, so out of nonce order now and then, and again later what is
		// not mined (what a wallet's retry does).
		var (
			mu     sync.Mutex
			raws   = map[string]string{} // hash -> raw
			submit = func(raw string) {
				_, _ = rs.node.Call("eth_sendRawTransaction", raw)
			}
		)
		var next atomic.Int64
		var wg sync.WaitGroup
		var failed []string
		for range workers {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= total {
						return
					}
					code, r, err := callH(chainURLs[i%len(chainURLs)], nil, "eth_signTransaction", txObject(rs.acct, i%2 == 0, nil))
					var raw hexutil.Bytes
					if err != nil || code != 200 || r.Error != nil || json.Unmarshal(r.Result, &raw) != nil {
						mu.Lock()
						failed = append(failed, fmt.Sprintf("replica %d: HTTP %d, %v, %v", i%len(chainURLs), code, r, err))
						mu.Unlock()
						continue
					}
					tx := new(types.Transaction)
					if err := tx.UnmarshalBinary(raw); err != nil {
						mu.Lock()
						failed = append(failed, fmt.Sprintf("replica %d: undecodable transaction: %v", i%len(chainURLs), err))
						mu.Unlock()
						continue
					}
					mu.Lock()
					raws[tx.Hash().Hex()] = raw.String()
					mu.Unlock()
					submit(raw.String())
				}
			})
		}
		wg.Wait()
		if len(failed) > 0 {
			t.Fatalf("%d of %d signings failed; first: %s", len(failed), total, failed[0])
		}
		hashes := slices.Collect(maps.Keys(raws))
		if len(hashes) != total {
			t.Fatalf("%d distinct transactions signed, want %d", len(hashes), total)
		}
		// Resubmitted in nonce order: what a client does for what the node does not have.
		resend := func(missing []string) {
			txs := make([]*types.Transaction, 0, len(missing))
			for _, h := range missing {
				tx := new(types.Transaction)
				_ = tx.UnmarshalBinary(hexutil.MustDecode(raws[h]))
				txs = append(txs, tx)
			}
			slices.SortFunc(txs, func(a, b *types.Transaction) int { return int(a.Nonce()) - int(b.Nonce()) })
			for _, tx := range txs {
				submit(raws[tx.Hash().Hex()])
			}
		}
		waitMined(t, rs.node, rs.acct, hashes, 60*time.Second, resend, nil)
		checkMinedNonces(t, rs.node, rs.acct, from, from+total, hashes)
		checkStore(t, rs, from, from+total, hashes, 30*time.Second)
	})

	t.Run("Idempotency-Key on two replicas at once", func(t *testing.T) {
		const rounds = 20
		from := chainNonce(t, rs.node, rs.acct)
		var hashes []string
		for round := range rounds {
			key := fmt.Sprintf("replicas-%d-%d", time.Now().UnixNano(), round)
			obj := txObject(rs.acct, true, map[string]any{"value": hexutil.EncodeUint64(uint64(1000 + round))})
			a, b := rs.gws[round%3], rs.gws[(round+1)%3]
			var got [2]struct {
				code int
				r    rpcReply
				err  error
			}
			ready := make(chan struct{})
			var wg sync.WaitGroup
			for i, g := range []*gateway{a, b} {
				wg.Go(func() {
					<-ready
					got[i].code, got[i].r, got[i].err = callH(g.API+"/v1/web3/mainnet", map[string]string{"Idempotency-Key": key}, "eth_sendTransaction", obj)
				})
			}
			close(ready)
			wg.Wait()
			var hs [2]string
			for i := range got {
				if got[i].err != nil || got[i].code != 200 || got[i].r.Error != nil || json.Unmarshal(got[i].r.Result, &hs[i]) != nil {
					t.Fatalf("round %d, replica answer %d: HTTP %d, %v, %v", round, i, got[i].code, got[i].r, got[i].err)
				}
			}
			if hs[0] != hs[1] {
				t.Fatalf("round %d: the two replicas answered %s and %s for one Idempotency-Key", round, hs[0], hs[1])
			}
			hashes = append(hashes, hs[0])
		}
		checkDistinct(t, hashes)
		waitMined(t, rs.node, rs.acct, hashes, 30*time.Second, nil, nil)
		checkMinedNonces(t, rs.node, rs.acct, from, from+rounds, hashes)
		checkStore(t, rs, from, from+rounds, hashes, 30*time.Second)
	})
}

// checkDistinct fails when two requests were answered with one hash.
func checkDistinct(t *testing.T, hashes []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, h := range hashes {
		if seen[h] {
			t.Fatalf("two requests were answered with the same hash %s", h)
		}
		seen[h] = true
	}
}

// TestReplicasInFlightCap: two replicas with a small in-flight cap (maxInFlight 4, the
// confirmer polling every 500 ms): 200 concurrent sends over both queue for slots that only
// the replica holding the confirmer's lease frees; the other's waiting sends see them by
// reading the store. Every send gets a hash, and the nonces are contiguous.
func TestReplicasInFlightCap(t *testing.T) {
	const (
		chainID = 31337
		total   = 200
		workers = 16
	)
	rs := startReplicas(t, 2, chainID, "{maxInFlight: 4, pollInterval: 500ms, inFlightWait: 60s}", "")
	urls := []string{rs.gws[0].API + "/v1/web3/mainnet", rs.gws[1].API + "/v1/web3/mainnet"}
	from := chainNonce(t, rs.node, rs.acct)
	res := burst(rs.acct, urls, "eth_sendTransaction", total, workers, nil)
	if len(res.failed) > 0 {
		t.Fatalf("%d of %d sends failed; first: %s", len(res.failed), total, res.failed[0])
	}
	checkDistinct(t, res.results)
	waitMined(t, rs.node, rs.acct, res.results, 60*time.Second, nil, nil)
	checkMinedNonces(t, rs.node, rs.acct, from, from+total, res.results)
	checkStore(t, rs, from, from+total, res.results, 30*time.Second)
	held := 0
	for _, g := range rs.gws {
		if leaseHeld(t, g, fmt.Sprintf("confirmer/%d", chainID)) {
			held++
		}
	}
	if held != 1 {
		t.Fatalf("%d replicas run the confirmer, want 1", held)
	}
}
