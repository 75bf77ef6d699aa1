package txmgr

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// abiRevert is revert data of selector with args ABI-encoded as types.
func abiRevert(t *testing.T, selector string, typ string, arg any) []byte {
	t.Helper()
	ty, err := abi.NewType(typ, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := abi.Arguments{{Type: ty}}.Pack(arg)
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := hex.DecodeString(selector)
	return append(sel, enc...)
}

func TestRevertReason(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"no data", nil, "execution reverted"},
		{"Error(string)", abiRevert(t, "08c379a0", "string", "web3gate test revert"), "execution reverted: web3gate test revert"},
		{"empty Error(string)", abiRevert(t, "08c379a0", "string", ""), "execution reverted: "},
		{"Panic(0x11)", abiRevert(t, "4e487b71", "uint256", big.NewInt(0x11)), "execution reverted: panic 0x11"},
		{"custom error", []byte{0xde, 0xad, 0xbe, 0xef, 0x01}, "execution reverted: custom error 0xdeadbeef01"},
		{"Error(string) not UTF-8, with a NUL", abiRevert(t, "08c379a0", "string", "a\xffb\x00c"), "execution reverted: a\uFFFDb\uFFFDc"},
		{"Error selector, truncated body", []byte{0x08, 0xc3, 0x79, 0xa0, 0x00}, "execution reverted: custom error 0x08c379a000"},
		{"Error selector, length past the end", append([]byte{0x08, 0xc3, 0x79, 0xa0}, append(common.LeftPadBytes([]byte{0x20}, 32), common.LeftPadBytes([]byte{0xff}, 32)...)...),
			"execution reverted: custom error 0x08c379a0" + strings.Repeat("0", 62) + "20" + strings.Repeat("0", 62) + "ff"},
		{"Error selector, huge offset", append([]byte{0x08, 0xc3, 0x79, 0xa0}, common.LeftPadBytes([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 32)...),
			"execution reverted: custom error 0x08c379a0" + strings.Repeat("0", 48) + strings.Repeat("f", 16)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := revertReason(tc.data); got != tc.want {
				t.Fatalf("revertReason(%x) = %q, want %q", tc.data, got, tc.want)
			}
		})
	}
	t.Run("bounded", func(t *testing.T) {
		got := revertReason(abiRevert(t, "08c379a0", "string", long))
		if len(got) > maxRevertReason || !utf8.ValidString(got) || !strings.HasPrefix(got, "execution reverted: éé") {
			t.Fatalf("long reason: %d bytes, valid %v: %q", len(got), utf8.ValidString(got), got[:40])
		}
		if len(got) < maxRevertReason-1 {
			t.Fatalf("long reason cut to %d bytes, want %d or one less", len(got), maxRevertReason)
		}
	})
}

func TestRevertData(t *testing.T) {
	for _, tc := range []struct {
		name string
		data any
		want string
	}{
		{"raw JSON string", json.RawMessage(`"0x08c379a0"`), "08c379a0"},
		{"string", "0xdeadbeef", "deadbeef"},
		{"none", nil, ""},
		{"not hex", json.RawMessage(`"reverted"`), ""},
		{"object", json.RawMessage(`{"x":1}`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hex.EncodeToString(revertData(tc.data)); got != tc.want {
				t.Fatalf("revertData(%v) = %s, want %s", tc.data, got, tc.want)
			}
		})
	}
}

func TestMethodUnsupported(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&jsonrpc.Error{Code: -32601, Message: "the method eth_getBlockReceipts does not exist/is not available"}, true},
		{&jsonrpc.Error{Code: -32000, Message: "Method not found"}, true},
		{&jsonrpc.Error{Code: -32603, Message: "eth_getBlockReceipts is unsupported"}, true},
		{&jsonrpc.Error{Code: -32000, Message: "header not found"}, false},
		{jsonrpc.ErrUpstreamTimeout, false},
	} {
		if got := methodUnsupported(tc.err); got != tc.want {
			t.Errorf("methodUnsupported(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// receiptChain is fakeChain with receipt statuses: the receipts of reverts have status 0,
// eth_getBlockReceipts answers only when blockReceipts is set (else "method not found", as
// from a node without it), and eth_call reverts with Error("boom"). It counts the calls.
type receiptChain struct {
	*fakeChain
	reverts       map[common.Hash]bool
	blockReceipts bool
	calls         map[string]int
}

func (r *receiptChain) receipt(h common.Hash) map[string]any {
	n := r.mined[h]
	status := "0x1"
	if r.reverts[h] {
		status = "0x0"
	}
	return map[string]any{"transactionHash": h, "blockNumber": hexutil.Uint64(n), "blockHash": r.blocks[n].hash, "status": status}
}

func (r *receiptChain) Forward(ctx context.Context, method string, params []byte) ([]byte, error) {
	r.fakeChain.mu.Lock()
	r.calls[method]++
	r.fakeChain.mu.Unlock()
	var ps []string
	switch method {
	case "eth_getBlockReceipts":
		if !r.blockReceipts {
			return nil, &jsonrpc.Error{Code: -32601, Message: "the method eth_getBlockReceipts does not exist/is not available"}
		}
		_ = json.Unmarshal(params, &ps)
		r.fakeChain.mu.Lock()
		defer r.fakeChain.mu.Unlock()
		for _, b := range r.blocks {
			if b.hash == common.HexToHash(ps[0]) {
				out := []map[string]any{}
				for _, h := range b.txs {
					out = append(out, r.receipt(h))
				}
				return json.Marshal(out)
			}
		}
		return []byte("null"), nil
	case "eth_getTransactionReceipt":
		_ = json.Unmarshal(params, &ps)
		r.fakeChain.mu.Lock()
		defer r.fakeChain.mu.Unlock()
		if _, ok := r.mined[common.HexToHash(ps[0])]; !ok {
			return []byte("null"), nil
		}
		return json.Marshal(r.receipt(common.HexToHash(ps[0])))
	case "eth_call":
		data := "0x08c379a0" + hex.EncodeToString(common.LeftPadBytes([]byte{0x20}, 32)) +
			hex.EncodeToString(common.LeftPadBytes([]byte{4}, 32)) + hex.EncodeToString(common.RightPadBytes([]byte("boom"), 32))
		return nil, &jsonrpc.Error{Code: 3, Message: "execution reverted: boom", Data: json.RawMessage(`"` + data + `"`)}
	}
	return r.fakeChain.Forward(ctx, method, params)
}

// TestRevertedOnChain: of two sends mined in one block, the one whose receipt has status 0
// becomes failed with the replay's reason and keeps its block, the other mined; one
// eth_getBlockReceipts for the block (or, from a node without it, a receipt per row) and no
// receipt call for a block without our rows. A reorg dropping the block takes the reverted row
// back to broadcast, in flight, its reason cleared; mined again it fails again. On both stores.
func TestRevertedOnChain(t *testing.T) {
	for _, blockReceipts := range []bool{true, false} {
		t.Run(map[bool]string{true: "eth_getBlockReceipts", false: "per receipt"}[blockReceipts], func(t *testing.T) {
			forEachStore(t, func(t *testing.T, driver string) { testRevertedOnChain(t, driver, blockReceipts) })
		})
	}
}

func testRevertedOnChain(t *testing.T, driver string, blockReceipts bool) {
	f := newFixtureOn(t, Config{FinalityDepth: 3}, driver)
	ctx := context.Background()
	rc := &receiptChain{fakeChain: f.chain, reverts: map[common.Hash]bool{}, blockReceipts: blockReceipts, calls: map[string]int{}}
	c := f.confirmer()
	c.ch = rc
	bad, err := f.txs.Send(ctx, "p", 7, f.request(1), "")
	if err != nil {
		t.Fatal(err)
	}
	good, err := f.txs.Send(ctx, "p", 7, f.request(2), "")
	if err != nil {
		t.Fatal(err)
	}
	rc.reverts[bad] = true
	follow := func() {
		t.Helper()
		if _, err := c.follow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	state := func(h common.Hash) *store.TxRecord {
		t.Helper()
		rec, err := f.txs.Transaction(ctx, "p", h)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	follow() // first sight
	f.chain.mu.Lock()
	sent := maps.Clone(f.chain.pool)
	f.chain.mu.Unlock()
	f.chain.seal("a")
	follow()
	const reason = "execution reverted: boom"
	if r := state(bad); r.State != store.StateFailed || r.Error != reason || r.BlockNumber != 1 || r.MinedHash != bad {
		t.Fatalf("reverted send: state %s, error %q, block %d", r.State, r.Error, r.BlockNumber)
	}
	if n := testutil.ToFloat64(f.txs.metrics.reverted.WithLabelValues("7")); n != 1 {
		t.Errorf("web3gate_tx_reverted_total{chain=7} = %v, want 1", n)
	}
	if r := state(good); r.State != store.StateMined || r.Error != "" {
		t.Fatalf("successful send: state %s, error %q", r.State, r.Error)
	}
	wantBlock, wantOne := 1, 0
	if !blockReceipts {
		wantBlock, wantOne = 1, 2 // refused once, then per receipt
	}
	if rc.calls["eth_getBlockReceipts"] != wantBlock || rc.calls["eth_getTransactionReceipt"] != wantOne || rc.calls["eth_call"] != 1 {
		t.Fatalf("calls %v, want %d eth_getBlockReceipts, %d eth_getTransactionReceipt, 1 eth_call", rc.calls, wantBlock, wantOne)
	}
	// The reorg: block 1 replaced by an empty one.
	f.chain.reorgLast(sent)
	follow()
	if r := state(bad); r.State != store.StateBroadcast || r.Error != "" || r.BlockNumber != 0 {
		t.Fatalf("reverted send after the reorg: state %s, error %q, block %d", r.State, r.Error, r.BlockNumber)
	}
	if n := f.inFlight(t); n != 2 {
		t.Fatalf("in flight after the reorg: %d, want 2", n)
	}
	// A block without our rows costs no receipt call.
	before := rc.calls["eth_getBlockReceipts"] + rc.calls["eth_getTransactionReceipt"]
	f.chain.mu.Lock()
	pool := f.chain.pool
	f.chain.pool = map[common.Hash]*types.Transaction{}
	f.chain.mu.Unlock()
	f.chain.seal("empty")
	follow()
	if after := rc.calls["eth_getBlockReceipts"] + rc.calls["eth_getTransactionReceipt"]; after != before {
		t.Fatalf("%d receipt calls for a block without our transactions", after-before)
	}
	f.chain.mu.Lock()
	f.chain.pool = pool
	f.chain.mu.Unlock()
	f.chain.seal("b")
	follow()
	if r := state(bad); r.State != store.StateFailed || r.Error != reason || r.BlockNumber != 3 {
		t.Fatalf("reverted send mined again: state %s, error %q, block %d", r.State, r.Error, r.BlockNumber)
	}
	if n := f.inFlight(t); n != 0 {
		t.Fatalf("in flight at the end: %d, want 0", n)
	}
	// Deep enough: the good one is confirmed, the reverted one stays failed.
	for i := range 4 {
		f.chain.seal(fmt.Sprint("deep", i))
	}
	follow()
	if r := state(good); r.State != store.StateConfirmed {
		t.Fatalf("successful send after 4 blocks: %s", r.State)
	}
	if r := state(bad); r.State != store.StateFailed {
		t.Fatalf("reverted send after 4 blocks: %s", r.State)
	}
}

func (f *fixture) inFlight(t *testing.T) int {
	t.Helper()
	var n int
	if err := f.db.Read(context.Background(), func(tx *store.DBTx) error {
		var err error
		n, _, err = tx.InFlight(context.Background(), 7, f.from)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRevertCheckedBeforeConfirm: a row mined while no confirmer checked it (another path, or
// a confirmer that stopped before its check: a new one starts with no memory of checks) is
// checked before Confirm moves it: reverted, it becomes failed, not confirmed. A receipt that
// cannot be read holds the confirmation back.
func TestRevertCheckedBeforeConfirm(t *testing.T) {
	f := newFixture(t, Config{FinalityDepth: 2})
	ctx := context.Background()
	bad, err := f.txs.Send(ctx, "p", 7, f.request(1), "")
	if err != nil {
		t.Fatal(err)
	}
	f.chain.seal("a")
	// Recorded mined by a receipt lookup, unchecked.
	f.chain.mu.Lock()
	n := f.chain.mined[bad]
	bh := f.chain.blocks[n].hash
	f.chain.mu.Unlock()
	if err := f.db.Write(ctx, func(tx *store.DBTx) error {
		_, err := tx.SetMined(ctx, 7, bad, n, bh)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f.chain.seal(fmt.Sprint("deep", i))
	}
	rc := &receiptChain{fakeChain: f.chain, reverts: map[common.Hash]bool{bad: true}, blockReceipts: true, calls: map[string]int{}}
	broken := &receiptChain{fakeChain: f.chain, reverts: rc.reverts, blockReceipts: true, calls: map[string]int{}}
	c := f.confirmer()
	c.ch = brokenReceipts{broken}
	if _, err := c.follow(ctx); err == nil {
		t.Fatal("a pass whose receipt check failed reported no error")
	}
	rec, err := f.txs.Transaction(ctx, "p", bad)
	if err != nil || rec.State != store.StateMined {
		t.Fatalf("after a failed check: %v %v, want still mined", rec.State, err)
	}
	c.ch = rc
	if _, err := c.follow(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err = f.txs.Transaction(ctx, "p", bad)
	if err != nil || rec.State != store.StateFailed || rec.Error != "execution reverted: boom" {
		t.Fatalf("checked before Confirm: %v %q %v, want failed", rec.State, rec.Error, err)
	}
}

// brokenReceipts is a node whose receipt reads fail.
type brokenReceipts struct{ *receiptChain }

func (b brokenReceipts) Forward(ctx context.Context, method string, params []byte) ([]byte, error) {
	if method == "eth_getBlockReceipts" || method == "eth_getTransactionReceipt" {
		return nil, jsonrpc.ErrUpstreamUnavailable
	}
	return b.receiptChain.Forward(ctx, method, params)
}
