package devchain

import (
	"sync"

	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/txpool"
	"github.com/ethereum/go-ethereum/eth/catalyst"
	"github.com/ethereum/go-ethereum/event"
	"github.com/ethereum/go-ethereum/node"
	"go.uber.org/zap"
)

// maxIdleCommits bounds the blocks mined in a row that leave the number of executable
// transactions unchanged. The pool counts a transaction whose fee cap is below the base fee
// as executable while the miner skips it; each empty block lowers the base fee by 1/8, and
// 64 blocks take it from 1 gwei to about 0.0002 gwei. A fee cap below that (the base fee
// stops falling at 7 wei) would otherwise make the loop mine empty blocks forever.
const maxIdleCommits = 64

// automine mines a block whenever transactions reach the pool, and again until the pool
// has no executable transactions left: the loop go-ethereum's dev mode runs (the "dev"
// API of catalyst.RegisterSimulatedBeaconAPIs with period 0), with two differences.
//
//   - It subscribes to the pool when built, before the node starts. go-ethereum subscribes
//     in a goroutine it starts unsynchronised; when the node is closed before that goroutine
//     first runs, the pool's subscription scope is closed, the subscription is nil and its
//     deferred Unsubscribe panics, ending the process (reproduced with v1.17.10 by starting
//     and closing a node 100 times at GOMAXPROCS=2).
//   - Stop waits for an in-flight block to be sealed, so blocks are never built on a
//     stopping chain and no goroutine outlives Close. go-ethereum's loop does not wait
//     (ethereum/go-ethereum#31327).
type automine struct {
	beacon *catalyst.SimulatedBeacon
	pool   *txpool.TxPool
	logger *zap.Logger

	txs  chan core.NewTxsEvent
	sub  event.Subscription
	wake chan struct{}
	quit chan struct{}
	wg   sync.WaitGroup
}

var _ node.Lifecycle = (*automine)(nil)

func newAutomine(beacon *catalyst.SimulatedBeacon, pool *txpool.TxPool, logger *zap.Logger) *automine {
	m := &automine{
		beacon: beacon,
		pool:   pool,
		logger: logger,
		txs:    make(chan core.NewTxsEvent),
		wake:   make(chan struct{}, 1),
		quit:   make(chan struct{}),
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
// maxIdleCommits blocks in a row made no progress.
func (m *automine) mineAll() {
	m.beacon.Commit()
	if err := m.pool.Sync(); err != nil {
		return // the pool is terminating
	}
	last, _ := m.pool.Stats()
	for idle := 0; last > 0; {
		if idle == maxIdleCommits {
			m.logger.Warn("stopped mining: the pool holds executable transactions the miner does not include",
				zap.Int("executable", last), zap.Int("empty_blocks", idle))
			return
		}
		select {
		case <-m.quit:
			return
		default:
		}
		m.beacon.Commit()
		executable, _ := m.pool.Stats()
		if executable < last {
			idle = 0
		} else {
			idle++
		}
		last = executable
	}
}
