package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

func TestGCRABurstThenRate(t *testing.T) {
	b := newBudget(Rate{Rate: 2, Burst: 4}, 1) // a unit every 500ms
	tab := newTable(1000, hashString, func(s string) string { return s })
	now := time.Unix(1000, 0).UnixNano()
	for i := range 4 {
		v := take(now, charge[string]{t: tab, key: "a", b: &b, cost: 1}, charge[string]{})
		if !v.ok || v.remaining != uint64(3-i) || v.limit != 4 {
			t.Fatalf("charge %d: %+v", i, v)
		}
	}
	v := take(now, charge[string]{t: tab, key: "a", b: &b, cost: 1}, charge[string]{})
	if v.ok || v.retryAfter != 500*time.Millisecond || v.remaining != 0 || v.reset != 2*time.Second {
		t.Fatalf("over the burst: %+v", v)
	}
	// Three units need 1.5s more.
	v = take(now, charge[string]{t: tab, key: "a", b: &b, cost: 3}, charge[string]{})
	if v.ok || v.retryAfter != 1500*time.Millisecond {
		t.Fatalf("3 units: %+v", v)
	}
	// After 500ms one unit is back, and only one.
	now += int64(500 * time.Millisecond)
	if v := take(now, charge[string]{t: tab, key: "a", b: &b, cost: 1}, charge[string]{}); !v.ok || v.remaining != 0 {
		t.Fatalf("after 500ms: %+v", v)
	}
	// Another key has its own bucket.
	if v := take(now, charge[string]{t: tab, key: "b", b: &b, cost: 4}, charge[string]{}); !v.ok || v.remaining != 0 {
		t.Fatalf("key b: %+v", v)
	}
	// A charge over the burst passes when the bucket is full, and empties it.
	now += int64(10 * time.Second)
	if v := take(now, charge[string]{t: tab, key: "a", b: &b, cost: 100}, charge[string]{}); !v.ok || v.remaining != 0 {
		t.Fatalf("100 units on a full bucket: %+v", v)
	}
}

func TestGCRABothOrNeither(t *testing.T) {
	wide := newBudget(Rate{Rate: 1, Burst: 10}, 1)
	narrow := newBudget(Rate{Rate: 1, Burst: 2}, 1)
	clients := newTable(1000, hashString, func(s string) string { return s })
	principals := newTable(1000, hashString, func(s string) string { return s })
	now := time.Unix(1000, 0).UnixNano()
	c := charge[string]{t: clients, key: "c", b: &wide, cost: 2}
	p := charge[string]{t: principals, key: "p", b: &narrow, cost: 2}
	v := take(now, c, p)
	if !v.ok || v.limit != 2 || v.remaining != 0 {
		t.Fatalf("first: %+v (the tighter budget is reported)", v)
	}
	v = take(now, c, p)
	if v.ok || v.limit != 2 || v.retryAfter != 2*time.Second {
		t.Fatalf("second: %+v", v)
	}
	// The refused charge took nothing from the client's budget: 8 units left.
	if v := take(now, c, charge[string]{}); !v.ok || v.remaining != 6 {
		t.Fatalf("client alone: %+v, want 6 left (10 - 2 - 2)", v)
	}
}

func TestGCRAShare(t *testing.T) {
	b := newBudget(Rate{Rate: 10, Burst: 7}, 2)
	if b.burst != 3 || b.interval != 2e8 {
		t.Fatalf("half of rate 10 burst 7: %+v", b)
	}
	if b := newBudget(Rate{Rate: 1, Burst: 1}, 4); b.burst != 1 {
		t.Fatalf("a share of a burst of 1: %d", b.burst)
	}
}

func TestTableBounded(t *testing.T) {
	b := newBudget(Rate{Rate: 1, Burst: 10}, 1)
	tab := newTable(64, hashString, func(s string) string { return s })
	now := time.Unix(1000, 0).UnixNano()
	for i := range 10000 {
		take(now, charge[string]{t: tab, key: fmt.Sprint("k", i), b: &b, cost: 1}, charge[string]{})
	}
	if n := tab.len(); n > 64 {
		t.Fatalf("%d keys kept, want at most 64", n)
	}
	// Keys whose buckets are full again make room without evicting busy ones.
	now += int64(time.Minute)
	for i := range 64 {
		take(now, charge[string]{t: tab, key: fmt.Sprint("new", i), b: &b, cost: 1}, charge[string]{})
	}
	if n := tab.len(); n > 64 {
		t.Fatalf("%d keys kept, want at most 64", n)
	}
}
