package cache

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/web3gate/web3gate/internal/redisx"
	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// replica is one cache stage with its own local level and its own Redis client, in front of
// its own counting upstream: what one web3gate replica has.
type replica struct {
	s  *Stage
	up *counting
	h  proxy.Handler
}

func newReplica(t *testing.T, url, prefix string, head uint64, result string, tune func(*Config, *Deps)) *replica {
	t.Helper()
	rcfg := redisx.Config{URL: url, KeyPrefix: prefix}
	rcfg.SetDefaults()
	rcfg.MaxTTL = time.Hour
	rc, err := redisx.New(rcfg, redisx.Deps{Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	cfg := Config{Enabled: true, Local: true, Coalesce: true}
	cfg.SetDefaults()
	deps := Deps{Registry: prometheus.NewRegistry(), Head: func(uint64) uint64 { return head }, Redis: rc}
	if tune != nil {
		tune(&cfg, &deps)
	}
	s, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	up := &counting{result: result}
	return &replica{s: s, up: up, h: proxy.Compile(up, s)}
}

func (r *replica) serve(t *testing.T, c *proxy.Call) string {
	t.Helper()
	resp, err := r.h.Serve(c)
	if err != nil {
		t.Fatal(err)
	}
	r.s.Wait()
	return string(resp.Result)
}

func (r *replica) redisLookups(method, result string) float64 {
	return testutil.ToFloat64(r.s.redisLookups.WithLabelValues(method, result))
}

func (r *replica) localLookups(method, result string) float64 {
	return testutil.ToFloat64(r.s.lookups.WithLabelValues(method, result))
}

func pttl(t *testing.T, key string) int {
	t.Helper()
	line, err := testengine.RedisCommand(testengine.RedisAddr(), "PTTL", key)
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := strconv.Atoi(strings.TrimPrefix(line, ":"))
	return ms
}

func keys(t *testing.T, prefix string) []string {
	t.Helper()
	k, err := testengine.RedisKeys(testengine.RedisAddr(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const block = `{"hash":"0x01","number":"0x10","transactions":[]}`

func TestAnswerFetchedByOneReplicaIsAHitOnAnother(t *testing.T) {
	url, prefix := testengine.Redis(t)
	a := newReplica(t, url, prefix, 100, block, nil)
	b := newReplica(t, url, prefix, 100, block, nil)
	calls := []*proxy.Call{
		call("eth_getBlockByHash", `["0x0000000000000000000000000000000000000000000000000000000000000001",false]`),
		call("eth_getBlockByHash", `["0x0000000000000000000000000000000000000000000000000000000000000001",true]`),
		{ChainID: 2, Request: jsonrpc.Request{ID: []byte("1"), Method: "eth_getBlockByHash", Params: []byte(`["0x0000000000000000000000000000000000000000000000000000000000000001",false]`)}},
	}
	for _, c := range calls {
		a.serve(t, c)
	}
	if n := a.up.n.Load(); n != 3 {
		t.Fatalf("replica A: %d upstream calls, want 3 (distinct chain or params)", n)
	}
	if k := keys(t, prefix); len(k) != 3 {
		t.Fatalf("redis holds %v, want 3 entries", k)
	}
	for _, c := range calls {
		if got := b.serve(t, c); got != block {
			t.Fatalf("replica B answered %s", got)
		}
	}
	if n := b.up.n.Load(); n != 0 {
		t.Fatalf("replica B made %d upstream calls, want 0: Redis answers", n)
	}
	if got := b.redisLookups("eth_getBlockByHash", "hit"); got != 3 {
		t.Fatalf("B's redis hits %v, want 3", got)
	}
	// The Redis hit filled B's local level: the next lookup does not ask Redis.
	b.serve(t, calls[0])
	if got := b.localLookups("eth_getBlockByHash", "hit"); got != 1 {
		t.Fatalf("B's local hits %v, want 1", got)
	}
	if got := b.redisLookups("eth_getBlockByHash", "hit"); got != 3 {
		t.Fatalf("B asked Redis again after its local level was filled (%v hits)", got)
	}
}

// TestRedisFollowsTheLocalRules: what the local level would not cache never reaches Redis,
// and what it caches for a while lives as long in Redis.
func TestRedisFollowsTheLocalRules(t *testing.T) {
	receipt := func(block uint64) string {
		return fmt.Sprintf(`{"blockHash":"0xabc","blockNumber":"0x%x","status":"0x1"}`, block)
	}
	for _, tc := range []struct {
		name     string
		result   string
		minTTL   int // PTTL bounds, ms
		maxTTL   int
		upcallsB int32
	}{
		{"final: kept for maxTtl", receipt(100), 3590_000, 3600_000, 0},
		{"recent: kept for unfinalizedTtl", receipt(195), 1, 2000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, prefix := testengine.Redis(t)
			a := newReplica(t, url, prefix, 200, tc.result, nil)
			b := newReplica(t, url, prefix, 200, tc.result, nil)
			c := call("eth_getTransactionReceipt", `["0x0000000000000000000000000000000000000000000000000000000000000001"]`)
			a.serve(t, c)
			k := keys(t, prefix)
			if len(k) != 1 {
				t.Fatalf("redis holds %v", k)
			}
			if ms := pttl(t, k[0]); ms < tc.minTTL || ms > tc.maxTTL {
				t.Errorf("PTTL %d ms, want %d..%d", ms, tc.minTTL, tc.maxTTL)
			}
			if got := b.serve(t, c); got != tc.result {
				t.Fatalf("B answered %s", got)
			}
			if n := b.up.n.Load(); n != tc.upcallsB {
				t.Fatalf("B made %d upstream calls, want %d", n, tc.upcallsB)
			}
		})
	}
	for _, tc := range []struct{ name, result string }{
		{"null", "null"},
		{"pending", `{"blockHash":null,"blockNumber":null}`},
		{"oversized", `{"blockHash":"0xabc","blockNumber":"0x1","logs":"` + strings.Repeat("x", 2048) + `"}`},
	} {
		t.Run("never cached: "+tc.name, func(t *testing.T) {
			url, prefix := testengine.Redis(t)
			small := func(c *Config, _ *Deps) { c.MaxEntryBytes = 1024 }
			a := newReplica(t, url, prefix, 200, tc.result, small)
			b := newReplica(t, url, prefix, 200, tc.result, small)
			c := call("eth_getTransactionReceipt", `["0x0000000000000000000000000000000000000000000000000000000000000001"]`)
			a.serve(t, c)
			a.serve(t, c)
			b.serve(t, c)
			if k := keys(t, prefix); len(k) != 0 {
				t.Fatalf("redis holds %v", k)
			}
			if n := a.up.n.Load() + b.up.n.Load(); n != 3 {
				t.Fatalf("%d upstream calls, want 3: neither level caches it", n)
			}
		})
	}
}

func TestEntryTTLCarriesOver(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	v := encodeEntry([]byte(`"x"`), 2*time.Second, t0)
	for _, tc := range []struct {
		at      time.Duration
		wantTTL time.Duration
		wantErr error
	}{
		{0, 2 * time.Second, nil},
		{1500 * time.Millisecond, 500 * time.Millisecond, nil},
		{2 * time.Second, 0, errExpired},
	} {
		r, ttl, err := decodeEntry(v, 1024, t0.Add(tc.at))
		if err != tc.wantErr || ttl != tc.wantTTL || (err == nil && string(r) != `"x"`) {
			t.Errorf("at %v: %q %v %v, want ttl %v err %v", tc.at, r, ttl, err, tc.wantTTL, tc.wantErr)
		}
	}
	if r, ttl, err := decodeEntry(encodeEntry([]byte(`"x"`), 0, t0), 1024, t0.Add(1000*time.Hour)); err != nil || ttl != 0 || string(r) != `"x"` {
		t.Errorf("no expiry: %q %v %v", r, ttl, err)
	}
	for _, bad := range [][]byte{nil, {1}, []byte("\x02\x00\x00\x00\x00\x00\x00\x00\x00\"x\""), append(make([]byte, 9), '1')} {
		if _, _, err := decodeEntry(bad, 1024, t0); err != errInvalid {
			t.Errorf("%q: %v, want invalid", bad, err)
		}
	}
	if _, _, err := decodeEntry(encodeEntry(make([]byte, 2000), 0, t0), 1024, t0); err != errInvalid {
		t.Errorf("oversized: %v, want invalid", err)
	}
}

// TestForeignValuesAreMisses: a value under a web3gate key that is not an entry of this
// version (another version wrote it, or it is damaged) is a miss, counted, never an answer.
func TestForeignValuesAreMisses(t *testing.T) {
	url, prefix := testengine.Redis(t)
	r := newReplica(t, url, prefix, 100, block, nil)
	c := call("eth_getBlockByHash", `["0x0000000000000000000000000000000000000000000000000000000000000001",false]`)
	if _, err := testengine.RedisCommand(testengine.RedisAddr(), "SET", r.s.redisKeyOf(c), "not an entry"); err != nil {
		t.Fatal(err)
	}
	if got := r.serve(t, c); got != block {
		t.Fatalf("answered %s", got)
	}
	if r.up.n.Load() != 1 || r.redisLookups("eth_getBlockByHash", "invalid") != 1 {
		t.Fatalf("upstream calls %d, invalid lookups %v", r.up.n.Load(), r.redisLookups("eth_getBlockByHash", "invalid"))
	}
}

func TestLongParamsAreHashedInTheKey(t *testing.T) {
	url, prefix := testengine.Redis(t)
	r := newReplica(t, url, prefix, 100, block, nil)
	long := `[{"to":"0x00000000000000000000000000000000000000aa","input":"0x` + strings.Repeat("ab", 150) + `"},"0x1"]`
	k := r.s.redisKeyOf(call("eth_call", long))
	if len(k) > len(prefix)+100 || !strings.HasPrefix(k, prefix+"rc:1:eth_call:#") {
		t.Fatalf("key %q", k)
	}
	if k == r.s.redisKeyOf(call("eth_call", strings.Replace(long, "abab\"", "abac\"", 1))) {
		t.Fatal("two params, one key")
	}
}

// redisKeyOf is the Redis key of c's entry (as final, or else as head).
func (s *Stage) redisKeyOf(c *proxy.Call) string {
	var pl plan
	f := s.finality(c.ChainID)
	s.plan(c, policies[c.Method()], f, &pl, nil)
	final, head := s.keys(&pl, f)
	if final == nil {
		final = head
	}
	return s.redisKey(string(final), c.ChainID, c.Method())
}

func TestChainsNotSharedStayLocal(t *testing.T) {
	url, prefix := testengine.Redis(t)
	private := func(_ *Config, d *Deps) { d.Shared = func(id uint64) bool { return id != 1 } }
	a := newReplica(t, url, prefix, 100, block, private)
	a.serve(t, call("eth_getBlockByHash", `["0x0000000000000000000000000000000000000000000000000000000000000001",false]`))
	a.serve(t, call("eth_getBlockByHash", `["0x0000000000000000000000000000000000000000000000000000000000000001",false]`))
	if k := keys(t, prefix); len(k) != 0 {
		t.Fatalf("a chain not shared reached Redis: %v", k)
	}
	if a.up.n.Load() != 1 {
		t.Fatalf("%d upstream calls, want 1 (the local level)", a.up.n.Load())
	}
}

// TestWithoutLocalLevelEveryLookupAsksRedis is cache.local: false (the bench's (r)).
func TestWithoutLocalLevelEveryLookupAsksRedis(t *testing.T) {
	url, prefix := testengine.Redis(t)
	noLocal := func(c *Config, _ *Deps) { c.Local = false }
	r := newReplica(t, url, prefix, 100, block, noLocal)
	c := call("eth_getBlockByHash", `["0x0000000000000000000000000000000000000000000000000000000000000001",false]`)
	for i := range 5 {
		if got := r.serve(t, c); got != block {
			t.Fatalf("answered %s", got)
		}
		if i == 0 {
			// The miss's answer is written to Redis after it is served: wait for the write
			// before the lookups that must find it.
			wait.For(t, "the answer stored in Redis", func() bool { return len(keys(t, prefix)) == 1 })
		}
	}
	if r.up.n.Load() != 1 || r.redisLookups("eth_getBlockByHash", "hit") != 4 || r.redisLookups("eth_getBlockByHash", "miss") != 1 {
		t.Fatalf("upstream %d, redis hits %v", r.up.n.Load(), r.redisLookups("eth_getBlockByHash", "hit"))
	}
}

// TestConcurrentMissesShareOneRedisLookup: identical calls in flight share one Redis lookup
// and one upstream request, as they shared the upstream request before Redis.
func TestConcurrentMissesShareOneRedisLookup(t *testing.T) {
	url, prefix := testengine.Redis(t)
	r := newReplica(t, url, prefix, 100, block, nil)
	gate, entered := make(chan struct{}), make(chan struct{}, 20)
	slow := &blocking{counting: r.up, gate: gate, entered: entered}
	h := proxy.Compile(slow, r.s)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.Serve(call("eth_getBlockByHash", `["0x0000000000000000000000000000000000000000000000000000000000000002",false]`)); err != nil {
				t.Error(err)
			}
		}()
	}
	// Whether a call joins the one in flight or comes after it was answered (a local hit),
	// it neither asks Redis nor the upstream again.
	<-entered
	time.Sleep(50 * time.Millisecond)
	close(gate)
	wg.Wait()
	if r.up.n.Load() != 1 {
		t.Fatalf("%d upstream calls, want 1", r.up.n.Load())
	}
	if got := r.redisLookups("eth_getBlockByHash", "miss"); got != 1 {
		t.Fatalf("%v Redis lookups, want 1", got)
	}
}

// blocking answers once gate is closed.
type blocking struct {
	*counting
	gate, entered chan struct{}
}

func (b *blocking) Serve(c *proxy.Call) (*proxy.Response, error) {
	b.entered <- struct{}{}
	<-b.gate
	return b.counting.Serve(c)
}

// TestRedisDownServesFromTheUpstream: with the Redis killed every call is answered (from
// the local level or the upstream), the failures counted.
func TestRedisDownServesFromTheUpstream(t *testing.T) {
	srv := testengine.PrivateRedis(t)
	r := newReplica(t, srv.URL(), "t:", 100, block, func(c *Config, _ *Deps) { c.Local = false })
	c := call("eth_getBlockByHash", `["0x0000000000000000000000000000000000000000000000000000000000000001",false]`)
	r.serve(t, c)
	r.serve(t, c)
	srv.Kill()
	for range 20 {
		if got := r.serve(t, c); got != block {
			t.Fatalf("answered %s", got)
		}
	}
	if r.up.n.Load() != 21 {
		t.Fatalf("%d upstream calls, want 21", r.up.n.Load())
	}
	// failureThreshold (3) failures mark Redis down: lookups, and the fills after them.
	if e, s := r.redisLookups("eth_getBlockByHash", "error"), r.redisLookups("eth_getBlockByHash", "skipped"); e < 1 || e > 3 || e+s != 20 {
		t.Fatalf("redis lookups: %v errors, %v skipped; want 1 to 3 errors, then skipped", e, s)
	}
}

// TestRedisSharesFinalAndHeadEntries: a balance at a finalized block fetched by A is a Redis
// hit on B; a latest balance is a hit on B at the same head (number and hash) and a miss on
// C, which sees another block at the same height (a reorg): head entries are keyed by the
// head's identity in Redis too.
func TestRedisSharesFinalAndHeadEntries(t *testing.T) {
	url, prefix := testengine.Redis(t)
	at := func(hash string) func(*Config, *Deps) {
		return func(_ *Config, d *Deps) {
			d.Finality = func(uint64) Finality {
				return Finality{Known: true, Head: 100, HeadHash: hash, Finalized: 88}
			}
		}
	}
	h1, h2 := "0x"+strings.Repeat("a1", 32), "0x"+strings.Repeat("b2", 32)
	a := newReplica(t, url, prefix, 0, `"0x5"`, at(h1))
	b := newReplica(t, url, prefix, 0, `"0x5"`, at(h1))
	c := newReplica(t, url, prefix, 0, `"0x6"`, at(h2))
	final := call("eth_getBalance", `["`+addrCheck+`","0x10"]`)
	latest := call("eth_getBalance", `["`+addrLower+`","latest"]`)
	a.serve(t, final)
	a.serve(t, latest)
	waitKeys := func(n int) []string {
		var k []string
		for range 200 {
			if k = keys(t, prefix); len(k) >= n {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		return k
	}
	k := waitKeys(2)
	slices.Sort(k)
	want := []string{
		prefix + "rc:1:eth_getBalance:[\"" + addrLower + "\",\"0x10\"]",
		prefix + "rc:1:eth_getBalance:[\"" + addrLower + "\",\"latest\"]@100:" + h1,
	}
	if !slices.Equal(k, want) {
		t.Fatalf("redis keys\n%q\nwant\n%q", k, want)
	}
	if got := b.serve(t, call("eth_getBalance", `["`+addrLower+`",{"blockNumber":"0x010"}]`)); got != `"0x5"` {
		t.Fatalf("B final: %s", got)
	}
	if got := b.serve(t, call("eth_getBalance", `["`+addrCheck+`","latest"]`)); got != `"0x5"` {
		t.Fatalf("B latest: %s", got)
	}
	if n := b.up.n.Load(); n != 0 {
		t.Fatalf("B made %d upstream calls, want 0", n)
	}
	if got := c.serve(t, latest); got != `"0x6"` || c.up.n.Load() != 1 {
		t.Fatalf("C at another head answered %s with %d upstream calls, want its own answer", got, c.up.n.Load())
	}
	if got := c.serve(t, final); got != `"0x5"` || c.up.n.Load() != 1 {
		t.Fatalf("C final: %s, %d upstream calls", got, c.up.n.Load())
	}
}
