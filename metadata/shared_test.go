package metadata

import (
	"bytes"
	"context"
	"math/big"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/web3gate/web3gate/internal/redisx"
	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/store"
)

// mdReplica is a Service as another replica has it: its own memory, its own store, its own
// Redis client, the same chain.
type mdReplica struct {
	svc     *Service
	batches *atomic.Int64
	db      *store.DB
}

func (e *env) replica(url, prefix string) *mdReplica { return e.replicaOn(url, prefix, nil) }

// replicaOn is replica with the store db (nil: a store of its own).
func (e *env) replicaOn(url, prefix string, db *store.DB) *mdReplica {
	t := e.t
	t.Helper()
	rcfg := redisx.Config{URL: url, KeyPrefix: prefix}
	rcfg.SetDefaults()
	rcfg.Backoff = 50 * time.Millisecond
	rc, err := redisx.New(rcfg, redisx.Deps{Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	if db == nil {
		sc := store.Config{Path: filepath.Join(t.TempDir(), "web3gate.db")}
		sc.SetDefaults()
		if db, err = store.Open(e.ctx, sc, store.Deps{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
	}
	r := &mdReplica{batches: &atomic.Int64{}, db: db}
	r.svc, err = New(e.cfg, Deps{
		Chain: func(id uint64) (Chain, bool) {
			p, ok := e.pool(id)
			if !ok {
				return nil, false
			}
			return countingChain{Chain: p, n: r.batches}, true
		},
		DB: db, Redis: rc, Now: e.clock.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.svc.Close)
	return r
}

func (r *mdReplica) wait() { r.svc.redis.WaitWrites() }

func (r *mdReplica) redisLookups(kind, result string) float64 {
	return testutil.ToFloat64(r.svc.metrics.redisLookups.WithLabelValues(kind, result))
}

// TestRecordFetchedByOneReplicaIsServedByAnother: B answers A's record from Redis: no chain
// read, nothing in B's store.
func TestRecordFetchedByOneReplicaIsServedByAnother(t *testing.T) {
	e := newEnv(t, nil)
	url, prefix := testengine.Redis(t)
	addr := e.deploy("OnChainERC721")
	e.transact(addr, "OnChainERC721", "mint", e.me, big.NewInt(7))
	a, b := e.replica(url, prefix), e.replica(url, prefix)

	tokA, err := a.svc.Token(e.ctx, e.chainID, addr, big.NewInt(7), false)
	if err != nil {
		t.Fatal(err)
	}
	conA, err := a.svc.Contract(e.ctx, e.chainID, addr, false)
	if err != nil {
		t.Fatal(err)
	}
	a.wait()
	if a.batches.Load() == 0 {
		t.Fatal("A read nothing from the chain")
	}
	tokB, err := b.svc.Token(e.ctx, e.chainID, addr, big.NewInt(7), false)
	if err != nil {
		t.Fatal(err)
	}
	conB, err := b.svc.Contract(e.ctx, e.chainID, addr, false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tokA, tokB) || !bytes.Equal(conA, conB) {
		t.Fatalf("B answered\n%s\n%s\nA\n%s\n%s", tokB, conB, tokA, conA)
	}
	if n := b.batches.Load(); n != 0 {
		t.Fatalf("B read the chain %d times, want 0: Redis holds the records", n)
	}
	if b.redisLookups("token", "hit") != 1 || b.redisLookups("contract", "hit") != 1 {
		t.Fatal("B's Redis hits not counted")
	}
	// The records came from Redis, not from B's store, which has none.
	err = b.db.Read(e.ctx, func(tx *store.DBTx) error {
		_, err := tx.Metadata(e.ctx, e.chainID, addr, "7")
		return err
	})
	if err != store.ErrNotFound {
		t.Fatalf("B's store: %v, want not found", err)
	}
	// The record's age travels with it: past maxAge, B serves it and refreshes it.
	e.clock.advance(e.cfg.MaxAge + time.Minute)
	b2 := e.replica(url, prefix)
	if _, err := b2.svc.Token(e.ctx, e.chainID, addr, big.NewInt(7), false); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(b2.svc.metrics.lookups.WithLabelValues("token", "stale")); got != 1 {
		t.Fatalf("a record older than maxAge from Redis: %v stale lookups, want 1", got)
	}
}

// TestStoreRecordsFillRedis: a record that the store holds (the replicas share it) and Redis
// does not reaches Redis on its first read, so the next replica reads neither.
func TestStoreRecordsFillRedis(t *testing.T) {
	e := newEnv(t, nil)
	url, prefix := testengine.Redis(t)
	addr := e.deploy("OnChainERC721")
	e.transact(addr, "OnChainERC721", "mint", e.me, big.NewInt(2))
	a := e.replica(url, prefix)
	want, err := a.svc.Token(e.ctx, e.chainID, addr, big.NewInt(2), false)
	if err != nil {
		t.Fatal(err)
	}
	a.wait()
	if err := testengine.DeleteRedisPrefix(testengine.RedisAddr(), prefix); err != nil {
		t.Fatal(err)
	}
	b := e.replicaOn(url, prefix, a.db)
	if got, err := b.svc.Token(e.ctx, e.chainID, addr, big.NewInt(2), false); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("B from the store: %s %v", got, err)
	}
	b.wait()
	if b.batches.Load() != 0 || b.redisLookups("token", "miss") != 1 {
		t.Fatalf("B: %d chain reads, %v Redis misses; want 0 and 1", b.batches.Load(), b.redisLookups("token", "miss"))
	}
	c := e.replica(url, prefix) // its store is empty
	if got, err := c.svc.Token(e.ctx, e.chainID, addr, big.NewInt(2), false); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("C: %s %v", got, err)
	}
	if c.batches.Load() != 0 || c.redisLookups("token", "hit") != 1 {
		t.Fatal("C did not answer from Redis")
	}
}

// TestRecordsForgottenLeaveRedis: a chain that started over loses its records in Redis too.
func TestRecordsForgottenLeaveRedis(t *testing.T) {
	e := newEnv(t, nil)
	url, prefix := testengine.Redis(t)
	addr := e.deploy("OnChainERC721")
	e.transact(addr, "OnChainERC721", "mint", e.me, big.NewInt(1))
	a := e.replica(url, prefix)
	if _, err := a.svc.Token(e.ctx, e.chainID, addr, big.NewInt(1), false); err != nil {
		t.Fatal(err)
	}
	a.wait()
	keys, err := testengine.RedisKeys(testengine.RedisAddr(), prefix)
	if err != nil || len(keys) != 1 {
		t.Fatalf("redis keys %v %v", keys, err)
	}
	// The chain started over: ForgetChain drops its records from Redis too.
	if err := a.svc.ForgetChain(context.Background(), e.chainID); err != nil {
		t.Fatal(err)
	}
	if keys, _ = testengine.RedisKeys(testengine.RedisAddr(), prefix); len(keys) != 0 {
		t.Fatalf("left in Redis after ForgetChain: %v", keys)
	}
}

// TestMetadataWithRedisDown: a dead Redis costs the lookups nothing but a miss.
func TestMetadataWithRedisDown(t *testing.T) {
	e := newEnv(t, nil)
	srv := testengine.PrivateRedis(t)
	addr := e.deploy("OnChainERC721")
	e.transact(addr, "OnChainERC721", "mint", e.me, big.NewInt(3))
	a := e.replica(srv.URL(), "t:")
	srv.Kill()
	for range 3 {
		// A fresh replica each time: its memory misses, so it asks Redis, then its store.
		r := e.replica(srv.URL(), "t:")
		if _, err := r.svc.Token(e.ctx, e.chainID, addr, big.NewInt(3), false); err != nil {
			t.Fatalf("lookup with Redis down: %v", err)
		}
	}
	if _, err := a.svc.Token(e.ctx, e.chainID, addr, big.NewInt(3), false); err != nil {
		t.Fatalf("lookup with Redis down: %v", err)
	}
	if a.redisLookups("token", "hit") != 0 || a.redisLookups("token", "error")+a.redisLookups("token", "skipped") != 1 {
		t.Fatal("the failed Redis lookup was not counted")
	}
}

func TestRecordEncoding(t *testing.T) {
	it := item{chainID: 1}
	e := newEntry(it, []byte(`{"a":1}`), time.Unix(1_700_000_000, 123), 3)
	body, updated, failures, ok := decodeRecord(encodeRecord(e), 1024)
	if !ok || string(body) != `{"a":1}` || !updated.Equal(e.updated) || failures != 3 {
		t.Fatalf("round trip: %s %v %d %v", body, updated, failures, ok)
	}
	for _, bad := range [][]byte{nil, encodeRecord(&entry{body: []byte(`[1]`)}), append([]byte{2}, encodeRecord(e)[1:]...)} {
		if _, _, _, ok := decodeRecord(bad, 1024); ok {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, _, _, ok := decodeRecord(encodeRecord(e), 4); ok {
		t.Error("oversized body accepted")
	}
}
