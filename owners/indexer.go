package owners

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/upstreams"
)

// The indexer of one chain. A session resumes from the stored progress and runs two
// goroutines: the fetcher reads ranges of blocks ahead (eth_getLogs with the headers it
// needs, one round trip each, the range halved when the node refuses it), and the writer
// applies each range in one store transaction, after checking that the range's first block
// has the stored last block as its parent. A mismatch, or the last indexed block gone from
// the chain while the fetcher waits at the head, is a reorg: the session ends, the newest
// stored block hash still on the chain is found, everything above it is undone from the
// before-images, and a new session starts there. A failed round ends the session too; the
// next starts after a backoff.

const (
	// growAfter successful fetches in a row double a range that was halved, up to
	// maxBlockRange.
	growAfter = 8
	// maxBackoff bounds the wait after failures in a row.
	maxBackoff = time.Minute
	// ancestorBatch is how many stored block hashes one round trip checks in a reorg.
	ancestorBatch = 32
)

type indexer struct {
	cfg       ChainConfig
	chainID   uint64
	name      string
	chain     Chain
	db        *store.DB
	log       *zap.Logger
	m         *chainMetrics
	contracts []common.Address // sorted; nil: every contract
	filter    string           // the eth_getLogs filter, less the range
	scope     string
	conf      uint64

	// The fetcher's.
	span     uint64
	okStreak int

	// The writer's: progress reporting.
	backfill                bool
	backfillStart, lastLog  time.Time
	lastLogBlock, startFrom uint64
	logsSinceLog, logsTotal int
}

func newIndexer(cfg ChainConfig, chain Chain, db *store.DB, log *zap.Logger, m *metrics) *indexer {
	ix := &indexer{cfg: cfg, chainID: cfg.ChainID, name: chain.Name(), chain: chain, db: db, conf: *cfg.Confirmations,
		contracts: cfg.contracts(), scope: cfg.scope(), span: cfg.MaxBlockRange}
	ix.log = log.With(zap.String("chain", ix.name))
	ix.m = m.chain(ix.name)
	ix.filter = logFilter(ix.contracts)
	return ix
}

// run indexes until ctx ends.
func (ix *indexer) run(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil {
		err := ix.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			// A reorg was handled: the next session starts after a poll interval, so that a
			// node flapping between forks does not spin the loop.
			failures = 0
			select {
			case <-ctx.Done():
			case <-time.After(ix.cfg.PollInterval):
			}
			continue
		}
		failures++
		ix.m.errors.Inc()
		wait := ix.cfg.PollInterval << min(failures-1, 10)
		wait = min(wait, maxBackoff)
		if errors.Is(err, errNotYet) || errors.Is(err, errInconsistent) || errors.Is(err, errIndexMoved) {
			// A node behind the others, or the chain moving under a fetch: not worth a warning.
			ix.log.Debug("owners index: retrying", zap.Error(err), zap.Duration("retry_in", wait))
		} else {
			ix.log.Warn("owners index: round failed; retrying", zap.Error(err), zap.Duration("retry_in", wait),
				zap.Int("failures_in_a_row", failures))
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// fetchResult is what the fetcher hands the writer: a range, a reorg seen at the head, or
// the error that stopped it.
type fetchResult struct {
	f     *fetched
	reorg bool
	err   error
}

// session indexes from the stored progress until a reorg (handled, nil) or an error.
func (ix *indexer) session(ctx context.Context) error {
	p, err := ix.resume(ctx)
	if err != nil {
		return err
	}
	next, have := ix.cfg.StartBlock, p != nil
	var last uint64
	var lastHash common.Hash
	if have {
		last, lastHash, next = p.Block, p.Hash, p.Block+1
	}
	fctx, cancel := context.WithCancel(ctx)
	out := make(chan fetchResult, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		ix.fetch(fctx, next, lastHash, have, out)
	}()
	defer func() {
		cancel()
		for range out {
		}
		<-done
	}()
	for r := range out {
		switch {
		case r.err != nil:
			return r.err
		case r.reorg:
			return ix.reorg(ctx)
		}
		f := r.f
		if have && f.from == last+1 && f.headers[0].parent != lastHash {
			return ix.reorg(ctx)
		}
		if err := ix.write(ctx, f, have, last); err != nil {
			return err
		}
		to, _ := f.header(f.to)
		last, lastHash, have = f.to, to.hash, true
	}
	return ctx.Err()
}

// errIndexMoved: the stored progress is not where this indexer left it. Another process on
// the same database indexed the chain meanwhile; the next session resumes from what it stored.
var errIndexMoved = errors.New("the chain's index was moved by another process")

// expectProgress locks the chain's index for the rest of tx and checks that its stored
// progress is where this indexer believes it is (have: at block after; else none), so that
// two processes indexing one chain on one database never apply the same blocks twice.
func (ix *indexer) expectProgress(ctx context.Context, tx *store.DBTx, have bool, after uint64) error {
	if err := tx.LockNFTIndex(ctx, ix.chainID); err != nil {
		return err
	}
	p, err := tx.NFTIndexProgress(ctx, ix.chainID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if have {
			return errIndexMoved
		}
		return nil
	case err != nil:
		return err
	case !have || p.Block != after || p.Scope != ix.scope:
		return errIndexMoved
	}
	return nil
}

// resume returns the stored progress, nil when there is none. An index built for another
// scope (start block, contracts) is dropped first.
func (ix *indexer) resume(ctx context.Context) (*store.NFTIndexProgress, error) {
	var p *store.NFTIndexProgress
	err := ix.db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		p, err = tx.NFTIndexProgress(ctx, ix.chainID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if p.Scope == ix.scope {
		ix.m.indexed.Set(float64(p.Block))
		return p, nil
	}
	ix.log.Info("owners index: startBlock or contracts changed since the index was built; rebuilding it",
		zap.String("was", p.Scope), zap.String("now", ix.scope))
	return nil, ix.drop(ctx)
}

// drop deletes the chain's index.
func (ix *indexer) drop(ctx context.Context) error {
	return ix.db.Write(ctx, func(tx *store.DBTx) error {
		if err := tx.LockNFTIndex(ctx, ix.chainID); err != nil {
			return err
		}
		_, err := tx.DeleteNFTIndex(ctx, ix.chainID)
		return err
	})
}

// safe is the newest block with enough confirmations at head.
func (ix *indexer) safe(head uint64) (uint64, bool) {
	if head < ix.conf {
		return 0, false
	}
	return head - ix.conf, true
}

// fetch reads ranges from block next on and sends them to out, until ctx ends, an error
// (sent), or a reorg seen at the head (sent). tipHash is the hash of block next-1 when have.
func (ix *indexer) fetch(ctx context.Context, next uint64, tipHash common.Hash, have bool, out chan<- fetchResult) {
	send := func(r fetchResult) bool {
		select {
		case out <- r:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var (
		head   uint64
		headAt time.Time
		known  bool
	)
	for ctx.Err() == nil {
		safe, ok := ix.safe(head)
		idle := !known || !ok || next > safe
		if idle || time.Since(headAt) >= ix.cfg.PollInterval {
			// Read the head; waiting at it, check that the last indexed block is still there.
			checkTip := idle && have
			rctx, cancel := context.WithTimeout(ctx, ix.cfg.RequestTimeout)
			h, tip, err := readHead(rctx, ix.chain, next-1, checkTip)
			cancel()
			switch {
			case ctx.Err() != nil:
				return
			case checkTip && errors.Is(err, errNotYet), err == nil && checkTip && tip.hash != tipHash:
				ix.log.Debug("owners index: the last indexed block is no longer on the chain", zap.Uint64("block", next-1))
				send(fetchResult{reorg: true})
				return
			case err != nil:
				send(fetchResult{err: fmt.Errorf("read head: %w", err)})
				return
			}
			head, headAt, known = h, time.Now(), true
			ix.m.lag.Set(float64(head + 1 - min(head+1, next)))
			if safe, ok = ix.safe(head); !ok || next > safe {
				select {
				case <-ctx.Done():
					return
				case <-time.After(ix.cfg.PollInterval):
				}
				continue
			}
		}
		to := min(safe, next+ix.span-1)
		undoFrom := head + 1 - min(head+1, ix.cfg.ReorgDepth)
		rctx, cancel := context.WithTimeout(ctx, ix.cfg.RequestTimeout)
		began := time.Now()
		f, err := fetchRange(rctx, ix.chain, ix.filter, next, to, undoFrom, head)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if to > next && rangeRefused(err) {
				ix.span = max(1, (to-next+1)/2)
				ix.okStreak = 0
				ix.m.splits.Inc()
				ix.log.Debug("owners index: block range refused; halving it", zap.Uint64("from", next), zap.Uint64("to", to),
					zap.Uint64("new_range", ix.span), zap.Error(err))
				continue
			}
			send(fetchResult{err: fmt.Errorf("blocks %d-%d: %w", next, to, err)})
			return
		}
		ix.m.fetch.Observe(time.Since(began).Seconds())
		if ix.okStreak++; ix.okStreak >= growAfter && ix.span < ix.cfg.MaxBlockRange {
			ix.span, ix.okStreak = min(ix.cfg.MaxBlockRange, ix.span*2), 0
		}
		if !send(fetchResult{f: f}) {
			return
		}
		last, _ := f.header(to)
		next, tipHash, have = to+1, last.hash, true
	}
}

// write applies one fetched range in one transaction: the transfers, the hashes of the
// range's recent blocks and of its last block, the progress, and the pruning of block
// hashes and undo data too deep for a reorg to reach.
func (ix *indexer) write(ctx context.Context, f *fetched, have bool, after uint64) error {
	last, _ := f.header(f.to)
	var blocks []store.NFTIndexBlock
	for _, h := range f.headers {
		if recent := h.number >= f.undoFrom; recent || h.number == f.to {
			blocks = append(blocks, store.NFTIndexBlock{Number: h.number, Hash: h.hash, Undo: recent})
		}
	}
	began := time.Now()
	err := ix.db.Write(ctx, func(tx *store.DBTx) error {
		if err := ix.expectProgress(ctx, tx, have, after); err != nil {
			return err
		}
		if _, err := applyTransfers(ctx, tx, ix.chainID, f.logs.transfers, f.undoFrom); err != nil {
			return err
		}
		if err := tx.PutNFTIndexBlocks(ctx, ix.chainID, blocks); err != nil {
			return err
		}
		p := &store.NFTIndexProgress{ChainID: ix.chainID, Scope: ix.scope, Block: f.to, Hash: last.hash, UpdatedAt: time.Now()}
		if err := tx.PutNFTIndexProgress(ctx, p); err != nil {
			return err
		}
		if f.to+1 > ix.cfg.ReorgDepth {
			return tx.PruneNFTIndex(ctx, ix.chainID, f.to+1-ix.cfg.ReorgDepth)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write blocks %d-%d: %w", f.from, f.to, err)
	}
	ix.m.write.Observe(time.Since(began).Seconds())
	logs := 0
	for k, n := range f.logs.kinds {
		if n > 0 {
			ix.m.logs[k].Add(float64(n))
		}
		if k != kindIgnored {
			logs += n
		}
	}
	ix.m.indexed.Set(float64(f.to))
	ix.m.lag.Set(float64(f.head + 1 - min(f.head+1, f.to+1)))
	ix.report(f, logs)
	return nil
}

// report logs the progress of a backfill: when it starts (more than maxBlockRange blocks
// left to index), every progressLogInterval (blocks and logs per second, and the time left
// at that rate), and when it has caught up with the head.
func (ix *indexer) report(f *fetched, logs int) {
	now := time.Now()
	safe, _ := ix.safe(f.head)
	left := safe - min(safe, f.to)
	ix.logsSinceLog += logs
	ix.logsTotal += logs
	switch {
	case !ix.backfill && left > ix.cfg.MaxBlockRange:
		// The rates count from here: the blocks after this range, and the time after its write.
		ix.backfill, ix.backfillStart, ix.lastLog = true, now, now
		ix.lastLogBlock, ix.startFrom, ix.logsSinceLog, ix.logsTotal = f.to, f.to+1, 0, 0
		ix.log.Info("owners index: backfill started", zap.Uint64("from", f.from), zap.Uint64("head", f.head),
			zap.Uint64("blocks_left", left))
	case ix.backfill && left == 0:
		ix.backfill = false
		took := now.Sub(ix.backfillStart)
		ix.log.Info("owners index: backfill caught up", zap.Uint64("block", f.to), zap.Uint64("blocks", f.to+1-min(f.to+1, ix.startFrom)),
			zap.Int("logs", ix.logsTotal), zap.Duration("took", took.Round(time.Millisecond)),
			zap.Float64("logs_per_s", round1(float64(ix.logsTotal)/max(took.Seconds(), 1e-3))))
	case ix.backfill && now.Sub(ix.lastLog) >= ix.cfg.ProgressLogInterval:
		secs := now.Sub(ix.lastLog).Seconds()
		rate := float64(f.to-ix.lastLogBlock) / secs
		fields := []zap.Field{zap.Uint64("block", f.to), zap.Uint64("head", f.head), zap.Uint64("blocks_left", left),
			zap.Float64("blocks_per_s", round1(rate)), zap.Float64("logs_per_s", round1(float64(ix.logsSinceLog)/secs))}
		if rate > 0 {
			fields = append(fields, zap.Duration("eta", time.Duration(float64(left)/rate*float64(time.Second)).Round(time.Second)))
		}
		ix.log.Info("owners index: backfill progress", fields...)
		ix.lastLog, ix.lastLogBlock, ix.logsSinceLog = now, f.to, 0
	}
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// reorg finds the newest stored block still on the chain and undoes everything above it;
// when none is, or blocks above it were indexed without undo data, the chain's index is
// rebuilt from the start block.
func (ix *indexer) reorg(ctx context.Context) error {
	var (
		p      *store.NFTIndexProgress
		blocks []store.NFTIndexBlock
	)
	err := ix.db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		if p, err = tx.NFTIndexProgress(ctx, ix.chainID); err != nil {
			return err
		}
		blocks, err = tx.NFTIndexBlocks(ctx, ix.chainID, 0)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	ancestor, found, err := ix.onChain(ctx, blocks)
	if err != nil {
		return fmt.Errorf("reorg: %w", err)
	}
	if !found {
		return ix.reindex(ctx, p.Block, "none of the stored block hashes is on the chain: the reorg is deeper than reorgDepth")
	}
	if ancestor.Number == p.Block {
		return nil // the node's view moved and came back: nothing to undo
	}
	undone := 0
	for _, b := range blocks {
		if b.Number > ancestor.Number && b.Undo {
			undone++
		}
	}
	if uint64(undone) != p.Block-ancestor.Number {
		return ix.reindex(ctx, p.Block, "the reorg reaches blocks indexed without undo data (deeper than reorgDepth below the head)")
	}
	var restored int
	err = ix.db.Write(ctx, func(tx *store.DBTx) error {
		if err := ix.expectProgress(ctx, tx, true, p.Block); err != nil {
			return err
		}
		var err error
		if restored, err = rollback(ctx, tx, ix.chainID, ancestor.Number); err != nil {
			return err
		}
		return tx.PutNFTIndexProgress(ctx, &store.NFTIndexProgress{ChainID: ix.chainID, Scope: ix.scope,
			Block: ancestor.Number, Hash: ancestor.Hash, UpdatedAt: time.Now()})
	})
	if err != nil {
		return fmt.Errorf("reorg: roll back to block %d: %w", ancestor.Number, err)
	}
	depth := p.Block - ancestor.Number
	ix.m.rolledBack.Inc()
	ix.m.rolledBlocks.Add(float64(depth))
	ix.m.indexed.Set(float64(ancestor.Number))
	ix.log.Warn("owners index: reorg rolled back", zap.Uint64("from_block", p.Block), zap.Uint64("to_block", ancestor.Number),
		zap.Uint64("depth", depth), zap.Int("restored", restored))
	return nil
}

// onChain returns the newest of blocks (newest first) whose hash the chain still has.
func (ix *indexer) onChain(ctx context.Context, blocks []store.NFTIndexBlock) (store.NFTIndexBlock, bool, error) {
	for start := 0; start < len(blocks); start += ancestorBatch {
		chunk := blocks[start:min(start+ancestorBatch, len(blocks))]
		calls := make([]upstreams.BatchCall, len(chunk))
		for i, b := range chunk {
			calls[i] = getBlockCall(b.Number)
		}
		rctx, cancel := context.WithTimeout(ctx, ix.cfg.RequestTimeout)
		res, err := ix.chain.ForwardBatch(rctx, calls)
		cancel()
		if err != nil {
			return store.NFTIndexBlock{}, false, err
		}
		for i, b := range chunk {
			h, err := parseHeader(res[i], b.Number)
			switch {
			case errors.Is(err, errNotYet):
				continue // the chain is shorter now
			case err != nil:
				return store.NFTIndexBlock{}, false, err
			case h.hash == b.Hash:
				return b, true, nil
			}
		}
	}
	return store.NFTIndexBlock{}, false, nil
}

// reindex drops the chain's index: the next session rebuilds it from the start block.
func (ix *indexer) reindex(ctx context.Context, indexed uint64, why string) error {
	if err := ix.drop(ctx); err != nil {
		return fmt.Errorf("reorg: drop the index: %w", err)
	}
	ix.m.reindexed.Inc()
	ix.m.indexed.Set(0)
	ix.log.Error("owners index: reorg that cannot be rolled back; rebuilding the chain's index from startBlock",
		zap.String("why", why), zap.Uint64("was_indexed_to", indexed), zap.Uint64("start_block", ix.cfg.StartBlock))
	return nil
}
