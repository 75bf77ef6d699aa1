package feeds

import (
	"context"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/web3gate/web3gate/devchain/devchaintest"
	"github.com/web3gate/web3gate/upstreams"
)

// chanSink queues a feed's events on a channel.
type chanSink chan Event

func (s chanSink) Deliver(ev Event) {
	select {
	case s <- ev:
	default:
	}
}

// TestHeadSeenTimestamp: web3gate_feed_head_seen_timestamp_seconds is when the feed first saw
// its latest head: set once per new block, between the block's sealing and its delivery, and
// left alone by the polls that see the same head again.
func TestHeadSeenTimestamp(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	chain := devchaintest.Start(t)
	ups, err := upstreams.New(upstreams.Config{Chains: []upstreams.ChainConfig{{ChainID: chain.ChainID(), Name: "dev", URLs: []string{upstreams.EmbeddedURL}}}},
		upstreams.Deps{Embedded: map[uint64]http.Handler{chain.ChainID(): chain.Handler()}})
	if err != nil {
		t.Fatal(err)
	}
	ups.Start(ctx)
	t.Cleanup(ups.Close)
	pool, _ := ups.Pool(chain.ChainID())
	reg := prometheus.NewRegistry()
	set, err := New(Config{PollInterval: 10 * time.Millisecond}, Deps{Chains: map[uint64]Chain{chain.ChainID(): pool}, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	f, _ := set.Feed(chain.ChainID())
	sink := make(chanSink, 16)
	t.Cleanup(f.Subscribe(sink, false))

	client := chain.Client
	key := chain.Accounts()[0].Key
	signer := types.LatestSignerForChainID(new(big.Int).SetUint64(chain.ChainID()))
	seenGauge := func() float64 {
		return testutil.ToFloat64(set.feeds[chain.ChainID()].m.headSeen)
	}
	// Let the feed start (its first round only takes its place in the chain).
	time.Sleep(50 * time.Millisecond)
	for nonce := range uint64(2) {
		before := time.Now()
		to := common.HexToAddress("0xdead")
		tx, err := types.SignTx(types.NewTx(&types.DynamicFeeTx{ChainID: signer.ChainID(), Nonce: nonce, GasTipCap: big.NewInt(1),
			GasFeeCap: big.NewInt(10e9), Gas: 21000, To: &to, Value: big.NewInt(1)}), signer, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := client.SendTransaction(ctx, tx); err != nil {
			t.Fatal(err)
		}
		var ev Event
		select {
		case ev = <-sink:
		case <-ctx.Done():
			t.Fatal("no block delivered")
		}
		delivered := time.Now()
		seen := seenGauge()
		if head := testutil.ToFloat64(set.feeds[chain.ChainID()].m.head); head != float64(ev.Block.Number) {
			t.Fatalf("head gauge %v, delivered block %d", head, ev.Block.Number)
		}
		if seen < float64(before.UnixNano())/1e9 || seen > float64(delivered.UnixNano())/1e9 {
			t.Fatalf("block %d: seen at %f, not between its send (%f) and its delivery (%f)", ev.Block.Number, seen,
				float64(before.UnixNano())/1e9, float64(delivered.UnixNano())/1e9)
		}
		// More polls of the same head leave it.
		time.Sleep(50 * time.Millisecond)
		if again := seenGauge(); again != seen {
			t.Fatalf("block %d: seen at %f, then %f with no new block", ev.Block.Number, seen, again)
		}
	}
}
