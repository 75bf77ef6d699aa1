package txmgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr/txreq"
	"github.com/web3gate/web3gate/wallet"
)

// fakeChain is a chain in memory for the nonce manager: a pool of accepted transactions, a
// block sealed on demand, and hooks that make eth_sendRawTransaction fail.
type fakeChain struct {
	mu      sync.Mutex
	chainID *big.Int
	nonces  map[common.Address]uint64 // mined nonce per sender
	pool    map[common.Hash]*types.Transaction
	blocks  []fakeBlock // index = number
	mined   map[common.Hash]uint64
	// reject, when set, answers eth_sendRawTransaction instead of accepting.
	reject func(tx *types.Transaction) error
	sent   int

	// The latest block's fee market ("" base fee: before London) and what the node suggests
	// and estimates. tip nil: no eth_maxPriorityFeePerGas; estimateErr answers the estimate.
	baseFee      string
	gasUsed      uint64
	tip          *big.Int
	estimate     uint64
	estimateErr  error
	estimateArgs []json.RawMessage // the params of every eth_estimateGas
}

type fakeBlock struct {
	hash common.Hash
	txs  []common.Hash
}

func newFakeChain() *fakeChain {
	return &fakeChain{chainID: big.NewInt(7), nonces: map[common.Address]uint64{}, pool: map[common.Hash]*types.Transaction{},
		blocks: []fakeBlock{{hash: common.HexToHash("0xb0")}}, mined: map[common.Hash]uint64{},
		baseFee: "0x7", tip: big.NewInt(3), estimate: 21000}
}

// seal mines every executable pooled transaction into a new block with hash salt-derived.
func (f *fakeChain) seal(salt string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	signer := types.LatestSignerForChainID(f.chainID)
	var b fakeBlock
	for progress := true; progress; {
		progress = false
		for h, tx := range f.pool {
			from, _ := types.Sender(signer, tx)
			if tx.Nonce() == f.nonces[from] {
				f.nonces[from]++
				b.txs = append(b.txs, h)
				f.mined[h] = uint64(len(f.blocks))
				delete(f.pool, h)
				progress = true
			}
		}
	}
	b.hash = crypto.Keccak256Hash([]byte(fmt.Sprintf("%s-%d", salt, len(f.blocks))))
	f.blocks = append(f.blocks, b)
}

// reorgLast replaces the last block with an empty one: its transactions go back to the pool.
func (f *fakeChain) reorgLast(txsBack map[common.Hash]*types.Transaction) {
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.blocks[len(f.blocks)-1]
	signer := types.LatestSignerForChainID(f.chainID)
	for _, h := range last.txs {
		tx := txsBack[h]
		from, _ := types.Sender(signer, tx)
		f.nonces[from]--
		delete(f.mined, h)
		f.pool[h] = tx
	}
	f.blocks[len(f.blocks)-1] = fakeBlock{hash: common.HexToHash("0xfeed")}
}

func (f *fakeChain) Forward(ctx context.Context, method string, params []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ps []json.RawMessage
	_ = json.Unmarshal(params, &ps)
	str := func(i int) string {
		var s string
		_ = json.Unmarshal(ps[i], &s)
		return s
	}
	switch method {
	case "eth_getBlockByNumber":
		n := uint64(len(f.blocks) - 1)
		if tag := str(0); tag != "latest" {
			v, _ := hexutil.DecodeUint64(tag)
			if v > n {
				return []byte("null"), nil
			}
			n = v
		}
		b := f.blocks[n]
		block := map[string]any{"number": hexutil.Uint64(n), "hash": b.hash, "gasLimit": "0x1c9c380",
			"gasUsed": hexutil.Uint64(f.gasUsed), "transactions": append([]common.Hash{}, b.txs...)}
		if f.baseFee != "" {
			block["baseFeePerGas"] = f.baseFee
		}
		return json.Marshal(block)
	case "eth_maxPriorityFeePerGas":
		if f.tip == nil {
			return nil, jsonrpc.ErrMethodNotFound
		}
		return json.Marshal((*hexutil.Big)(f.tip))
	case "eth_estimateGas":
		f.estimateArgs = append(f.estimateArgs, append(json.RawMessage(nil), ps[0]...))
		if f.estimateErr != nil {
			return nil, f.estimateErr
		}
		return json.Marshal(hexutil.Uint64(f.estimate))
	case "eth_getBalance":
		return []byte(`"0xde0b6b3a7640000"`), nil // 1 ether
	case "eth_getTransactionCount":
		return json.Marshal(hexutil.Uint64(f.nonces[common.HexToAddress(str(0))]))
	case "eth_gasPrice":
		return []byte(`"0x10"`), nil
	case "eth_getTransactionReceipt":
		h := common.HexToHash(str(0))
		n, ok := f.mined[h]
		if !ok {
			return []byte("null"), nil
		}
		return json.Marshal(map[string]any{"blockNumber": hexutil.Uint64(n), "blockHash": f.blocks[n].hash})
	case "eth_sendRawTransaction":
		var tx types.Transaction
		if err := tx.UnmarshalBinary(hexutil.MustDecode(str(0))); err != nil {
			return nil, &jsonrpc.Error{Code: -32000, Message: "bad tx"}
		}
		f.sent++
		if f.reject != nil {
			if err := f.reject(&tx); err != nil {
				return nil, err
			}
		}
		from, _ := types.Sender(types.LatestSignerForChainID(f.chainID), &tx)
		if _, ok := f.pool[tx.Hash()]; ok {
			return nil, &jsonrpc.Error{Code: -32000, Message: "already known"}
		}
		if tx.Nonce() < f.nonces[from] {
			return nil, &jsonrpc.Error{Code: -32000, Message: "nonce too low"}
		}
		f.pool[tx.Hash()] = &tx
		return json.Marshal(tx.Hash())
	}
	return nil, jsonrpc.ErrMethodNotFound
}

type fixture struct {
	txs   *Manager
	chain *fakeChain
	from  common.Address
	db    *store.DB
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	return newFixtureWith(t, cfg, testStoreConfig(t, filepath.Join(t.TempDir(), "w.db")))
}

// forEachStore runs test on a SQLite store and on a PostgreSQL one (whose reservations are
// grouped per account, reserve_group.go), as subtests named after the drivers, whatever
// WEB3GATE_TEST_STORE says.
func forEachStore(t *testing.T, test func(t *testing.T, driver string)) {
	t.Helper()
	for _, d := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(d, func(t *testing.T) { test(t, d) })
	}
}

// newFixtureOn is newFixture on a store of driver: a SQLite file in a temporary directory, or
// a fresh PostgreSQL database (internal/testengine).
func newFixtureOn(t *testing.T, cfg Config, driver string) *fixture {
	t.Helper()
	scfg := store.Config{Path: filepath.Join(t.TempDir(), "w.db")}
	if driver == store.DriverPostgres {
		scfg = store.Config{Driver: store.DriverPostgres, DSN: testengine.Postgres(t), MaxConns: 8}
	}
	return newFixtureWith(t, cfg, scfg)
}

func newFixtureWith(t *testing.T, cfg Config, scfg store.Config) *fixture {
	t.Helper()
	scfg.SetDefaults()
	db, err := store.Open(context.Background(), scfg, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	keys, from := inMemoryKeys(t, "nonce manager")
	ch := newFakeChain()
	if cfg.BroadcastTimeout == 0 {
		cfg.BroadcastTimeout = 500 * time.Millisecond
	}
	// The log shows on failure: an internal error names its cause only there.
	txs, err := New(cfg, Deps{Signers: wallet.NewSigners(keys, wallet.SignersDeps{}), DB: db, Chains: map[uint64]Chain{7: ch}, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{txs: txs, chain: ch, from: from, db: db}
}

// inMemoryKeys returns keys without a keystore holding the key keccak256(seed) in memory, and
// that key's address.
func inMemoryKeys(t testing.TB, seed string) (*wallet.Keys, common.Address) {
	t.Helper()
	k := wallet.MemoryKeys(wallet.Deps{})
	key, err := crypto.ToECDSA(crypto.Keccak256([]byte(seed)))
	if err != nil {
		t.Fatal(err)
	}
	return k, k.AddInMemory(key)
}

func (f *fixture) request(value int64) *txreq.Request {
	to := common.HexToAddress("0xdead")
	return &txreq.Request{From: f.from, To: &to, Gas: 21000, GasPrice: big.NewInt(10), Value: big.NewInt(value), Data: []byte{}}
}

func (f *fixture) nonceOf(t *testing.T, h common.Hash) uint64 {
	t.Helper()
	rec, err := f.txs.Transaction(context.Background(), "p", h)
	if err != nil {
		t.Fatalf("transaction %s: %v", h.Hex(), err)
	}
	return rec.Nonce
}

// TestRejectedTopNonceIsReused: a node refusing the newest nonce's transaction moves the head
// back, so the next send takes the same nonce and no gap is left.
func TestRejectedTopNonceIsReused(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	h0, err := f.txs.Send(ctx, "p", 7, f.request(1), "")
	if err != nil {
		t.Fatal(err)
	}
	f.chain.reject = func(*types.Transaction) error {
		return &jsonrpc.Error{Code: -32000, Message: "exceeds block gas limit"}
	}
	_, err = f.txs.Send(ctx, "p", 7, f.request(2), "")
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Message != "exceeds block gas limit" {
		t.Fatalf("rejected send: %v (the node's error passes through)", err)
	}
	f.chain.reject = nil
	h2, err := f.txs.Send(ctx, "p", 7, f.request(3), "")
	if err != nil {
		t.Fatal(err)
	}
	if f.nonceOf(t, h0) != 0 || f.nonceOf(t, h2) != 1 {
		t.Fatalf("nonces %d, %d; want 0, 1", f.nonceOf(t, h0), f.nonceOf(t, h2))
	}
}

// TestRejectedMiddleNonceIsFilled: a refused transaction below a nonce handed out already is
// replaced by a zero-value self-transfer, so the later one is mined.
func TestRejectedMiddleNonceIsFilled(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	// Nonce 1 is handed out (eth_signTransaction) before nonce 0's send is refused.
	rec0, err := f.txs.reserve(ctx, f.chain, 7, f.request(1), reservation{principal: "p", kind: store.KindSend, fields: []byte(`{}`), balance: big.NewInt(1e18)})
	if err != nil {
		t.Fatal(err)
	}
	raw1, err := f.txs.SignTransaction(ctx, "p", 7, f.request(2))
	if err != nil {
		t.Fatal(err)
	}
	f.chain.reject = func(tx *types.Transaction) error {
		if tx.Nonce() == 0 && tx.Value().Sign() != 0 {
			return &jsonrpc.Error{Code: -32000, Message: "insufficient funds for gas * price + value"}
		}
		return nil
	}
	if _, _, err := f.txs.complete(ctx, f.chain, rec0, f.request(1)); err == nil {
		t.Fatal("refused transaction reported as sent")
	}
	if _, err := f.chain.Forward(ctx, "eth_sendRawTransaction", []byte(`["`+hexutil.Encode(raw1)+`"]`)); err != nil {
		t.Fatal(err)
	}
	f.chain.seal("a")
	if n := f.chain.nonces[f.from]; n != 2 {
		t.Fatalf("account nonce %d after the filler, want 2 (nonce 1 stuck behind a gap)", n)
	}
}

// TestNonceUsedOutsideIsRetried: when another signer used the nonce, the send is retried with
// a new one and succeeds; the first row fails.
func TestNonceUsedOutsideIsRetried(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	if _, err := f.txs.Send(ctx, "p", 7, f.request(1), ""); err != nil {
		t.Fatal(err)
	}
	f.chain.seal("a")
	f.chain.mu.Lock()
	f.chain.nonces[f.from] += 2 // two transactions from elsewhere
	f.chain.mu.Unlock()
	h, err := f.txs.Send(ctx, "p", 7, f.request(2), "key-1")
	if err != nil {
		t.Fatalf("send after outside use: %v", err)
	}
	if n := f.nonceOf(t, h); n != 3 {
		t.Fatalf("nonce %d, want 3", n)
	}
	// The idempotency key went with the retry: repeating the request answers its hash.
	if again, err := f.txs.Send(ctx, "p", 7, f.request(2), "key-1"); err != nil || again != h {
		t.Fatalf("repeat with the key: %s, %v; want %s", again.Hex(), err, h.Hex())
	}
}

// TestUnacceptedSendIsFinishedByTheConfirmer: with no node accepting, the caller gets
// -32011 with the stored hash; the confirmer sends the same bytes once a node is back.
func TestUnacceptedSendIsFinishedByTheConfirmer(t *testing.T) {
	f := newFixture(t, Config{PollInterval: 20 * time.Millisecond, RebroadcastAfter: time.Second})
	ctx := context.Background()
	f.chain.reject = func(*types.Transaction) error { return jsonrpc.ErrUpstreamUnavailable }
	_, err := f.txs.Send(ctx, "p", 7, f.request(1), "")
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32011 {
		t.Fatalf("send with no node: %v", err)
	}
	data, _ := json.Marshal(rpcErr.Data)
	var d struct{ Hash common.Hash }
	if json.Unmarshal(data, &d) != nil || d.Hash == (common.Hash{}) || !strings.Contains(string(data), `"signed"`) {
		t.Fatalf("error data %s", data)
	}
	f.chain.mu.Lock()
	f.chain.reject = nil
	f.chain.mu.Unlock()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.txs.Run(runCtx) }()
	defer func() { stop(); <-done }()
	wait.Within(t, 10*time.Second, "the send mined", func() bool {
		f.chain.seal("b")
		rec, err := f.txs.Transaction(ctx, "p", d.Hash)
		return err == nil && rec.State == store.StateMined
	})
}

// TestReorgMovesBackToBroadcast: a mined transaction whose block leaves the chain goes back
// to broadcast, then to mined in the new block.
func TestReorgMovesBackToBroadcast(t *testing.T) {
	f := newFixture(t, Config{PollInterval: 20 * time.Millisecond, FinalityDepth: 5})
	ctx := context.Background()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.txs.Run(runCtx) }()
	defer func() { stop(); <-done }()
	h, err := f.txs.Send(ctx, "p", 7, f.request(1), "")
	if err != nil {
		t.Fatal(err)
	}
	f.chain.mu.Lock()
	tx := f.chain.pool[h]
	f.chain.mu.Unlock()
	f.chain.seal("a")
	state := func() *store.TxRecord {
		rec, err := f.txs.Transaction(ctx, "p", h)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	wait.Within(t, 10*time.Second, "the send mined", func() bool { return state().State == store.StateMined })
	first := state().BlockHash
	f.chain.reorgLast(map[common.Hash]*types.Transaction{h: tx})
	wait.Within(t, 10*time.Second, "the send back to broadcast after the reorg", func() bool { return state().State == store.StateBroadcast })
	f.chain.seal("c")
	wait.Within(t, 10*time.Second, "the send mined in another block", func() bool { s := state(); return s.State == store.StateMined && s.BlockHash != first })
}

// TestExpiredHandOutIsReused: a handed-out nonce not used within the TTL is released and
// taken by the next signing.
func TestExpiredHandOutIsReused(t *testing.T) {
	f := newFixture(t, Config{PollInterval: 20 * time.Millisecond, HandOutTTL: time.Second})
	ctx := context.Background()
	raw, err := f.txs.SignTransaction(ctx, "p", 7, f.request(1))
	if err != nil {
		t.Fatal(err)
	}
	var first types.Transaction
	if err := first.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.txs.Run(runCtx) }()
	defer func() { stop(); <-done }()
	wait.Within(t, 10*time.Second, "the nonce released", func() bool {
		rec, err := f.txs.Transaction(ctx, "p", first.Hash())
		return err == nil && rec.State == store.StateReleased
	})
	raw2, err := f.txs.SignTransaction(ctx, "p", 7, f.request(2))
	if err != nil {
		t.Fatal(err)
	}
	var second types.Transaction
	if err := second.UnmarshalBinary(raw2); err != nil {
		t.Fatal(err)
	}
	if first.Nonce() != 0 || second.Nonce() != 0 {
		t.Fatalf("nonces %d then %d, want the released 0 reused", first.Nonce(), second.Nonce())
	}
}

// TestSignTransactionSignedInsideReservation: eth_signTransaction with a key unlocked in
// memory is handed out with contiguous nonces, its row holding its bytes and its hold, on
// both stores; on SQLite it is signed inside the reservation's store transaction, so the row
// is written once, already handed out (PostgreSQL's grouped reservations sign after).
func TestSignTransactionSignedInsideReservation(t *testing.T) {
	forEachStore(t, func(t *testing.T, driver string) {
		f := newFixtureOn(t, Config{HandOutTTL: time.Hour}, driver)
		ctx := context.Background()
		for i := range 3 {
			before := time.Now()
			raw, err := f.txs.SignTransaction(ctx, "p", 7, f.request(int64(i+1)))
			if err != nil {
				t.Fatal(err)
			}
			var tx types.Transaction
			if err := tx.UnmarshalBinary(raw); err != nil {
				t.Fatal(err)
			}
			if from, err := types.Sender(types.LatestSignerForChainID(big.NewInt(7)), &tx); err != nil || from != f.from || tx.Nonce() != uint64(i) {
				t.Fatalf("signature %d: from %s (%v), nonce %d", i, from.Hex(), err, tx.Nonce())
			}
			rec, err := f.txs.Transaction(ctx, "p", tx.Hash())
			if err != nil {
				t.Fatal(err)
			}
			if rec.State != store.StateHandedOut || string(rec.Raw) != string(raw) || rec.Kind != store.KindSign ||
				rec.ExpiresAt.Before(before.Add(time.Hour-time.Minute)) {
				t.Fatalf("row %d: state %s, kind %s, expires %v, raw stored %v", i, rec.State, rec.Kind, rec.ExpiresAt, string(rec.Raw) == string(raw))
			}
			if driver == store.DriverSQLite && !rec.CreatedAt.Equal(rec.UpdatedAt) {
				t.Errorf("row %d: updated at %v after its creation at %v: written twice", i, rec.UpdatedAt, rec.CreatedAt)
			}
		}
	})
}
