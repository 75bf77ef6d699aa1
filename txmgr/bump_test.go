package txmgr

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr/txreq"
)

const gwei = 1_000_000_000

func g(n float64) *big.Int { return big.NewInt(int64(n * gwei)) }

func TestRaise(t *testing.T) {
	for _, tc := range []struct {
		v, bp, want int64
	}{{100, 1250, 113}, {1000, 1250, 1125}, {1, 1000, 2}, {0, 1250, 0}, {3 * gwei, 1250, 3375000000}} {
		if got := raise(big.NewInt(tc.v), tc.bp); got.Int64() != tc.want {
			t.Errorf("raise(%d, %d bp) = %v, want %d", tc.v, tc.bp, got, tc.want)
		}
	}
}

func TestNewFees(t *testing.T) {
	dyn := &txreq.Request{MaxFeePerGas: g(3), MaxPriorityFeePerGas: g(1)}
	legacy := &txreq.Request{GasPrice: g(3)}
	rules := func(maxCap *big.Int) bumpRules { return bumpRules{basisPoints: 1250, maxFeeCap: maxCap} }
	for _, tc := range []struct {
		name        string
		hi          *txreq.Request
		base, cap   *big.Int
		feeCap, tip *big.Int // type 2
		price       *big.Int // legacy
	}{
		{"type 2, no base fee: the replacement rule", dyn, nil, nil, g(3.375), g(1.125), nil},
		{"type 2, priced out: 2 x base fee + tip", dyn, g(50), nil, g(101.125), g(1.125), nil},
		{"type 2, held at maxFeeCap", dyn, g(4), g(8), g(8), g(1.125), nil},
		{"legacy, priced out: 2 x base fee", legacy, g(50), nil, nil, nil, g(100)},
		{"legacy, the replacement rule", legacy, g(1), nil, nil, nil, g(3.375)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := newFees(tc.hi, tc.base, rules(tc.cap))
			if err != nil {
				t.Fatal(err)
			}
			if !eqBig(f.MaxFeePerGas, tc.feeCap) || !eqBig(f.MaxPriorityFeePerGas, tc.tip) || !eqBig(f.GasPrice, tc.price) {
				t.Errorf("fees %v/%v/%v, want %v/%v/%v", f.MaxFeePerGas, f.MaxPriorityFeePerGas, f.GasPrice, tc.feeCap, tc.tip, tc.price)
			}
		})
	}
}

func TestNewFeesCapReached(t *testing.T) {
	dyn := &txreq.Request{MaxFeePerGas: g(3), MaxPriorityFeePerGas: g(1)}
	for _, tc := range []struct {
		name      string
		hi        *txreq.Request
		base, cap *big.Int
	}{
		{"the base fee above the cap", dyn, g(50), g(10)},
		{"the replacement rule above the cap", dyn, nil, g(3.2)},
		{"legacy, the base fee above the cap", &txreq.Request{GasPrice: g(3)}, g(50), g(10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := newFees(tc.hi, tc.base, bumpRules{basisPoints: 1250, maxFeeCap: tc.cap}); !errors.Is(err, errBumpCap) {
				t.Fatalf("got %v, want errBumpCap", err)
			}
		})
	}
}

func TestCheckExplicit(t *testing.T) {
	dyn := &txreq.Request{MaxFeePerGas: g(3), MaxPriorityFeePerGas: g(1)}
	br := bumpRules{basisPoints: 1250, maxFeeCap: g(10)}
	for _, tc := range []struct {
		name string
		hi   *txreq.Request
		f    ReplaceFees
		want error
		text string
	}{
		{"fee cap under the rule", dyn, ReplaceFees{MaxFeePerGas: g(3.3), MaxPriorityFeePerGas: g(2)}, ErrReplacementUnderpriced, "maxFeePerGas must be at least 0xc92a69c0"},
		{"tip under the rule", dyn, ReplaceFees{MaxFeePerGas: g(5), MaxPriorityFeePerGas: g(1.1)}, ErrReplacementUnderpriced, "maxPriorityFeePerGas at least 0x430e2340"},
		{"above maxFeeCap", dyn, ReplaceFees{MaxFeePerGas: g(11), MaxPriorityFeePerGas: g(2)}, ErrFeeCap, "maxFeeCap"},
		{"tip above the fee cap", dyn, ReplaceFees{MaxFeePerGas: g(4), MaxPriorityFeePerGas: g(5)}, ErrReplacementUnderpriced, "must not exceed"},
		{"gasPrice for a type 2", dyn, ReplaceFees{GasPrice: g(5)}, ErrReplacementUnderpriced, "type 2"},
		{"type 2 fees for a legacy one", &txreq.Request{GasPrice: g(3)}, ReplaceFees{MaxFeePerGas: g(5), MaxPriorityFeePerGas: g(2)}, ErrReplacementUnderpriced, "legacy"},
		{"legacy under the rule", &txreq.Request{GasPrice: g(3)}, ReplaceFees{GasPrice: g(3.3)}, ErrReplacementUnderpriced, "gasPrice must be at least"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkExplicit(&tc.f, tc.hi, br)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v, want %v mentioning %q", err, tc.want, tc.text)
			}
		})
	}
	if err := checkExplicit(&ReplaceFees{MaxFeePerGas: g(9), MaxPriorityFeePerGas: g(2)}, dyn, br); err != nil {
		t.Fatalf("fees within the rules: %v", err)
	}
}

func TestFeeBumpable(t *testing.T) {
	var txs Manager
	filled := []string{"gas", "maxFeePerGas", "maxPriorityFeePerGas"}
	for _, tc := range []struct {
		name         string
		rec          store.TxRecord
		callerPriced bool
		want         bool
	}{
		{"fees filled by web3gate", store.TxRecord{Kind: store.KindSend, Filled: filled}, false, true},
		{"fees filled, deny", store.TxRecord{Kind: store.KindSend, Filled: filled, FeeBump: store.FeeBumpDeny}, true, false},
		{"caller priced", store.TxRecord{Kind: store.KindSend, Filled: []string{"gas", "maxPriorityFeePerGas"}}, false, false},
		{"caller priced, allow", store.TxRecord{Kind: store.KindSend, FeeBump: store.FeeBumpAllow}, false, true},
		{"caller priced, callerPriced", store.TxRecord{Kind: store.KindSend}, true, true},
		{"legacy filled", store.TxRecord{Kind: store.KindSend, Filled: []string{"gasPrice"}}, false, true},
		{"gap filler", store.TxRecord{Kind: store.KindFiller}, false, true},
		{"eth_signTransaction", store.TxRecord{Kind: store.KindSign, Filled: filled, FeeBump: store.FeeBumpAllow}, true, false},
	} {
		if got := txs.feeBumpable(&tc.rec, tc.callerPriced); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBumpConfig(t *testing.T) {
	for _, tc := range []struct {
		yaml  string
		after BumpAfter
		bp    int64
		cap   *big.Int
	}{
		{`{}`, BumpAfter{Blocks: 3}, 1250, nil},
		{`{after: 5, percent: 15, maxFeeCap: "0x2540be400"}`, BumpAfter{Blocks: 5}, 1500, g(10)},
		{`{after: 45s, chains: [{chainId: 7, after: 2, percent: 20, maxFeeCap: "300000000000"}]}`, BumpAfter{Blocks: 2}, 2000, g(300)},
	} {
		var c BumpConfig
		if err := yaml.Unmarshal([]byte(tc.yaml), &c); err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		c.SetDefaults()
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		br := c.forChain(7)
		if br.after != tc.after || br.basisPoints != tc.bp || !eqBig(br.maxFeeCap, tc.cap) || !br.enabled {
			t.Errorf("%s: %+v", tc.yaml, br)
		}
	}
	var d BumpConfig
	if err := yaml.Unmarshal([]byte(`{after: 45s}`), &d); err != nil || d.After.Duration.Seconds() != 45 {
		t.Fatalf("after: 45s read as %+v (%v)", d.After, err)
	}
}

func TestBumpConfigInvalid(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`{after: 0}`, "at least 1 block"},
		{`{after: soon}`, "number of blocks"},
		{`{after: -5s}`, "number of blocks"},
	} {
		var c BumpConfig
		if err := yaml.Unmarshal([]byte(tc.yaml), &c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error mentioning %q", tc.yaml, err, tc.want)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{`{percent: 0.5}`, "bump.percent: must be between 1 and 1000"},
		{`{maxFeeCap: "ten"}`, "bump.maxFeeCap: must be a decimal or 0x-hex amount of wei"},
		{`{chains: [{chainId: 1}, {chainId: 1}]}`, "bump.chains[1].chainId: chain 1 has an entry already"},
		{`{chains: [{after: 2}]}`, "bump.chains[0].chainId: required"},
		{`{chains: [{chainId: 2, percent: 2000}]}`, "bump.chains[0].percent: must be between 1 and 1000"},
	} {
		var c BumpConfig
		if err := yaml.Unmarshal([]byte(tc.yaml), &c); err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		c.SetDefaults()
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func eqBig(a, b *big.Int) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Cmp(b) == 0
}

// keepOnly leaves only hash of the node's pool (the others: priced out, dropped).
func (f *fakeChain) keepOnly(hash common.Hash) map[common.Hash]*types.Transaction {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.pool
	f.pool = map[common.Hash]*types.Transaction{}
	if tx, ok := out[hash]; ok {
		f.pool[hash] = tx
	}
	return out
}

func (f *fixture) inFlightCost(t *testing.T) *big.Int {
	t.Helper()
	var sum *big.Int
	if err := f.db.Read(context.Background(), func(tx *store.DBTx) error {
		var err error
		_, sum, err = tx.InFlight(context.Background(), 7, f.from)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return sum
}

func (f *fixture) confirmer() *confirmer {
	return &confirmer{t: f.txs, chainID: 7, ch: f.chain, log: zap.NewNop(), recent: map[uint64]common.Hash{}, seen: map[int64]seenAt{}}
}

// TestAutoBumpAndSettle: a send with "X-Fee-Bump: allow" priced out by the base fee is bumped
// by the confirmer after bump.after blocks (2 x the base fee), the account's in-flight cost
// follows, and the block scan finding the bump settles the request (its original replaced);
// either hash finds it.
func TestAutoBumpAndSettle(t *testing.T) {
	forEachStore(t, func(t *testing.T, driver string) {
		f := newFixtureOn(t, Config{Bump: BumpConfig{After: BumpAfter{Blocks: 1}}}, driver)
		ctx := context.Background()
		h, err := f.txs.SendWith(ctx, "p", 7, f.request(1), SendOptions{FeeBump: store.FeeBumpAllow})
		if err != nil {
			t.Fatal(err)
		}
		// The move to broadcast is written after the answer (markBroadcast).
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if rec, err := f.txs.Transaction(ctx, "p", h); err == nil && rec.State == store.StateBroadcast {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("not broadcast within 5s")
			}
		}
		c := f.confirmer()
		pass := func() {
			t.Helper()
			if _, err := c.follow(ctx); err != nil {
				t.Fatal(err)
			}
			c.autoBump(ctx, c.head)
		}
		pass() // first sight
		f.chain.baseFee = "0x64"
		all := f.chain.keepOnly(common.Hash{}) // priced out: the block takes nothing
		f.chain.seal("a")
		f.chain.mu.Lock()
		f.chain.pool = all
		f.chain.mu.Unlock()
		pass()
		rec, err := f.txs.Transaction(ctx, "p", h)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := f.txs.Versions(ctx, rec)
		if err != nil || len(vs) != 1 || vs[0].Kind != store.VersionBump || vs[0].State != store.VersionBroadcast {
			t.Fatalf("after the bump: %+v %v", vs, err)
		}
		bumped := f.sentTx(t, vs[0].Hash)
		if bumped.GasPrice().Int64() != 200 || bumped.Nonce() != rec.Nonce {
			t.Fatalf("bump: gas price %v nonce %d, want 200 (2 x base fee) at %d", bumped.GasPrice(), bumped.Nonce(), rec.Nonce)
		}
		if got := f.inFlightCost(t); got.Int64() != 21000*200+1 {
			t.Fatalf("in-flight cost %v, want the bump's %d", got, 21000*200+1)
		}
		f.chain.keepOnly(vs[0].Hash)
		f.chain.seal("b")
		pass()
		byBump, err := f.txs.Transaction(ctx, "p", vs[0].Hash)
		if err != nil || byBump.ID != rec.ID || byBump.State != store.StateMined || byBump.MinedHash != vs[0].Hash || byBump.Hash != h {
			t.Fatalf("by the bump's hash: %+v %v", byBump, err)
		}
		if got := f.inFlightCost(t); got.Sign() != 0 {
			t.Fatalf("in-flight cost %v after mining, want 0", got)
		}
	})
}

// TestReplaceOutcomes: speed-up with explicit fees, the replacement rule, another principal,
// a node answering "replacement transaction underpriced" (the version stays stored, signed),
// a cancel mined (cancelled), and a settled request refused.
func TestReplaceOutcomes(t *testing.T) {
	forEachStore(t, func(t *testing.T, driver string) {
		f := newFixtureOn(t, Config{}, driver)
		ctx := context.Background()
		h, err := f.txs.Send(ctx, "p", 7, f.request(1), "")
		if err != nil {
			t.Fatal(err)
		}
		rec, v, err := f.txs.Replace(ctx, "p", h, store.VersionSpeedup, &ReplaceFees{GasPrice: big.NewInt(12)})
		if err != nil || v.State != store.VersionBroadcast || rec.Versions != 1 || f.sentTx(t, v.Hash).GasPrice().Int64() != 12 {
			t.Fatalf("speed-up: %+v %+v %v", rec, v, err)
		}
		if _, _, err := f.txs.Replace(ctx, "p", v.Hash, store.VersionSpeedup, &ReplaceFees{GasPrice: big.NewInt(13)}); !errors.Is(err, ErrReplacementUnderpriced) ||
			!strings.Contains(err.Error(), "gasPrice must be at least 0xe") {
			t.Fatalf("under the rule over the highest version: %v", err)
		}
		if _, _, err := f.txs.Replace(ctx, "q", h, store.VersionSpeedup, nil); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another principal: %v", err)
		}
		f.chain.reject = func(*types.Transaction) error {
			return &jsonrpc.Error{Code: -32000, Message: "replacement transaction underpriced"}
		}
		_, cancel, err := f.txs.Replace(ctx, "p", h, store.VersionCancel, &ReplaceFees{GasPrice: big.NewInt(20)})
		if err != nil || cancel.State != store.VersionSigned {
			t.Fatalf("cancel refused as underpriced: %+v %v", cancel, err)
		}
		f.chain.reject = nil
		// The confirmer's rebroadcast sends the newest version, the cancel.
		rec, _ = f.txs.Transaction(ctx, "p", h)
		f.confirmer().rebroadcastVersions(ctx, rec)
		sent := f.sentTx(t, cancel.Hash)
		if *sent.To() != f.from || sent.Value().Sign() != 0 || sent.Gas() != 21000 {
			t.Fatalf("the cancel: to %v value %v gas %d", sent.To(), sent.Value(), sent.Gas())
		}
		f.chain.keepOnly(cancel.Hash)
		f.chain.seal("c")
		if mined, err := f.txs.settle(ctx, f.chain, rec); err != nil || !mined {
			t.Fatalf("settle: %v %v", mined, err)
		}
		got, _ := f.txs.Transaction(ctx, "p", cancel.Hash)
		if got.State != store.StateCancelled || got.MinedHash != cancel.Hash {
			t.Fatalf("after the cancel was mined: %+v", got)
		}
		if _, _, err := f.txs.Replace(ctx, "p", h, store.VersionSpeedup, nil); !errors.Is(err, ErrNotReplaceable) || !strings.Contains(err.Error(), "cancelled") {
			t.Fatalf("a cancelled request: %v", err)
		}
	})
}

// TestOpenGauge: web3gate_tx_open exists at 0 for every state of a configured chain from the
// start (as the other web3gate_tx_* series), and a confirmer pass counts the chain's rows:
// one broadcast, then one mined once a block holds it; a lost lease sets it back to 0.
func TestOpenGauge(t *testing.T) {
	forEachStore(t, func(t *testing.T, driver string) {
		f := newFixtureOn(t, Config{}, driver)
		ctx := context.Background()
		m := f.txs.metrics
		want := func(t *testing.T, counts map[string]float64) {
			t.Helper()
			for _, st := range store.OpenStates {
				if got := testutil.ToFloat64(m.open.WithLabelValues("7", st)); got != counts[st] {
					t.Errorf("web3gate_tx_open{chain=7,state=%s} = %v, want %v", st, got, counts[st])
				}
			}
		}
		if n := testutil.CollectAndCount(m.open); n != len(store.OpenStates) {
			t.Fatalf("%d series of web3gate_tx_open before any send, want %d", n, len(store.OpenStates))
		}
		if n := testutil.CollectAndCount(m.stuck); n != 1 {
			t.Fatalf("%d series of web3gate_tx_stuck_total before any send, want 1", n)
		}
		want(t, nil)
		h, err := f.txs.SendWith(ctx, "p", 7, f.request(1), SendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if rec, err := f.txs.Transaction(ctx, "p", h); err == nil && rec.State == store.StateBroadcast {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("not broadcast within 5s")
			}
		}
		c := f.confirmer()
		c.countOpen(ctx)
		want(t, map[string]float64{store.StateBroadcast: 1})
		f.chain.seal("a")
		if _, err := c.follow(ctx); err != nil {
			t.Fatal(err)
		}
		c.countOpen(ctx)
		want(t, map[string]float64{store.StateMined: 1})
		m.setOpen(7, nil)
		want(t, nil)
	})
}
