package txmgr

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/txmgr/txreq"
)

// parseFill reads a transaction object in the form clients send.
func parseFill(t *testing.T, obj string) *txreq.Request {
	t.Helper()
	r, err := txreq.ParseFill([]byte("["+obj+"]"), 7)
	if err != nil {
		t.Fatalf("ParseFill(%s): %v", obj, err)
	}
	return r
}

// sentTx is the transaction the node received for hash.
func (f *fixture) sentTx(t *testing.T, h common.Hash) *types.Transaction {
	t.Helper()
	f.chain.mu.Lock()
	defer f.chain.mu.Unlock()
	tx, ok := f.chain.pool[h]
	if !ok {
		t.Fatalf("the node has no transaction %s", h.Hex())
	}
	return tx
}

// TestFillFees: the fees filled for each combination of what the client gave and what the
// chain is, by the documented rules; a given field is never changed.
func TestFillFees(t *testing.T) {
	const to = `"to":"0x000000000000000000000000000000000000dead"`
	for _, tc := range []struct {
		name     string
		baseFee  string // latest block's base fee; "" before London
		gasUsed  uint64 // of the 30,000,000 gas limit
		tip      *big.Int
		extra    string
		wantType uint8
		wantFee  int64 // gasPrice, or maxFeePerGas
		wantTip  int64
		filled   []string
	}{
		// next base fee of an empty block: 1000 - 1000/8 = 875; 2 × 875 + 3.
		{"london, nothing given", "0x3e8", 0, big.NewInt(3), "", types.DynamicFeeTxType, 1753, 3,
			[]string{"gas", "maxFeePerGas", "maxPriorityFeePerGas", "value", "data"}},
		// a full block: 1000 + 1000/8 = 1125; 2 × 1125 + 3.
		{"london, full block", "0x3e8", 30_000_000, big.NewInt(3), "", types.DynamicFeeTxType, 2253, 3,
			[]string{"gas", "maxFeePerGas", "maxPriorityFeePerGas", "value", "data"}},
		// at the target: unchanged, 2 × 1000 + 3.
		{"london, half full", "0x3e8", 15_000_000, big.NewInt(3), "", types.DynamicFeeTxType, 2003, 3,
			[]string{"gas", "maxFeePerGas", "maxPriorityFeePerGas", "value", "data"}},
		{"maxFeePerGas given", "0x3e8", 0, big.NewInt(3), `,"maxFeePerGas":"0x5dc"`, types.DynamicFeeTxType, 1500, 3,
			[]string{"gas", "maxPriorityFeePerGas", "value", "data"}},
		{"suggested tip above the given cap", "0x3e8", 0, big.NewInt(5000), `,"maxFeePerGas":"0x3e8"`, types.DynamicFeeTxType, 1000, 1000,
			[]string{"gas", "maxPriorityFeePerGas", "value", "data"}},
		{"tip given", "0x3e8", 0, big.NewInt(3), `,"maxPriorityFeePerGas":"0x64"`, types.DynamicFeeTxType, 1850, 100,
			[]string{"gas", "maxFeePerGas", "value", "data"}},
		// no eth_maxPriorityFeePerGas: eth_gasPrice (16) less the base fee (7).
		{"no tip method", "0x7", 15_000_000, nil, "", types.DynamicFeeTxType, 23, 9,
			[]string{"gas", "maxFeePerGas", "maxPriorityFeePerGas", "value", "data"}},
		{"type 0x0 asked", "0x7", 0, big.NewInt(3), `,"type":"0x0"`, types.LegacyTxType, 16, 0,
			[]string{"gas", "gasPrice", "value", "data"}},
		{"before london", "", 0, big.NewInt(3), `,"value":"0x0","data":"0x"`, types.LegacyTxType, 16, 0,
			[]string{"gas", "gasPrice"}},
		{"gasPrice given", "0x7", 0, big.NewInt(3), `,"gasPrice":"0x2a"`, types.LegacyTxType, 42, 0,
			[]string{"gas", "value", "data"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{})
			f.chain.baseFee, f.chain.gasUsed, f.chain.tip, f.chain.estimate = tc.baseFee, tc.gasUsed, tc.tip, 25000
			r := parseFill(t, `{"from":"`+f.from.Hex()+`",`+to+tc.extra+`}`)
			h, err := f.txs.Send(context.Background(), "p", 7, r, "")
			if err != nil {
				t.Fatal(err)
			}
			tx := f.sentTx(t, h)
			if tx.Type() != tc.wantType || tx.Gas() != 25000 || tx.Value().Sign() != 0 || len(tx.Data()) != 0 {
				t.Fatalf("type %d gas %d value %s data %x", tx.Type(), tx.Gas(), tx.Value(), tx.Data())
			}
			if got := tx.GasFeeCap().Int64(); got != tc.wantFee {
				t.Errorf("fee %d, want %d", got, tc.wantFee)
			}
			if tc.wantType == types.DynamicFeeTxType && tx.GasTipCap().Int64() != tc.wantTip {
				t.Errorf("tip %s, want %d", tx.GasTipCap(), tc.wantTip)
			}
			rec, err := f.txs.Transaction(context.Background(), "p", h)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.Filled, tc.filled) {
				t.Errorf("filled %v, want %v", rec.Filled, tc.filled)
			}
			// The estimate saw the filled fees and the other fields, never a nonce or gas.
			var args map[string]any
			if len(f.chain.estimateArgs) != 1 || json.Unmarshal(f.chain.estimateArgs[0], &args) != nil {
				t.Fatalf("estimates: %s", f.chain.estimateArgs)
			}
			if args["from"] == nil || args["to"] == nil || args["gas"] != nil || args["nonce"] != nil ||
				args["gasPrice"] == nil && args["maxFeePerGas"] == nil {
				t.Errorf("estimate args %v", args)
			}
		})
	}
}

// TestFillEstimateRevert: an estimate the node refuses (a revert, code 3 with its data) is the
// answer, unchanged, and no nonce is taken.
func TestFillEstimateRevert(t *testing.T) {
	f := newFixture(t, Config{})
	revert := &jsonrpc.Error{Code: 3, Message: "execution reverted: not owner", Data: "0x08c379a0"}
	f.chain.estimateErr = revert
	_, err := f.txs.Send(context.Background(), "p", 7, parseFill(t, `{"from":"`+f.from.Hex()+`","to":"0x000000000000000000000000000000000000dead","data":"0x1234"}`), "")
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != 3 || rpcErr.Message != revert.Message || rpcErr.Data != revert.Data {
		t.Fatalf("revert answered %v", err)
	}
	f.chain.estimateErr = nil
	h, err := f.txs.Send(context.Background(), "p", 7, f.request(1), "")
	if err != nil {
		t.Fatal(err)
	}
	if n := f.nonceOf(t, h); n != 0 {
		t.Fatalf("next send got nonce %d, want 0", n)
	}
}

// TestFeeFloor: a fee cap is refused only below the lowest base fee the next block can have,
// the latest base fee less 1/8.
func TestFeeFloor(t *testing.T) {
	for _, tc := range []struct {
		fee  string
		want bool // accepted
	}{{"0x36b", true}, {"0x36a", false}, {"0x3e8", true}} { // 875, 874, 1000 against a base fee of 1000
		f := newFixture(t, Config{})
		f.chain.baseFee = "0x3e8"
		r := f.request(1)
		r.GasPrice = hexutil.MustDecodeBig(tc.fee)
		_, err := f.txs.Send(context.Background(), "p", 7, r, "")
		if tc.want != (err == nil) {
			t.Errorf("gasPrice %s: %v", tc.fee, err)
		}
		if !tc.want && (!errors.Is(err, ErrUnderpriced) || !strings.Contains(err.Error(), "below 875, the lowest base fee the block after block 0 (base fee 1000) can have")) {
			t.Errorf("gasPrice %s refused with %v", tc.fee, err)
		}
	}
}

// TestClientNonce: a nonce the client gives is accepted only when it is the account's next;
// a refused one reserves nothing; PendingNonce answers the next one.
func TestClientNonce(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	if n, err := f.txs.PendingNonce(ctx, 7, f.from); err != nil || n != nil {
		t.Fatalf("PendingNonce before any send: %v, %v (want nil: the node answers)", n, err)
	}
	withNonce := func(n uint64) *txreq.Request {
		r := f.request(1)
		r.Nonce = &n
		return r
	}
	for _, tc := range []struct {
		nonce uint64
		err   string
	}{
		{1, "nonce too high: next nonce is 0, tx nonce 1"},
		{0, ""},
		{0, "nonce too low: next nonce is 1, tx nonce 0"},
		{5, "nonce too high: next nonce is 1, tx nonce 5"},
		{1, ""},
	} {
		h, err := f.txs.Send(ctx, "p", 7, withNonce(tc.nonce), "")
		switch {
		case tc.err == "" && err != nil:
			t.Fatalf("nonce %d: %v", tc.nonce, err)
		case tc.err == "" && f.nonceOf(t, h) != tc.nonce:
			t.Fatalf("nonce %d signed as %d", tc.nonce, f.nonceOf(t, h))
		case tc.err != "" && (!errors.Is(err, ErrNonce) || err.Error() != tc.err):
			t.Fatalf("nonce %d: %v, want %q", tc.nonce, err, tc.err)
		}
	}
	if n, err := f.txs.PendingNonce(ctx, 7, f.from); err != nil || n == nil || *n != 2 {
		t.Fatalf("PendingNonce = %v, %v; want 2", n, err)
	}
	// A handed-out nonce counts; a released slot is offered first.
	if _, err := f.txs.SignTransaction(ctx, "p", 7, f.request(1)); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.txs.PendingNonce(ctx, 7, f.from); n == nil || *n != 3 {
		t.Fatalf("PendingNonce after a signing = %v; want 3", n)
	}
	if n, _ := f.txs.PendingNonce(ctx, 7, common.HexToAddress("0x1")); n != nil {
		t.Fatalf("PendingNonce of an account not held = %d", *n)
	}
}

// TestContractCreation: a creation is signed without a recipient; a rule may forbid it.
func TestContractCreation(t *testing.T) {
	f := newFixture(t, Config{})
	f.chain.estimate = 60000
	h, err := f.txs.Send(context.Background(), "p", 7, parseFill(t, `{"from":"`+f.from.Hex()+`","data":"0x6000"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if tx := f.sentTx(t, h); tx.To() != nil || string(tx.Data()) != "\x60\x00" {
		t.Fatalf("creation sent with to %v data %x", tx.To(), tx.Data())
	}
	for _, rule := range []RuleConfig{
		{Account: f.from.Hex(), NoContractCreation: true},
		{Account: f.from.Hex(), AllowedRecipients: []string{"0x000000000000000000000000000000000000dEaD"}},
	} {
		g := newFixture(t, Config{Rules: []RuleConfig{rule}}) // the same key as f's
		g.chain.estimate = 60000
		_, err := g.txs.Send(context.Background(), "p", 7, parseFill(t, `{"from":"`+g.from.Hex()+`","data":"0x6000"}`), "")
		if !errors.Is(err, ErrRule) || !strings.Contains(err.Error(), "may not create contracts") {
			t.Fatalf("rule %+v: creation answered %v", rule, err)
		}
	}
}

// TestSendsWaitForASlot: sends beyond maxInFlight wait until the confirmer sees one mined,
// up to inFlightWait; at most maxQueued wait; none of them takes a nonce while waiting.
func TestSendsWaitForASlot(t *testing.T) {
	f := newFixture(t, Config{MaxInFlight: 2, InFlightWait: 10 * time.Second, PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.txs.Run(ctx) }()
	defer func() { cancel(); <-done }()

	const n = 7
	hashes := make([]common.Hash, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hashes[i], errs[i] = f.txs.Send(context.Background(), "p", 7, f.request(int64(i+1)), "")
		}()
	}
	// Seal blocks until every send is answered: each block frees the slots of its sends.
	answered := make(chan struct{})
	go func() { wg.Wait(); close(answered) }()
	for sealed := false; !sealed; {
		select {
		case <-answered:
			sealed = true
		case <-time.After(50 * time.Millisecond):
			f.chain.seal("b")
		}
	}
	nonces := make([]uint64, n)
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("send %d: %v", i, errs[i])
		}
		nonces[i] = f.nonceOf(t, hashes[i])
	}
	slices.Sort(nonces)
	for i, got := range nonces {
		if got != uint64(i) {
			t.Fatalf("nonces %v: not 0..%d", nonces, n-1)
		}
	}
}

// TestSendsWaitBounded: a send that finds no slot within inFlightWait is refused with
// -32005 (HTTP 429); beyond maxQueued waiting, at once.
func TestSendsWaitBounded(t *testing.T) {
	f := newFixture(t, Config{MaxInFlight: 1, InFlightWait: 300 * time.Millisecond, MaxQueued: 1})
	ctx := context.Background()
	if _, err := f.txs.Send(ctx, "p", 7, f.request(1), ""); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	start := time.Now()
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = f.txs.Send(ctx, "p", 7, f.request(2), "") }()
	}
	wg.Wait()
	var waited, queueFull int
	for _, err := range errs {
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) || rpcErr.Code != -32005 || rpcErr.HTTPStatus != http.StatusTooManyRequests {
			t.Fatalf("send beyond the cap: %v", err)
		}
		switch {
		case strings.Contains(rpcErr.Message, "none left flight within inFlightWait (300ms)"):
			waited++
		case strings.Contains(rpcErr.Message, "the queue of sends waiting for a slot is full"):
			queueFull++
		}
	}
	if waited != 1 || queueFull != 1 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("waited %d, refused for a full queue %d (errors %v)", waited, queueFull, errs)
	}
	if n, _ := f.txs.PendingNonce(ctx, 7, f.from); n == nil || *n != 1 {
		t.Fatalf("next nonce %v after refused sends, want 1", n)
	}
}

// TestFeeFloorRereadsAStaleHead: a fee the cached latest block would refuse is checked again
// against the block read anew (the head may have moved, its base fee fallen), and accepted
// when that block's next can take it.
func TestFeeFloorRereadsAStaleHead(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	f.chain.baseFee = "0x3e8" // 1000
	if _, err := f.txs.Send(ctx, "p", 7, f.request(1), ""); err == nil {
		t.Fatal("a gas price of 10 accepted against a base fee of 1000")
	}
	// The chain moves on; its base fee falls to 10. The block read above is still cached.
	f.chain.mu.Lock()
	f.chain.baseFee = "0xa"
	f.chain.mu.Unlock()
	f.chain.seal("b")
	if _, err := f.txs.Send(ctx, "p", 7, f.request(2), ""); err != nil {
		t.Fatalf("priced at the new base fee, refused against the cached block: %v", err)
	}
}
