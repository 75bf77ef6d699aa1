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
