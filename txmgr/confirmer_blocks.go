package txmgr

// The confirmer's block scan: transactions mined, moved back by a reorg, confirmed.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

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
	if err := c.t.db.Read(ctx, func(tx *store.DBTx) error {
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
		if err := c.t.db.Read(ctx, func(tx *store.DBTx) error {
			var err error
			versions, err = tx.OpenVersionHashes(ctx, c.chainID)
			return err
		}); err != nil {
			return false, err
		}
	}
	var mined int64
	scanned := time.Now()
	err = c.t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
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
	if err := c.t.db.Read(ctx, func(tx *store.DBTx) error {
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
	if err := c.t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
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
	if err := c.t.db.Read(ctx, func(tx *store.DBTx) error {
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
	if err := c.t.db.Read(ctx, func(tx *store.DBTx) error {
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
			err := c.t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
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
