package txmgr

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/devchain"
	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr/txreq"
	"github.com/web3gate/web3gate/upstreams"
	"github.com/web3gate/web3gate/wallet"
)

// devRun is one process's nonce manager on an embedded dev chain: its upstream pool, the
// manager on a store that outlives it, its confirmers running.
type devRun struct {
	txs  *Manager
	pool *upstreams.Pool
	logs *observer.ObservedLogs
	stop func()
}

// startDevRun starts the nonce manager on chain with db, checks the geneses as the server does
// at start, and runs the confirmers until stop.
func startDevRun(t *testing.T, chain *devchain.Chain, db *store.DB, keys *wallet.Keys) (*devRun, map[uint64]bool) {
	t.Helper()
	ctx := context.Background()
	id := chain.ChainID()
	ups, err := upstreams.New(upstreams.Config{
		Mainnet: id,
		Chains:  []upstreams.ChainConfig{{ChainID: id, URLs: []string{"embedded"}}},
	}, upstreams.Deps{Embedded: map[uint64]http.Handler{id: chain.Handler()}})
	if err != nil {
		t.Fatal(err)
	}
	ups.Start(ctx)
	pool, _ := ups.Pool(id)
	core, logs := observer.New(zapcore.InfoLevel)
	txs, err := New(Config{PollInterval: 20 * time.Millisecond}, Deps{
		Signers: wallet.NewSigners(keys, wallet.SignersDeps{}), DB: db, Chains: map[uint64]Chain{id: pool}, Logger: zap.New(core),
	})
	if err != nil {
		ups.Close()
		t.Fatal(err)
	}
	renewed := txs.CheckGeneses(ctx, nil)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); txs.Run(runCtx) }()
	r := &devRun{txs: txs, pool: pool, logs: logs}
	var stopped bool
	r.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			ups.Close()
		}
	}
	t.Cleanup(r.stop)
	return r, renewed
}

func (r *devRun) state(t *testing.T, h common.Hash) *store.TxRecord {
	t.Helper()
	rec, err := r.txs.Transaction(context.Background(), "p", h)
	if err != nil {
		t.Fatalf("transaction %s: %v", h.Hex(), err)
	}
	return rec
}

// chainNonce is from's nonce on the chain at block tag.
func (r *devRun) chainNonce(t *testing.T, from common.Address, tag string) uint64 {
	t.Helper()
	n, err := r.txs.nonceAt(context.Background(), r.pool, from, tag)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func startDevChain(t *testing.T) *devchain.Chain {
	t.Helper()
	c, err := devchain.Start(devchain.Config{Accounts: 1}, devchain.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestDevChainStartedOver: start, send, stop; start a new dev chain with the same store: the
// previous chain's transactions are abandoned (a signed one left by a crash is not sent
// into the new chain), nothing is in flight, and the next send takes the new chain's nonce 0
// and is mined. A restart on the same chain changes nothing.
func TestDevChainStartedOver(t *testing.T) {
	ctx := context.Background()
	scfg := testStoreConfig(t, filepath.Join(t.TempDir(), "web3gate.db"))
	scfg.SetDefaults()
	db, err := store.Open(ctx, scfg, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	first := startDevChain(t)
	keys := wallet.MemoryKeys(wallet.Deps{})
	from := keys.AddInMemory(first.Accounts()[0].Key)
	to := common.HexToAddress("0xdead")
	request := func(value int64) *txreq.Request {
		return &txreq.Request{From: from, To: &to, Gas: 21000, GasPrice: big.NewInt(2e9), Value: big.NewInt(value), Data: []byte{}}
	}
	id := first.ChainID()

	// First run: one transaction mined, and one signed and stored but never broadcast (as a
	// crash between the two leaves it): the recovery of a later run would send it.
	run, renewed := startDevRun(t, first, db, keys)
	if len(renewed) != 0 {
		t.Fatalf("a new store reports chains that started over: %v", renewed)
	}
	mined, err := run.txs.Send(ctx, "p", id, request(1), "key-1")
	if err != nil {
		t.Fatal(err)
	}
	wait.Within(t, 10*time.Second, "the first send mined", func() bool { return run.state(t, mined).State == store.StateMined })
	rec, err := run.txs.reserve(ctx, run.pool, id, request(2), reservation{principal: "p", kind: store.KindSend, fields: []byte(`{}`), balance: big.NewInt(1e18)})
	if err != nil {
		t.Fatal(err)
	}
	raw, stuck, err := run.txs.signRecord(context.Background(), rec, request(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, func(tx *store.DBTx) error { return tx.SetSigned(ctx, rec.ID, raw, stuck, store.StateSigned) }); err != nil {
		t.Fatal(err)
	}
	run.stop()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	// Second run, on a new dev chain.
	second := startDevChain(t)
	run, renewed = startDevRun(t, second, db, keys)
	if !renewed[id] {
		t.Fatalf("chain %d not reported as started over: %v", id, renewed)
	}
	if logs := run.logs.FilterMessageSnippet("started over").All(); len(logs) != 1 || logs[0].Level != zapcore.WarnLevel ||
		logs[0].ContextMap()["abandoned"] != int64(2) {
		t.Fatalf("log lines about the new genesis: %+v, want one warning with abandoned=2", logs)
	}
	for _, h := range []common.Hash{mined, stuck} {
		if rec := run.state(t, h); rec.State != store.StateAbandoned {
			t.Fatalf("%s of the previous chain is %s, want abandoned", h.Hex(), rec.State)
		}
	}
	if err := db.Read(ctx, func(tx *store.DBTx) error {
		n, _, err := tx.InFlight(ctx, id, from)
		if n != 0 {
			t.Errorf("%d transactions in flight after the new genesis, want 0", n)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The same idempotency key is a new transaction on the new chain.
	next, err := run.txs.Send(ctx, "p", id, request(3), "key-1")
	if err != nil {
		t.Fatalf("send on the new chain: %v", err)
	}
	if next == mined {
		t.Fatal("the idempotency key answered the abandoned transaction")
	}
	// Mined as the confirmer sees it: its recovery ran before.
	wait.Within(t, 10*time.Second, "the send on the new chain mined", func() bool { return run.state(t, next).State == store.StateMined })
	if n := run.state(t, next).Nonce; n != 0 {
		t.Fatalf("the send on the new chain has nonce %d, want 0", n)
	}
	res, err := run.pool.Forward(ctx, "eth_getTransactionByHash", []byte(`["`+stuck.Hex()+`"]`))
	if err != nil || string(res) != "null" {
		t.Fatalf("the stored transaction of the previous chain reached the new one: %s %v", res, err)
	}
	if n := run.chainNonce(t, from, "pending"); n != 1 {
		t.Fatalf("pending nonce %d on the new chain, want 1 (only the new send)", n)
	}
	run.stop()

	// Third run, on the same chain: nothing is abandoned, nonces go on.
	run, renewed = startDevRun(t, second, db, keys)
	if len(renewed) != 0 {
		t.Fatalf("a restart on the same chain reports %v as started over", renewed)
	}
	after, err := run.txs.Send(ctx, "p", id, request(4), "")
	if err != nil {
		t.Fatal(err)
	}
	wait.Within(t, 10*time.Second, "the send after the restart mined", func() bool { return run.state(t, after).State == store.StateMined })
	if s, n := run.state(t, next).State, run.state(t, after).Nonce; s == store.StateAbandoned || n != 1 {
		t.Fatalf("after a restart on the same chain: the earlier send is %s, the next has nonce %d (want 1)", s, n)
	}
	if got := hexutil.Uint64(run.chainNonce(t, from, "latest")); got != 2 {
		t.Fatalf("latest nonce %d, want 2", got)
	}
}

// downChain is a chain whose node does not answer until up is set.
type downChain struct {
	*fakeChain
	up atomic.Bool
}

func (d *downChain) Forward(ctx context.Context, method string, params []byte) ([]byte, error) {
	if !d.up.Load() {
		return nil, jsonrpc.ErrUpstreamUnavailable.With("no healthy upstream node")
	}
	return d.fakeChain.Forward(ctx, method, params)
}

// TestGenesisCheckedWhenTheNodeComesBack: a chain whose node is down at start is not held
// against the start; its sends fail as the node's reads do, nothing is reserved or recovered,
// and once the node answers with a new genesis, whichever comes first — the confirmer, before
// its recovery could send them, or the first send, before its reservation — abandons the
// previous chain's rows; the send takes the new chain's nonce 0. The node being down is
// logged once.
func TestGenesisCheckedWhenTheNodeComesBack(t *testing.T) {
	for _, confirmerFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("confirmer first %v", confirmerFirst), func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, Config{})
			old, err := f.txs.Send(ctx, "p", 7, f.request(1), "")
			if err != nil {
				t.Fatal(err)
			}

			// The node restarts from another genesis, and is not up yet when web3gate starts.
			reset := newFakeChain()
			reset.blocks[0].hash = common.HexToHash("0xb1")
			node := &downChain{fakeChain: reset}
			core, logs := observer.New(zapcore.InfoLevel)
			txs, err := New(Config{PollInterval: 20 * time.Millisecond, BroadcastTimeout: 500 * time.Millisecond},
				Deps{Signers: f.txs.keys, DB: f.db, Chains: map[uint64]Chain{7: node}, Logger: zap.New(core)})
			if err != nil {
				t.Fatal(err)
			}
			if renewed := txs.CheckGeneses(ctx, nil); len(renewed) != 0 {
				t.Fatalf("renewed %v with the node down", renewed)
			}
			if confirmerFirst {
				runCtx, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { defer close(done); txs.Run(runCtx) }()
				defer func() { stop(); <-done }()
			}
			if _, err := txs.Send(ctx, "p", 7, f.request(2), ""); !errors.Is(err, jsonrpc.ErrUpstreamUnavailable) {
				t.Fatalf("send with the node down: %v, want -32002", err)
			}
			time.Sleep(100 * time.Millisecond) // a few confirmer attempts with the node down
			node.up.Store(true)
			if confirmerFirst {
				wait.Within(t, 10*time.Second, "the old send abandoned", func() bool {
					rec, err := txs.Transaction(ctx, "p", old)
					return err == nil && rec.State == store.StateAbandoned
				})
			}
			h, err := txs.Send(ctx, "p", 7, f.request(3), "")
			if err != nil {
				t.Fatal(err)
			}
			rec, err := txs.Transaction(ctx, "p", h)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Nonce != 0 {
				t.Fatalf("send after the node came back has nonce %d, want 0", rec.Nonce)
			}
			if rec, err = txs.Transaction(ctx, "p", old); err != nil {
				t.Fatal(err)
			}
			if rec.State != store.StateAbandoned {
				t.Fatalf("the previous chain's transaction is %s, want abandoned", rec.State)
			}
			reset.mu.Lock()
			sent := reset.sent
			reset.mu.Unlock()
			if sent != 1 {
				t.Fatalf("the reset node received %d transactions, want 1 (the new send; nothing of the previous chain)", sent)
			}
			if n := logs.FilterMessageSnippet("cannot be read").Len(); n != 1 {
				t.Fatalf("%d log lines about the node being down, want 1", n)
			}
			if n := logs.FilterMessageSnippet("started over").FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
				t.Fatalf("%d warnings about the new genesis, want 1", n)
			}
		})
	}
}
