package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/devchain"
	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/internal/wait"
)

// countedChain is a dev chain served over real HTTP, counting the JSON-RPC calls of each
// method (batches counted call by call): the upstream that several web3gate replicas share.
type countedChain struct {
	URL     string
	ChainID uint64
	chain   *devchain.Chain
	mu      sync.Mutex
	counts  map[string]int
}

func newCountedChain(t *testing.T) *countedChain {
	t.Helper()
	dc, err := devchain.Start(devchain.Config{}, devchain.Deps{Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dc.Close() })
	c := &countedChain{ChainID: dc.ChainID(), chain: dc, counts: map[string]int{}}
	h := dc.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		var calls []struct{ Method string }
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
			_ = json.Unmarshal(body, &calls)
		} else {
			calls = make([]struct{ Method string }, 1)
			_ = json.Unmarshal(body, &calls[0])
		}
		c.mu.Lock()
		for _, call := range calls {
			c.counts[call.Method]++
		}
		c.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

func (c *countedChain) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[method]
}

// replicaConfig is a web3gate replica of a deployment: the counted chain as its only
// upstream (no embedded dev chain: Redis holds only chains the replicas share), Redis at
// redisURL under prefix, the test credentials.
func replicaConfig(up *countedChain, redisURL, prefix, extra string) string {
	return fmt.Sprintf(`
log: {level: warn}
auth:
  clients: [{id: test-client}]
  tokens:
    - sha256: %s
      principal: tester
upstreams:
  mainnet: %d
  timeout: 2s
  pollInterval: 100ms
  chains:
    - chainId: %d
      name: shared
      urls: [%s]
devchain:
  enabled: false
redis:
  url: %s
  keyPrefix: %q
  backoff: 100ms
  maxBackoff: 400ms
%s`, sha256Hex("test-token"), up.ChainID, up.ChainID, up.URL, redisURL, prefix, extra)
}

// genesisHash is the hash of block 0 of the counted chain, read from it directly.
func (c *countedChain) genesisHash(t *testing.T) string {
	t.Helper()
	resp, err := http.Post(c.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x0",false]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct{ Result struct{ Hash string } }
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Result.Hash == "" {
		t.Fatalf("genesis block: %v", err)
	}
	return r.Result.Hash
}

const blockByHashHit = `web3gate_cache_redis_lookups_total{method="eth_getBlockByHash",result="hit"}`

// TestReplicasShareRedis: two replicas on one Redis. A block fetched through A is answered
// by B from Redis, without an upstream call, and so is a token record (REST), without a
// chain read; both report Redis in /readyz.
func TestReplicasShareRedis(t *testing.T) {
	up := newCountedChain(t)
	redisURL, prefix := testengine.Redis(t)
	cfg := replicaConfig(up, redisURL, prefix, "")
	a, b := startServer(t, cfg), startServer(t, cfg)

	hash := up.genesisHash(t)
	req := `{"jsonrpc":"2.0","id":7,"method":"eth_getBlockByHash","params":["` + hash + `",false]}`
	_, _, fromA := post(t, a.API+"/v1/web3/mainnet", req)
	if !strings.Contains(string(fromA), `"hash":"`+hash+`"`) {
		t.Fatalf("A answered %s", fromA)
	}
	if n := up.count("eth_getBlockByHash"); n != 1 {
		t.Fatalf("%d upstream calls after A, want 1", n)
	}
	// A writes Redis in the background, after answering.
	wait.For(t, "A's fill in Redis", func() bool {
		keys, _ := testengine.RedisKeys(testengine.RedisAddr(), prefix+"rc:")
		return len(keys) == 1
	})
	_, _, fromB := post(t, b.API+"/v1/web3/mainnet", req)
	if !bytes.Equal(fromA, fromB) {
		t.Fatalf("B answered\n%s\nA\n%s", fromB, fromA)
	}
	if n := up.count("eth_getBlockByHash"); n != 1 {
		t.Fatalf("%d upstream calls after B, want 1: B's answer comes from Redis", n)
	}
	if got := metric(t, b.Admin, blockByHashHit); got != 1 {
		t.Fatalf("B's Redis hits %v, want 1", got)
	}

	// A token record: A reads the chain, B reads Redis.
	addr := deployOnChainNFT(t, up)
	path := "/v1/tokens/60/" + fmt.Sprint(up.ChainID) + "/" + strings.ToLower(addr.Hex()) + "/1"
	status, tokA := get(t, a.API+path)
	if status != http.StatusOK || !strings.Contains(tokA, `"OnChain #1"`) {
		t.Fatalf("A: HTTP %d %s", status, tokA)
	}
	wait.For(t, "A's record in Redis", func() bool {
		keys, _ := testengine.RedisKeys(testengine.RedisAddr(), prefix+"md:")
		return len(keys) == 1
	})
	calls := up.count("eth_call")
	status, tokB := get(t, b.API+path)
	if status != http.StatusOK || tokA != tokB {
		t.Fatalf("B: HTTP %d %s\nA: %s", status, tokB, tokA)
	}
	if n := up.count("eth_call") - calls; n != 0 {
		t.Fatalf("B made %d eth_calls, want 0: the record comes from Redis", n)
	}

	for _, ts := range []*testServer{a, b} {
		if code, body := get(t, ts.Admin+"/readyz"); code != 200 || !strings.HasPrefix(body, `{"status":"ok",`) || !strings.Contains(body, `"redis":"up"}`) {
			t.Errorf("readyz %d %s", code, body)
		}
		if got := metric(t, ts.Admin, "web3gate_redis_up"); got != 1 {
			t.Errorf("web3gate_redis_up %v", got)
		}
	}
}

// deployOnChainNFT deploys an OnChainERC721 on the counted chain directly (dev account 3)
// and mints its token 1.
func deployOnChainNFT(t *testing.T, up *countedChain) common.Address {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := ethclient.Dial(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	accounts, err := devchain.DevAccounts(4)
	if err != nil {
		t.Fatal(err)
	}
	s := &contracts.Session{Client: client, Key: accounts[3].Key, ChainID: new(big.Int).SetUint64(up.ChainID)}
	nft := contracts.MustLoad("OnChainERC721")
	a, err := s.Deploy(ctx, nft)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transact(ctx, a, nft, "mint", crypto.PubkeyToAddress(s.Key.PublicKey), big.NewInt(1)); err != nil {
		t.Fatal(err)
	}
	return a
}

// readLoad sends cached reads from 8 goroutines until stop is closed (at most 60 s), and
// counts the answers that were not the block.
type readLoad struct {
	ok, failed atomic.Int64
	firstBad   atomic.Value
	stop       chan struct{}
	done       sync.WaitGroup
}

func startReadLoad(t *testing.T, api, hash string) *readLoad {
	l := &readLoad{stop: make(chan struct{})}
	req := `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByHash","params":["` + hash + `",false]}`
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for range 8 {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			for time.Now().Before(deadline) {
				select {
				case <-l.stop:
					return
				default:
				}
				r, _ := http.NewRequest(http.MethodPost, api+"/v1/web3/mainnet", strings.NewReader(req))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("X-API-Key", "test-client")
				r.Header.Set("Authorization", "Bearer test-token")
				resp, err := client.Do(r)
				var body []byte
				if err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), `"hash":"`+hash+`"`) {
					l.failed.Add(1)
					l.firstBad.CompareAndSwap(nil, fmt.Sprintf("%v %s", err, body))
					continue
				}
				l.ok.Add(1)
			}
		}()
	}
	return l
}

// end stops the load and fails t if any read failed.
func (l *readLoad) end(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.done.Wait()
	if n := l.failed.Load(); n != 0 {
		t.Fatalf("%d of %d reads failed; first: %v", n, n+l.ok.Load(), l.firstBad.Load())
	}
	if l.ok.Load() == 0 {
		t.Fatal("no read was made")
	}
}

// TestRedisKilledUnderReadLoad: a private Redis killed (-9) under concurrent cached reads
// fails none of them; the replica stays ready, says Redis is down, and once Redis is
// restarted on the same port it uses it again by itself.
func TestRedisKilledUnderReadLoad(t *testing.T) {
	up := newCountedChain(t)
	srv := testengine.PrivateRedis(t)
	// No local level: every read asks Redis, so the kill hits the reads themselves. No rate
	// limit: its script would meet the kill first, and the reads are a load of one principal.
	ts := startServer(t, replicaConfig(up, srv.URL(), "t:", "cache: {local: false}\nrateLimit: {enabled: false}"))
	hash := up.genesisHash(t)

	load := startReadLoad(t, ts.API, hash)
	wait.For(t, "reads answered from Redis", func() bool { return metric(t, ts.Admin, blockByHashHit) >= 50 })
	srv.Kill()
	wait.For(t, "redis marked down", func() bool { return metric(t, ts.Admin, "web3gate_redis_up") == 0 })
	served := load.ok.Load()
	wait.For(t, "reads served with Redis down", func() bool { return load.ok.Load() >= served+50 })
	if code, body := get(t, ts.Admin+"/readyz"); code != 200 || !strings.HasPrefix(body, `{"status":"ok",`) || !strings.Contains(body, `"redis":"down: serving from local caches"}`) {
		t.Errorf("readyz with Redis down: %d %s", code, body)
	}
	srv.Restart()
	wait.For(t, "redis used again", func() bool { return metric(t, ts.Admin, "web3gate_redis_up") == 1 })
	hits := metric(t, ts.Admin, blockByHashHit)
	wait.For(t, "reads answered from the restarted Redis", func() bool { return metric(t, ts.Admin, blockByHashHit) >= hits+50 })
	load.end(t)
	if code, body := get(t, ts.Admin+"/readyz"); code != 200 || !strings.HasPrefix(body, `{"status":"ok",`) || !strings.Contains(body, `"redis":"up"}`) {
		t.Errorf("readyz after the restart: %d %s", code, body)
	}
	if metric(t, ts.Admin, `web3gate_redis_errors_total{op="get"}`) == 0 {
		t.Error("the failures were not counted")
	}
}

// TestStalledRedisDoesNotHoldReads: while a private Redis sleeps (DEBUG SLEEP), cached reads
// are answered without waiting for it, and it is used again once it wakes.
func TestStalledRedisDoesNotHoldReads(t *testing.T) {
	up := newCountedChain(t)
	srv := testengine.PrivateRedis(t)
	ts := startServer(t, replicaConfig(up, srv.URL(), "t:", "cache: {local: false}\nrateLimit: {enabled: false}"))
	hash := up.genesisHash(t)
	load := startReadLoad(t, ts.API, hash)
	wait.For(t, "reads answered from Redis", func() bool { return metric(t, ts.Admin, blockByHashHit) >= 50 })

	const sleep = 6 * time.Second
	over := srv.Stall(sleep)
	stalled := time.Now()
	served := load.ok.Load()
	// Not a speed assertion: reads go on being answered while Redis still sleeps.
	wait.For(t, "reads answered while Redis sleeps", func() bool { return load.ok.Load() >= served+100 })
	if d := time.Since(stalled); d >= sleep-time.Second {
		t.Fatalf("the reads waited for the sleeping Redis (%v)", d)
	}
	if metric(t, ts.Admin, "web3gate_redis_up") != 0 {
		t.Error("a Redis that answers nothing was not marked down")
	}
	<-over
	wait.For(t, "redis used again after its sleep", func() bool { return metric(t, ts.Admin, "web3gate_redis_up") == 1 })
	hits := metric(t, ts.Admin, blockByHashHit)
	wait.For(t, "hits again", func() bool { return metric(t, ts.Admin, blockByHashHit) > hits })
	load.end(t)
}
