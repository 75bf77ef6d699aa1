//go:build !nodevchain

package devchain

import (
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestStartCloseRepeatedly closes nodes right after they start. With go-ethereum's own
// mining loop (catalyst.RegisterSimulatedBeaconAPIs) this panicked within 100 rounds.
func TestStartCloseRepeatedly(t *testing.T) {
	for range 30 {
		c, err := Start(Config{ChainID: 1337, Accounts: 1}, Deps{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	verifyNoLeaks(t)
}

// TestUnminableTransactionStopsMining sends a transaction the pool accepts as executable
// but no block can include (fee cap 1 wei, far below the base fee). Mining stops after
// maxIdleCommits empty blocks instead of running forever, and later transactions are mined.
func TestUnminableTransactionStopsMining(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	c, err := Start(Config{ChainID: 1337}, Deps{Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := c.Handler()

	id := new(big.Int).SetUint64(c.ChainID())
	to := common.Address{1}
	stuck, err := types.SignTx(types.NewTx(&types.DynamicFeeTx{
		ChainID: id, Nonce: 0, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(1),
		Gas: params.TxGas, To: &to, Value: big.NewInt(1),
	}), types.LatestSignerForChainID(id), c.Accounts()[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sendRaw(t, h, stuck); err != nil {
		t.Fatalf("eth_sendRawTransaction: %v", err)
	}

	const msg = "stopped mining: the pool holds executable transactions the miner does not include"
	deadline := time.Now().Add(mineTimeout)
	for logs.FilterMessage(msg).Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no %q warning within %v", msg, mineTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var head hexutil.Uint64
	mustCall(t, h, &head, "eth_blockNumber")
	// Block 1 is sealed at start; then one block, then maxIdleCommits without progress.
	if head != 2+maxIdleCommits {
		t.Fatalf("eth_blockNumber = %d, want %d (block 1 at start, one block, then %d without progress)", head, 2+maxIdleCommits, maxIdleCommits)
	}

	hash, err := sendRaw(t, h, signTransfer(t, c.ChainID(), c.Accounts()[1], 0, to, big.NewInt(1)))
	if err != nil {
		t.Fatalf("eth_sendRawTransaction: %v", err)
	}
	if r := waitReceipt(t, h, hash); uint64(r.Status) != types.ReceiptStatusSuccessful {
		t.Fatalf("status %d, want 1", r.Status)
	}
}

// TestBurstBlockInterval: a transaction reaching an idle chain is mined at once, well within
// the interval; transactions streaming in for up to half an interval, many of them while a block
// is being sealed, go into a few blocks, where blocks sealed back to back take a few each.
func TestBurstBlockInterval(t *testing.T) {
	const interval = time.Second
	c := startChain(t, Config{ChainID: 1337, BurstBlockInterval: interval})
	h := c.Handler()
	from, to := c.Accounts()[0], c.Accounts()[1].Address

	begin := time.Now()
	waitReceipt(t, h, mustSend(t, h, signTransfer(t, c.ChainID(), from, 0, to, big.NewInt(1))))
	if took := time.Since(begin); took >= interval/2 {
		t.Fatalf("a transaction on an idle chain took %v to be mined, want it at once", took)
	}

	var first hexutil.Uint64
	mustCall(t, h, &first, "eth_blockNumber")
	nonce := uint64(1)
	var last common.Hash
	// At most 500: a block holds about 1,400 transfers.
	for end := time.Now().Add(interval / 2); time.Now().Before(end) && nonce <= 500; nonce++ {
		last = mustSend(t, h, signTransfer(t, c.ChainID(), from, nonce, to, big.NewInt(1)))
	}
	sent := nonce - 1
	r := waitReceipt(t, h, last)
	// The first block at once, the rest one interval after its start; one more if the
	// stream outlasted that.
	if blocks := uint64(r.BlockNumber) - uint64(first); blocks > 3 {
		t.Fatalf("%d transactions sent in a stream went into %d blocks, want at most 3", sent, blocks)
	}
	var mined hexutil.Uint64
	mustCall(t, h, &mined, "eth_getTransactionCount", from.Address, "latest")
	if uint64(mined) != nonce {
		t.Fatalf("eth_getTransactionCount = %d, want %d", mined, nonce)
	}
	t.Logf("%d transactions in %d blocks", sent, uint64(r.BlockNumber)-uint64(first))
}
