package txmgr

import (
	"context"
	"errors"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// The reservations of concurrent sends, decided together (PostgreSQL: one group per account,
// reserve_group.go; SQLite: WriteGrouped's group commit): each outcome is the one a
// reservation alone would have had.

// sendResult is one concurrent Send's outcome.
type sendResult struct {
	hash common.Hash
	err  error
}

// sendAll runs the sends of reqs at once, each with its idempotency key (keys may be nil).
func (f *fixture) sendAll(reqs []func() (common.Hash, error)) []sendResult {
	out := make([]sendResult, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, send := range reqs {
		wg.Go(func() {
			<-start
			out[i].hash, out[i].err = send()
		})
	}
	close(start)
	wg.Wait()
	return out
}

// nonces are the nonces of the sends that succeeded, sorted.
func (f *fixture) nonces(t *testing.T, rs []sendResult) []uint64 {
	t.Helper()
	var ns []uint64
	for _, r := range rs {
		if r.err == nil {
			ns = append(ns, f.nonceOf(t, r.hash))
		}
	}
	slices.Sort(ns)
	return ns
}

func contiguousFrom0(ns []uint64) bool {
	for i, n := range ns {
		if n != uint64(i) {
			return false
		}
	}
	return true
}

// TestConcurrentSendsTakeContiguousNonces: 120 sends at once, 20 of them with a client nonce
// far ahead: those are refused as too high and take nothing; the others take 0..99, each once,
// and all are mined.
func TestConcurrentSendsTakeContiguousNonces(t *testing.T) {
	forEachStore(t, func(t *testing.T, driver string) {
		// 120 sends share one committer: under -race on a busy machine signing and storing
		// the last of them takes longer than the fixture's usual 500 ms.
		f := newFixtureOn(t, Config{MaxInFlight: 1000, BroadcastTimeout: 15 * time.Second}, driver)
		ctx := context.Background()
		var sends []func() (common.Hash, error)
		for i := range 120 {
			sends = append(sends, func() (common.Hash, error) {
				r := f.request(int64(i + 1))
				if i%6 == 5 {
					far := uint64(1_000_000)
					r.Nonce = &far
				}
				return f.txs.Send(ctx, "p", 7, r, "")
			})
		}
		rs := f.sendAll(sends)
		refused := 0
		for i, r := range rs {
			switch {
			case i%6 == 5 && (r.err == nil || !strings.Contains(r.err.Error(), "nonce too high")):
				t.Fatalf("send %d with nonce 1000000: %v, want nonce too high", i, r.err)
			case i%6 == 5:
				refused++
			case r.err != nil:
				t.Fatalf("send %d: %v", i, r.err)
			}
		}
		ns := f.nonces(t, rs)
		if refused != 20 || len(ns) != 100 || !contiguousFrom0(ns) {
			t.Fatalf("%d refused, nonces %v: want 20 refused and 0..99 each once", refused, ns)
		}
		f.chain.seal("a")
		if n := f.chain.nonces[f.from]; n != 100 {
			t.Fatalf("the chain mined up to nonce %d, want 100", n)
		}
	})
}

// TestConcurrentSendsWithinFunds: ten sends of 0.3 ether at once from an account holding 1
// ether: three are reserved (0, 1, 2), seven refused for funds.
func TestConcurrentSendsWithinFunds(t *testing.T) {
	forEachStore(t, func(t *testing.T, driver string) {
		f := newFixtureOn(t, Config{MaxInFlight: 1000}, driver)
		ctx := context.Background()
		var sends []func() (common.Hash, error)
		for range 10 {
			sends = append(sends, func() (common.Hash, error) {
				r := f.request(0)
				r.Value = new(big.Int).Mul(big.NewInt(3), big.NewInt(1e17))
				return f.txs.Send(ctx, "p", 7, r, "")
			})
		}
		rs := f.sendAll(sends)
		poor := 0
		for _, r := range rs {
			if r.err != nil {
				if !errors.Is(r.err, ErrInsufficientFunds) {
					t.Fatalf("send: %v, want ok or insufficient funds", r.err)
				}
				poor++
			}
		}
		if ns := f.nonces(t, rs); poor != 7 || !slices.Equal(ns, []uint64{0, 1, 2}) {
			t.Fatalf("%d refused for funds, nonces %v: want 7 and [0 1 2]", poor, ns)
		}
	})
}

// TestConcurrentSendsOneIdempotencyKey: twenty identical sends with one Idempotency-Key at
// once make one transaction, and every one is answered with its hash.
func TestConcurrentSendsOneIdempotencyKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, driver string) {
		f := newFixtureOn(t, Config{MaxInFlight: 1000}, driver)
		ctx := context.Background()
		var sends []func() (common.Hash, error)
		for range 20 {
			sends = append(sends, func() (common.Hash, error) { return f.txs.Send(ctx, "p", 7, f.request(5), "one-key") })
		}
		// Other sends in the same groups, without a key, are not disturbed.
		for i := range 10 {
			sends = append(sends, func() (common.Hash, error) { return f.txs.Send(ctx, "p", 7, f.request(int64(100+i)), "") })
		}
		rs := f.sendAll(sends)
		for i, r := range rs {
			if r.err != nil {
				t.Fatalf("send %d: %v", i, r.err)
			}
			if i < 20 && r.hash != rs[0].hash {
				t.Fatalf("send %d with the key answered %s, the first %s", i, r.hash.Hex(), rs[0].hash.Hex())
			}
		}
		ns := f.nonces(t, rs[19:])
		if !contiguousFrom0(ns) || len(ns) != 11 {
			t.Fatalf("nonces %v: want 0..10, one transaction for the key and ten without", ns)
		}
	})
}

// TestConcurrentSendsInFlightCap: with maxInFlight 5 and no block coming, fifteen sends at
// once: five are reserved, ten wait for a slot until inFlightWait and get -32005.
func TestConcurrentSendsInFlightCap(t *testing.T) {
	forEachStore(t, func(t *testing.T, driver string) {
		f := newFixtureOn(t, Config{MaxInFlight: 5, InFlightWait: 300 * time.Millisecond}, driver)
		ctx := context.Background()
		var sends []func() (common.Hash, error)
		for i := range 15 {
			sends = append(sends, func() (common.Hash, error) { return f.txs.Send(ctx, "p", 7, f.request(int64(i+1)), "") })
		}
		rs := f.sendAll(sends)
		limited := 0
		for _, r := range rs {
			if r.err != nil {
				if !errors.Is(r.err, jsonrpc.ErrLimitExceeded) {
					t.Fatalf("send: %v, want ok or -32005", r.err)
				}
				limited++
			}
		}
		if ns := f.nonces(t, rs); limited != 10 || !slices.Equal(ns, []uint64{0, 1, 2, 3, 4}) {
			t.Fatalf("%d limited, nonces %v: want 10 and 0..4", limited, ns)
		}
		var n int
		if err := f.db.Read(ctx, func(tx *store.DBTx) error {
			var err error
			n, _, err = tx.InFlight(ctx, 7, f.from)
			return err
		}); err != nil || n != 5 {
			t.Fatalf("in flight %d (%v), want 5", n, err)
		}
	})
}
