//go:build !nodevchain

package devchain

import (
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/txpool"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/eth/catalyst"
	"github.com/ethereum/go-ethereum/event"
	"github.com/ethereum/go-ethereum/node"
	"go.uber.org/zap"
)

// maxIdleCommits bounds the seals in a row that made no block holding transactions (empty
// blocks, or failed seals) while the pool reports executable transactions. The pool counts a transaction whose fee cap is below the base fee as
// executable while the miner skips it; each empty block lowers the base fee by 1/8, and 64
// blocks take it from 1 gwei to about 0.0002 gwei. A fee cap below that (the base fee stops
// falling at 7 wei) would otherwise make the loop mine empty blocks forever.
const maxIdleCommits = 64

// automine mines a block whenever transactions reach the pool, and again until the pool
// has no executable transactions left: the loop go-ethereum's dev mode runs (the "dev"
// API of catalyst.RegisterSimulatedBeaconAPIs with period 0), with three differences.
//
//   - It subscribes to the pool when built, before the node starts. go-ethereum subscribes
//     in a goroutine it starts unsynchronised; when the node is closed before that goroutine
//     first runs, the pool's subscription scope is closed, the subscription is nil and its
//     deferred Unsubscribe panics, ending the process (reproduced with v1.17.10 by starting
//     and closing a node 100 times at GOMAXPROCS=2).
//   - Stop waits for an in-flight block to be sealed, so blocks are never built on a
//     stopping chain and no goroutine outlives Close. go-ethereum's loop does not wait
//     (ethereum/go-ethereum#31327).
//   - When transactions arrived while a block was being sealed, the next block is sealed
//     interval (Config.BurstBlockInterval) after the start of that one, not at once: each
//     block costs the node about the same whatever it holds (building it, executing it
//     again as the beacon's payload, the pools' reset, every client reading the new head),
//     and under a stream of sends, blocks sealed back to back hold only a few transactions
//     each (docs/performance.md, "Notes from the code", devchain). A transaction reaching an
//     idle chain is still mined at once.
type automine struct {
	beacon   *catalyst.SimulatedBeacon
	pool     *txpool.TxPool
	chain    *core.BlockChain
	interval time.Duration
	logger   *zap.Logger

	txs  chan core.NewTxsEvent
	sub  event.Subscription
	wake chan struct{}
	quit chan struct{}
	wg   sync.WaitGroup
}

var _ node.Lifecycle = (*automine)(nil)

func newAutomine(beacon *catalyst.SimulatedBeacon, pool *txpool.TxPool, chain *core.BlockChain, interval time.Duration, logger *zap.Logger) *automine {
	m := &automine{
		beacon:   beacon,
		pool:     pool,
		chain:    chain,
		interval: interval,
		logger:   logger,
		txs:      make(chan core.NewTxsEvent),
		wake:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
	}
	m.sub = pool.SubscribeTransactions(m.txs, true)
	return m
}

// Start starts the loops. It is called by the node after the eth service has started.
func (m *automine) Start() error {
	m.wg.Add(2)
	go m.receive()
	go m.mine()
	return nil
}

// Stop ends the loops and waits for them. The node calls it before stopping the eth
// service, so a block being sealed is finished first.
func (m *automine) Stop() error {
	m.sub.Unsubscribe()
	close(m.quit)
	m.wg.Wait()
	return nil
}

// receive turns pool events into a wake-up for mine. It never blocks on mine: the pool
// waits for every subscriber to take an event, and mine waits for the pool (Sync).
func (m *automine) receive() {
	defer m.wg.Done()
	for {
		select {
		case <-m.txs:
			select {
			case m.wake <- struct{}{}:
			default: // a wake-up is already pending
			}
		case <-m.sub.Err():
			return
		case <-m.quit:
			return
		}
	}
}

func (m *automine) mine() {
	defer m.wg.Done()
	for {
		select {
		case <-m.wake:
			m.mineAll()
		case <-m.quit:
			return
		}
	}
}

// mineAll seals blocks until the pool has no executable transactions, quit is closed, or
// maxIdleCommits seals in a row made no block with transactions. The first block is sealed at once, each
// next one interval after the start of the one before.
func (m *automine) mineAll() {
	sealed := time.Now()
	m.beacon.Commit()
	if err := m.pool.Sync(); err != nil {
		return // the pool is terminating
	}
	executable, _ := m.pool.Stats()
	var last common.Hash
	if head := m.chain.CurrentBlock(); head != nil {
		last = head.Hash()
	}
	for idle := 0; executable > 0; {
		if idle == maxIdleCommits {
			m.logger.Warn("stopped mining: the pool holds executable transactions the miner does not include",
				zap.Int("executable", executable), zap.Int("empty_blocks", idle))
			return
		}
		if !m.waitUntil(sealed.Add(m.interval)) {
			return
		}
		sealed = time.Now()
		m.beacon.Commit()
		// Progress is a new head holding transactions (a seal that failed leaves the head).
		if head := m.chain.CurrentBlock(); head != nil && head.Hash() != last && head.TxHash != types.EmptyTxsHash {
			idle, last = 0, head.Hash()
		} else {
			idle++
		}
		executable, _ = m.pool.Stats()
	}
}

// waitUntil waits until t, or until quit is closed: then it returns false.
func (m *automine) waitUntil(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-m.quit:
			return false
		default:
			return true
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-m.quit:
		return false
	case <-timer.C:
		return true
	}
}
