package txmgr

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/lease"
	"github.com/web3gate/web3gate/store"
)

// TestConfirmerRunsOnOneReplica: two replicas on one store and one chain, each running its
// confirmers under a lease: the confirmer of the chain runs on the first only. A send through
// the standby that waits for a slot gets it when the other replica's confirmer mines the
// transaction in flight (the standby's kick reaches no confirmer; its wait looks at the
// store); once the first replica stops, the standby's confirmer takes over and mines the rest.
func TestConfirmerRunsOnOneReplica(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	cfg := Config{PollInterval: 20 * time.Millisecond, BroadcastTimeout: 500 * time.Millisecond, MaxInFlight: 1, InFlightWait: 20 * time.Second}
	replica := func(id string) (*Manager, *lease.Leases, *observer.ObservedLogs) {
		core, logs := observer.New(zapcore.InfoLevel)
		leases, err := lease.NewTable(f.db, lease.Config{ReplicaID: id, LeaseTimeout: 3 * time.Second, LeaseCheckInterval: 300 * time.Millisecond},
			lease.Deps{Logger: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = leases.Close() })
		txs, err := New(cfg, Deps{Signers: f.txs.keys, DB: f.db, Chains: map[uint64]Chain{7: f.chain}, Hold: leases.Hold})
		if err != nil {
			t.Fatal(err)
		}
		return txs, leases, logs
	}
	run := func(txs *Manager) (stop func()) {
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); txs.Run(runCtx) }()
		stop = func() { cancel(); <-done }
		t.Cleanup(stop)
		return stop
	}
	holds := func(l *lease.Leases) bool {
		h := l.HeldLeases()
		return len(h) == 1 && h[0].Name == "confirmer/7"
	}
	a, leasesA, _ := replica("a")
	stopA := run(a)
	wait.Within(t, 10*time.Second, "a holding the lease", func() bool { return holds(leasesA) })
	b, leasesB, logsB := replica("b")
	run(b)
	wait.Within(t, 10*time.Second, "b standing by", func() bool { return logsB.FilterMessageSnippet("standing by").Len() == 1 })

	first, err := b.Send(ctx, "p", 7, f.request(1), "")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		h   common.Hash
		err error
	}
	second := make(chan result, 1)
	go func() {
		h, err := b.Send(ctx, "p", 7, f.request(2), "")
		second <- result{h, err}
	}()
	// The second send waits for the account's only slot; a's confirmer frees it.
	wait.Within(t, 10*time.Second, "the second send queued on b", func() bool { return a.queue(headKey{7, f.from}).Load() == 0 && b.queue(headKey{7, f.from}).Load() == 1 })
	f.chain.seal("x")
	r := <-second
	if r.err != nil {
		t.Fatalf("the send waiting for a slot on the standby: %v", r.err)
	}
	if rec, err := b.Transaction(ctx, "p", first); err != nil || rec.State != store.StateMined {
		t.Fatalf("the first transaction: %+v, %v; want mined", rec, err)
	}
	if holds(leasesB) {
		t.Fatal("the standby holds the confirmer's lease")
	}

	stopA()
	wait.Within(t, 10*time.Second, "b holding the lease", func() bool { return holds(leasesB) })
	f.chain.seal("y")
	wait.Within(t, 10*time.Second, "the send mined under b", func() bool {
		rec, err := b.Transaction(ctx, "p", r.h)
		return err == nil && rec.State == store.StateMined
	})
}

// TestRecoveryOnASharedStoreLeavesRecentRows: a confirmer starting on a store shared with
// other replicas finishes a reserved row untouched for longer than twice BroadcastTimeout, but
// not one updated since, which may be a request's at work on another replica (the ticks finish
// it once it is that old).
func TestRecoveryOnASharedStoreLeavesRecentRows(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	insert := func(nonce uint64, age time.Duration) *store.TxRecord {
		t.Helper()
		r := f.request(int64(nonce) + 1)
		fields, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		rec := &store.TxRecord{ChainID: 7, Address: f.from, Nonce: nonce, Principal: "p", Kind: store.KindSend,
			State: store.StateReserved, Fields: fields, MaxCost: r.MaxCost()}
		if err := f.db.Write(ctx, func(tx *store.DBTx) error {
			if err := tx.InsertTx(ctx, rec); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `UPDATE txs SET updated_at = ? WHERE id = ?`,
				time.Now().Add(-age).UTC().Format("2006-01-02T15:04:05.000000000Z"), rec.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	state := func(id int64) string {
		var rec *store.TxRecord
		if err := f.db.Read(ctx, func(tx *store.DBTx) error {
			var err error
			rec, err = tx.TxByID(ctx, id)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return rec.State
	}
	// The recovery handles rows by nonce: the recent one first, were it taken.
	recent := insert(0, time.Second)
	old := insert(1, time.Minute)
	txs, err := New(Config{PollInterval: 20 * time.Millisecond, BroadcastTimeout: 5 * time.Second},
		Deps{Signers: f.txs.keys, DB: f.db, Chains: map[uint64]Chain{7: f.chain}, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); txs.Run(runCtx) }()
	defer func() { stop(); <-done }()
	wait.Within(t, 10*time.Second, "the stale row rebroadcast", func() bool { return state(old.ID) == store.StateBroadcast })
	if s := state(recent.ID); s != store.StateReserved {
		t.Fatalf("the row updated a second ago is %s after the recovery, want reserved", s)
	}
}
