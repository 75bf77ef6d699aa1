package ratelimit

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/web3gate/web3gate/internal/redisx"
	"github.com/web3gate/web3gate/internal/testengine"
)

// TestSharedScriptMatchesLocal: the Lua script in Redis and the local limiter give the same
// verdicts to the same charges (a rate slow enough that the time between them does not
// count), for one budget and for two charged together.
func TestSharedScriptMatchesLocal(t *testing.T) {
	url, prefix := testengine.Redis(t)
	rcfg := redisx.Config{URL: url, KeyPrefix: prefix}
	rcfg.SetDefaults()
	rcfg.Timeout = time.Second
	rc, err := redisx.New(rcfg, redisx.Deps{Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	s := newTestStage(t, Config{RedisTimeout: time.Second}, Deps{Redis: rc})
	wide := newBudget(Rate{Rate: 0.001, Burst: 5}, 1)
	narrow := newBudget(Rate{Rate: 0.002, Burst: 3}, 1)
	clients := newTable(1000, hashString, func(s string) string { return s })
	principals := newTable(1000, hashString, func(s string) string { return s })
	now := time.Now().UnixNano()
	for i, tc := range []struct {
		cost uint64
		both bool
	}{{2, false}, {2, true}, {2, false}, {1, true}, {1, true}, {9, false}, {0, true}} {
		keys := []string{prefix + "rl:c:x"}
		bs := []*budget{&wide}
		c2 := charge[string]{}
		if tc.both {
			keys = append(keys, prefix+"rl:p:y")
			bs = append(bs, &narrow)
			c2 = charge[string]{t: principals, key: "y", b: &narrow, cost: tc.cost}
		}
		got, ok := s.shared(keys, bs, tc.cost)
		if !ok {
			t.Fatalf("charge %d: Redis did not answer", i)
		}
		want := take(now, charge[string]{t: clients, key: "x", b: &wide, cost: tc.cost}, c2)
		if got.ok != want.ok || got.remaining != want.remaining || got.limit != want.limit ||
			(got.retryAfter-want.retryAfter).Abs() > 10*time.Second || (got.reset-want.reset).Abs() > 10*time.Second {
			t.Fatalf("charge %d (%+v): Redis %+v, local %+v", i, tc, got, want)
		}
	}
}
