package txmgr

// The confirmer of each chain: its loop, started by Run, and what one tick does.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

// The confirmer of one chain, one goroutine: on start it waits until the chain's genesis was
// checked (genesis.go: the rows of a chain that started over are abandoned, not recovered),
// recovers what a crash interrupted, then on every tick it
//
//   - finishes transactions stuck after their request ended (reserved: sign and send;
//     signed: send), and rebroadcasts broadcast ones no block has taken for RebroadcastAfter,
//     after checking for a receipt;
//   - reads the new blocks and moves our transactions in them to mined, then reads their
//     receipts: one that reverted becomes failed, with its revert reason (revert.go);
//   - moves mined transactions whose block left the canonical chain back to broadcast;
//   - confirms mined transactions FinalityDepth blocks deep;
//   - ends the hold of nonces handed out by eth_signTransaction and not used within
//     HandOutTTL: released for the next signing (or mined / failed, as the chain says).

const (
	// maxScanBlocks bounds the blocks read in one pass; a confirmer behind by more runs its
	// next pass at once rather than at the next tick.
	maxScanBlocks = 256
	// maxScanLag is how far behind the head the confirmer reads blocks at all; older ones are
	// left to the receipt checks of stale transactions.
	maxScanLag = 4096
	// maxRowsPerTick bounds the rows finished or rebroadcast per tick.
	maxRowsPerTick = 256
)

// Run runs a confirmer per chain until ctx ends, each under its lease (Deps.Hold): on a
// standby replica a chain's confirmer waits for its lease, and starts afresh at each
// acquisition.
func (t *Manager) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for id, ch := range t.chains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.hold(ctx, fmt.Sprintf("confirmer/%d", id), func(ctx context.Context) {
				c := &confirmer{t: t, chainID: id, ch: ch, log: t.log.With(zap.Uint64("chain", id)), recent: map[uint64]common.Hash{},
					seen: map[int64]seenAt{}, checked: map[int64]checkedAt{}}
				c.run(ctx)
				// Another replica counts the chain's rows while it holds the lease.
				t.metrics.setOpen(id, nil)
			})
		}()
	}
	wg.Wait()
}

type confirmer struct {
	t       *Manager
	chainID uint64
	ch      Chain
	log     *zap.Logger

	last   uint64                 // the highest block read (meaningful once begun)
	begun  bool                   // the first pass set last
	recent map[uint64]common.Hash // canonical hashes of the blocks read lately

	head      *block           // the head the last pass read
	open      bool             // the last pass found rows to follow
	bumpHead  uint64           // the head of the last fee-bumping pass (bump.go)
	bumpBegun bool             // a fee-bumping pass ran
	seen      map[int64]seenAt // request id -> when its newest version was first seen pending

	// The receipt checks (revert.go): rows found successful in their block, rows whose check
	// failed (tried again at the next pass), and whether the node lacks eth_getBlockReceipts.
	checked         map[int64]checkedAt
	unchecked       []store.Mined
	noBlockReceipts bool
}

// minKickInterval spaces the passes that sends waiting for a slot ask for (each reads the
// latest block from the chain).
const minKickInterval = 50 * time.Millisecond

func (c *confirmer) run(ctx context.Context) {
	started := c.t.recoverBefore()
	// A node down at start: its genesis is read as soon as it answers (the first failure is
	// logged), and nothing of the chain is sent before.
	for c.t.awaitGenesis(ctx, c.chainID) != nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.t.cfg.PollInterval):
		}
	}
	// The scan of blocks starts below the head seen before the recovery: a transaction
	// broadcast while it ran is in a block the first pass reads.
	if head, err := c.block(ctx, "latest"); err == nil && head != nil {
		h := uint64(head.Number)
		c.last, c.begun = h-min(h, c.t.cfg.FinalityDepth), true
	}
	c.recover(ctx, started)
	signal := c.t.slots[c.chainID]
	tick := time.NewTicker(c.t.cfg.PollInterval)
	defer tick.Stop()
	// A first pass now, not a poll interval later: it sets where the scan of blocks starts,
	// before sends made meanwhile are mined deeper than that.
	c.tick(ctx)
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-signal.kick:
			// A send waits for a slot: a pass now finds the blocks that free one.
			if d := time.Since(last); d < minKickInterval {
				select {
				case <-ctx.Done():
					return
				case <-time.After(minKickInterval - d):
				}
			}
		}
		last = time.Now()
		c.tick(ctx)
		signal.notify()
	}
}

func (c *confirmer) tick(ctx context.Context) {
	now := time.Now()
	// A request's own work ends within BroadcastTimeout; after twice that, a row still
	// reserved or signed is ours to finish.
	c.finish(ctx, []string{store.StateReserved, store.StateSigned}, now.Add(-2*c.t.cfg.BroadcastTimeout))
	c.finish(ctx, []string{store.StateBroadcast, store.StateStuck}, now.Add(-c.t.cfg.RebroadcastAfter))
	var followed bool
	for {
		more, err := c.follow(ctx)
		followed = followed || err == nil
		if err != nil && ctx.Err() == nil {
			c.log.Warn("confirmer: following blocks failed", zap.Error(err))
		}
		if !more || err != nil || ctx.Err() != nil {
			break
		}
	}
	if followed && c.open {
		c.autoBump(ctx, c.head)
	}
	c.expire(ctx, now)
	c.countOpen(ctx)
}

// countOpen sets web3gate_tx_open to the chain's rows not settled yet; a failed count
// leaves the last one (the store's outage is logged by the store and counted elsewhere).
func (c *confirmer) countOpen(ctx context.Context) {
	var counts map[string]int
	if err := c.t.db.Read(ctx, func(tx *store.DBTx) (err error) {
		counts, err = tx.CountOpenTxs(ctx, c.chainID)
		return err
	}); err != nil {
		if ctx.Err() == nil {
			c.log.Debug("confirmer: counting open transactions failed", zap.Error(err))
		}
		return
	}
	c.t.metrics.setOpen(c.chainID, counts)
}
