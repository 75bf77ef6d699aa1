package txmgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
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

// recoverBefore bounds the rows the recovery finishes: those not updated since. Alone on its
// store, the process's own requests update rows only after it was created, so every older
// row is a previous run's (the confirmer's first start, or a start after its lease came back).
// Sharing the store with other replicas, a row updated within twice BroadcastTimeout may be
// the work of a request in progress on another replica: it is left to the ticks, which finish
// it once it is that old.
func (t *Manager) recoverBefore() time.Time {
	if t.shared {
		return time.Now().Add(-2 * t.cfg.BroadcastTimeout)
	}
	return t.created
}

// recover finishes every row a previous run left unfinished: reserved rows are signed and
// sent, signed rows sent again, handed-out reserved rows released. Broadcast rows are checked
// whatever their age, those of requests still in progress too: the first pass reads blocks
// from FinalityDepth below the head only, and a transaction mined before that (while this
// replica waited for the lease or the genesis check) would otherwise be seen only at its
// rebroadcast, RebroadcastAfter later. Sending a broadcast row again is harmless (the node
// answers "already known" or takes it once more).
func (c *confirmer) recover(ctx context.Context, before time.Time) {
	c.finishAll(ctx, []string{store.StateReserved, store.StateSigned}, before)
	c.finishAll(ctx, []string{store.StateBroadcast, store.StateStuck}, time.Now())
}

// finishAll runs finish until no row of states older than before is left.
func (c *confirmer) finishAll(ctx context.Context, states []string, before time.Time) {
	for {
		n := c.finish(ctx, states, before)
		if n < maxRowsPerTick || ctx.Err() != nil {
			return
		}
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
}

// finish handles up to maxRowsPerTick rows in states not updated since before, and returns how
// many it saw.
func (c *confirmer) finish(ctx context.Context, states []string, before time.Time) int {
	var rows []*store.TxRecord
	err := c.t.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		rows, err = tx.StaleTxs(ctx, c.chainID, states, before, maxRowsPerTick)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("confirmer: reading unfinished transactions failed", zap.Error(err))
		}
		return 0
	}
	for _, rec := range rows {
		if ctx.Err() != nil {
			return len(rows)
		}
		wctx, cancel := context.WithTimeout(ctx, c.t.cfg.BroadcastTimeout)
		c.finishOne(wctx, rec)
		cancel()
	}
	return len(rows)
}

func (c *confirmer) finishOne(ctx context.Context, rec *store.TxRecord) {
	logger := c.log.With(zap.Int64("tx", rec.ID), zap.String("from", rec.Address.Hex()), zap.Uint64("nonce", rec.Nonce))
	switch {
	case rec.State == store.StateReserved && rec.Kind == store.KindSign:
		// eth_signTransaction never handed these bytes out: the slot is free again.
		err := c.t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
			return tx.SetState(ctx, rec.ID, []string{store.StateReserved}, store.StateReleased, "")
		})
		if err != nil {
			logger.Warn("confirmer: releasing a slot failed", zap.Error(err))
		}
		return
	case rec.State == store.StateReserved:
		if _, _, err := c.t.complete(ctx, c.ch, rec, nil); err != nil {
			logger.Warn("confirmer: sending a recovered transaction failed; retrying later", zap.Error(err))
			return
		}
		logger.Info("confirmer: recovered transaction sent", zap.String("hash", rec.Hash.Hex()))
		return
	}
	if rec.Versions > 0 {
		c.rebroadcastVersions(ctx, rec)
		return
	}
	// signed or broadcast: mined already?
	if m, err := c.t.receipt(ctx, c.ch, rec.Hash); err != nil {
		logger.Warn("confirmer: receipt lookup failed", zap.Error(err))
		return
	} else if m != nil {
		var n int64
		err := c.t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
			var err error
			n, err = tx.SetMined(ctx, c.chainID, rec.Hash, m.number, m.hash)
			return err
		})
		if err != nil {
			logger.Warn("confirmer: recording a mined transaction failed", zap.Error(err))
		} else if n > 0 {
			c.queueCheck(rec, m)
		}
		return
	}
	if _, _, err := c.t.broadcast(ctx, c.ch, rec); err != nil {
		// A stuck request is priced out by definition: its becoming stuck was logged once,
		// its refusals at every rebroadcast are not news.
		level := zap.WarnLevel
		if rec.State == store.StateStuck {
			level = zap.DebugLevel
		}
		logger.Log(level, "confirmer: rebroadcast not accepted; retrying later", zap.Error(err))
	}
	// Restart the rebroadcast clock whatever happened.
	_ = c.t.db.WriteGrouped(ctx, func(tx *store.Tx) error { return tx.Touch(ctx, rec.ID) })
}

type block struct {
	Number       hexutil.Uint64 `json:"number"`
	Hash         common.Hash    `json:"hash"`
	Transactions []common.Hash  `json:"transactions"`
	BaseFee      *hexutil.Big   `json:"baseFeePerGas"` // nil before London
}

func (c *confirmer) block(ctx context.Context, tag string) (*block, error) {
	res, err := c.ch.Forward(ctx, "eth_getBlockByNumber", []byte(`["`+tag+`",false]`))
	if err != nil {
		return nil, err
	}
	var b block
	if string(res) == "null" {
		return nil, nil
	}
	if err := json.Unmarshal(res, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// follow reads the blocks since the last pass (up to maxScanBlocks of them), records our
// transactions in them as mined, undoes mined records of blocks a reorg replaced, and
// confirms deep enough ones. more reports blocks left to read.
func (c *confirmer) follow(ctx context.Context) (more bool, err error) {
	head, err := c.block(ctx, "latest")
	if err != nil || head == nil {
		return false, err
	}
	c.head = head
	h := uint64(head.Number)
	depth := c.t.cfg.FinalityDepth
	if !c.begun || c.last > h {
		// The first pass starts depth blocks below the head; the rows of blocks before it
		// were finished by recover (they were created before the start).
		c.last, c.begun = h-min(h, depth), true
	}
	var open bool
	if err := c.t.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		open, err = tx.HasOpenTxs(ctx, c.chainID)
		return err
	}); err != nil {
		return false, err
	}
	c.open = open
	if !open {
		c.last = h
		clear(c.recent)
		return false, nil
	}
	if h-c.last > maxScanLag {
		c.last = h - maxScanBlocks
	}
	to := min(h, c.last+maxScanBlocks)
	more = to < h
	// Read the blocks first, then record what they hold in one write.
	var read []*block
	for n := c.last + 1; n <= to; n++ {
		b := head
		if n != h {
			if b, err = c.block(ctx, hexutil.EncodeUint64(n)); err != nil {
				return false, err
			}
			if b == nil {
				more = false
				break // the node's head moved back: next tick
			}
		}
		read = append(read, b)
	}
	// The hashes of the requests' later versions (bumps, speed-ups, cancels): none, one cheap
	// read, for a chain whose open requests have none.
	var versions map[common.Hash]int64
	if len(read) > 0 {
		if err := c.t.db.Read(ctx, func(tx *store.Tx) error {
			var err error
			versions, err = tx.OpenVersionHashes(ctx, c.chainID)
			return err
		}); err != nil {
			return false, err
		}
	}
	var mined int64
	scanned := time.Now()
	err = c.t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
		mined = 0
		for _, b := range read {
			// The originals' hashes in one statement on PostgreSQL (SetMinedMany); a later
			// version's hash is never an original's, so it is looked up apart.
			n, err := tx.SetMinedMany(ctx, c.chainID, b.Transactions, uint64(b.Number), b.Hash)
			if err != nil {
				return err
			}
			mined += n
			if len(versions) == 0 {
				continue
			}
			for _, th := range b.Transactions {
				if _, ok := versions[th]; !ok {
					continue
				}
				n, err := tx.SetMinedVersion(ctx, c.chainID, th, uint64(b.Number), b.Hash)
				if err != nil {
					return err
				}
				mined += n
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	var ms []store.Mined
	if mined > 0 {
		ms = c.observeMined(ctx, uint64(read[0].Number), uint64(read[len(read)-1].Number), scanned)
	}
	if len(ms) > 0 || len(c.unchecked) > 0 {
		// Rows whose check failed before are kept until the check before Confirm takes them.
		var retry []store.Mined
		for _, m := range c.unchecked {
			if m.BlockNumber+depth >= h {
				retry = append(retry, m)
			}
		}
		left, err := c.checkReceipts(ctx, append(retry, ms...))
		c.unchecked = left
		if err != nil && ctx.Err() == nil {
			c.log.Warn("confirmer: receipt check failed; retrying at the next pass", zap.Error(err))
		}
	}
	for _, b := range read {
		c.recent[uint64(b.Number)] = b.Hash
		c.last = uint64(b.Number)
	}
	if more {
		return true, nil // reorgs and confirmations once caught up
	}
	if err := c.reorgs(ctx, h); err != nil {
		return false, err
	}
	for n := range c.recent {
		if n+2*depth < h {
			delete(c.recent, n)
		}
	}
	for id, at := range c.checked {
		if at.number+2*depth < h {
			delete(c.checked, id) // confirmed, or its block replaced
		}
	}
	if h > depth {
		return false, c.confirm(ctx, h-depth)
	}
	return false, nil
}

// confirm moves the mined rows at or below block number to confirmed, after checking the
// receipts of those not checked yet: a row whose check fails holds the confirmation back
// until the next pass, so that no reverted transaction is confirmed.
func (c *confirmer) confirm(ctx context.Context, number uint64) error {
	var ms []store.Mined
	if err := c.t.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		ms, err = tx.MinedUpTo(ctx, c.chainID, number)
		return err
	}); err != nil {
		return err
	}
	if len(ms) == 0 {
		return nil
	}
	if _, err := c.checkReceipts(ctx, ms); err != nil {
		return fmt.Errorf("receipt check before confirming: %w", err)
	}
	if err := c.t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
		_, err := tx.Confirm(ctx, c.chainID, number)
		return err
	}); err != nil {
		return err
	}
	for _, m := range ms {
		delete(c.checked, m.ID)
	}
	return nil
}

// observeMined counts the requests the scan found mined in blocks from..to (those it
// updated, since), in one read, and returns them for the receipt checks (none when the read
// failed: the check before Confirm takes them).
func (c *confirmer) observeMined(ctx context.Context, from, to uint64, since time.Time) []store.Mined {
	var ms []store.Mined
	if err := c.t.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		ms, err = tx.MinedIn(ctx, c.chainID, from, to, since)
		return err
	}); err != nil {
		if ctx.Err() == nil {
			c.log.Warn("confirmer: reading the transactions a scan mined failed", zap.Error(err))
		}
		return nil
	}
	c.t.observeMined(c.chainID, ms)
	return ms
}

// reorgs moves mined (and reverted) rows of blocks no longer canonical back to broadcast, and
// rewinds the scan so that the blocks now at their height are read again.
func (c *confirmer) reorgs(ctx context.Context, head uint64) error {
	from := head - min(head, c.t.cfg.FinalityDepth)
	var mined []*store.TxRecord
	if err := c.t.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		mined, err = tx.MinedSince(ctx, c.chainID, from)
		return err
	}); err != nil {
		return err
	}
	checked := map[uint64]common.Hash{}
	for _, rec := range mined {
		canon, ok := checked[rec.BlockNumber]
		if !ok {
			b, err := c.block(ctx, hexutil.EncodeUint64(rec.BlockNumber))
			if err != nil {
				return err
			}
			if b != nil {
				canon = b.Hash
			}
			checked[rec.BlockNumber] = canon
		}
		if canon == rec.BlockHash {
			continue
		}
		n, err := func() (int64, error) {
			var n int64
			err := c.t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
				var err error
				n, err = tx.Unmine(ctx, c.chainID, rec.BlockNumber, rec.BlockHash)
				return err
			})
			return n, err
		}()
		if err != nil {
			return err
		}
		if n > 0 {
			c.log.Warn("confirmer: block left the canonical chain; its transactions go back to broadcast",
				zap.Uint64("block", rec.BlockNumber), zap.String("hash", rec.BlockHash.Hex()), zap.Int64("transactions", n))
		}
		if rec.BlockNumber > 0 && rec.BlockNumber-1 < c.last {
			c.last = rec.BlockNumber - 1
		}
		delete(c.recent, rec.BlockNumber)
	}
	return nil
}

// expire ends the hold of handed-out nonces past their TTL.
func (c *confirmer) expire(ctx context.Context, now time.Time) {
	var rows []*store.TxRecord
	if err := c.t.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		rows, err = tx.ExpiredHandOuts(ctx, c.chainID, now, maxRowsPerTick)
		return err
	}); err != nil {
		return
	}
	for _, rec := range rows {
		m, err := c.t.receipt(ctx, c.ch, rec.Hash)
		if err != nil {
			return
		}
		var state, reason string
		if m == nil {
			latest, err := c.t.nonceAt(ctx, c.ch, rec.Address, "latest")
			if err != nil {
				return
			}
			state = store.StateReleased
			if latest > rec.Nonce {
				state, reason = store.StateFailed, "nonce used by another transaction"
			}
		}
		var mined int64
		err = c.t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
			if m != nil {
				var err error
				mined, err = tx.SetMined(ctx, c.chainID, rec.Hash, m.number, m.hash)
				return err
			}
			err := tx.SetState(ctx, rec.ID, []string{store.StateHandedOut}, state, reason)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		})
		if err != nil {
			c.log.Warn("confirmer: ending a hand-out failed", zap.Int64("tx", rec.ID), zap.Error(err))
		} else if mined > 0 {
			c.queueCheck(rec, m)
		}
	}
}
