package feeds

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Runs: a run of blocks and, with logs, one eth_getLogs over it go in one batch.
const (
	// growAfter successful runs in a row double a span that was halved.
	growAfter = 8
	// walkWindow is how many blocks one round trip of a reorg's walk back reads.
	walkWindow = 16
)

// round is one poll (pushed nil: the latest block is asked for) or one pushed head, then
// whatever it takes to deliver up to it. At its end, the subscriptions that waited for
// their first head (Subscribe) are released.
func (f *Feed) round(parent context.Context, pushed *Block) error {
	ctx, cancel := context.WithTimeout(parent, roundTimeout)
	defer cancel()
	withLogs := f.refreshSinks()
	latest := pushed
	if latest == nil {
		var err error
		if latest, err = f.latest(ctx); err != nil {
			return err
		}
	}
	f.sawHead(latest.Number)
	if err := f.follow(ctx, latest, withLogs); err != nil {
		return err
	}
	f.mu.Lock()
	f.lastOK = time.Now()
	f.mu.Unlock()
	for _, c := range f.ready {
		close(c)
	}
	clear(f.ready)
	f.ready = f.ready[:0]
	return nil
}

// refreshSinks takes the snapshot of sinks this round delivers to, and reports whether the
// round fetches logs: a sink wants them, or Changes did lately.
func (f *Feed) refreshSinks() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sinksChanged {
		n := len(f.snapshot)
		f.snapshot = append(f.snapshot[:0], f.sinks...)
		if n > len(f.snapshot) {
			clear(f.snapshot[len(f.snapshot):n])
		}
		f.sinksChanged = false
	}
	f.ready = append(f.ready, f.waiters...)
	clear(f.waiters)
	f.waiters = f.waiters[:0]
	return f.logSinks > 0 || (!f.lastLogsUse.IsZero() && time.Since(f.lastLogsUse) < f.idleAfter)
}

// sawHead records the latest block number seen, and when a higher one was first seen.
func (f *Feed) sawHead(n uint64) {
	now := time.Now()
	f.mu.Lock()
	higher := n > f.seen
	f.seen = n
	f.mu.Unlock()
	f.m.head.Set(float64(n))
	if higher {
		f.m.headSeen.Set(float64(now.UnixNano()) / 1e9)
	}
}

// follow delivers up to latest.
func (f *Feed) follow(ctx context.Context, latest *Block, withLogs bool) error {
	tip := f.tip()
	if tip == nil {
		return f.begin(ctx, latest, withLogs)
	}
	switch {
	case latest.Number < tip.Number:
		if b := f.canonical(latest.Number); b == nil || b.Hash == latest.Hash {
			// A node behind the delivered head (a failover to a lagging node): nothing is
			// delivered backwards; the chain will pass the delivered head.
			return nil
		}
		return f.reorg(ctx, []*Block{latest}, withLogs)
	case latest.Number == tip.Number:
		if latest.Hash == tip.Hash {
			return nil
		}
		return f.reorg(ctx, []*Block{latest}, withLogs)
	case latest.Number-tip.Number > uint64(f.cfg.MaxCatchUp):
		f.log.Warn("feed gap longer than feeds.maxCatchUp: resuming at the head, the blocks in between are not delivered",
			zap.Uint64("delivered", tip.Number), zap.Uint64("head", latest.Number), zap.Int("max_catch_up", f.cfg.MaxCatchUp))
		return f.jump(ctx, latest, withLogs)
	}
	return f.catchUp(ctx, latest, withLogs)
}

// begin starts the history of a feed that has none at latest, which is not delivered: read
// after the subscriptions of the round were made, it is their start (Subscribe waits for
// it). When one of them stopped waiting (startLate), at the pool's head when a sink woke the
// feed instead, so that the blocks after it are delivered.
func (f *Feed) begin(ctx context.Context, latest *Block, withLogs bool) error {
	f.mu.Lock()
	from, set := f.startFrom, f.startSet && f.startLate
	f.mu.Unlock()
	base := latest
	if set && from < latest.Number && latest.Number-from <= uint64(f.cfg.MaxCatchUp) {
		hs, err := f.headers(ctx, from, from)
		if err != nil {
			return err // startFrom is kept for the next round
		}
		base = hs[0]
	}
	f.mu.Lock()
	f.startFrom, f.startSet, f.startLate = 0, false, false
	f.appendLocked(base)
	f.mu.Unlock()
	f.m.delivered.Set(float64(base.Number))
	f.setLag()
	if base == latest {
		return nil
	}
	return f.catchUp(ctx, latest, withLogs)
}

// catchUp delivers the blocks after the tip up to latest, a run at a time.
func (f *Feed) catchUp(ctx context.Context, latest *Block, withLogs bool) error {
	if f.span == 0 {
		f.span = maxBatch - 1
	}
	for {
		tip := f.tip()
		if tip.Number >= latest.Number {
			return nil
		}
		from := tip.Number + 1
		to := min(latest.Number, from+uint64(f.span)-1)
		var top *Block
		if to == latest.Number {
			top = latest
		}
		var run []*Block
		var err error
		if from == to && top != nil {
			run = []*Block{latest}
			if withLogs {
				run, err = f.logsByHash(ctx, run)
			}
		} else {
			run, err = f.fetchRun(ctx, from, to, top, withLogs)
		}
		if err != nil {
			f.span = max(1, f.span/2)
			f.okStreak = 0
			return err
		}
		if f.okStreak++; f.okStreak >= growAfter {
			f.span = min(maxBatch-1, f.span*2)
			f.okStreak = 0
		}
		if len(run) == 0 {
			return fmt.Errorf("%w: block %d", errNotYet, from)
		}
		if run[0].ParentHash != tip.Hash {
			if err := f.reorg(ctx, run, withLogs); err != nil {
				return err
			}
			continue
		}
		f.deliver(nil, run)
		if len(run) < int(to-from+1) {
			// The chain changed while read: the next round goes on from here.
			return nil
		}
	}
}

// reorg handles seg, blocks that follow each other and whose first's parent is not the
// delivered block below it: walks back by number to the newest delivered block still on
// the chain, then delivers the blocks above it as removed and the new branch.
func (f *Feed) reorg(ctx context.Context, seg []*Block, withLogs bool) error {
	fork, known := uint64(0), false
	for !known {
		n := seg[0].Number
		oldest := f.oldest()
		if b := f.canonical(n - 1); n > 0 && b != nil && b.Hash == seg[0].ParentHash {
			fork, known = n-1, true
			break
		}
		if n == 0 || n <= oldest.Number {
			break // deeper than the history
		}
		lo := max(oldest.Number, n-min(n, walkWindow))
		win, err := f.headers(ctx, lo, n-1)
		if err != nil {
			return err
		}
		if win[len(win)-1].Hash != seg[0].ParentHash {
			return fmt.Errorf("%w: block %d changed during a reorg's walk back", errInconsistent, n-1)
		}
		cut := -1
		for i := len(win) - 1; i >= 0; i-- {
			if b := f.canonical(win[i].Number); b != nil && b.Hash == win[i].Hash {
				cut = i
				break
			}
		}
		if cut >= 0 {
			fork, known = win[cut].Number, true
			seg = append(win[cut+1:len(win):len(win)], seg...)
			break
		}
		seg = append(win, seg...)
	}
	tip := f.tip()
	if !known {
		f.log.Warn("feed reorg deeper than feeds.history: every block kept is removed",
			zap.Uint64("oldest", f.oldest().Number), zap.Uint64("delivered", tip.Number), zap.Int("history", f.cfg.History))
	}
	if withLogs {
		var missing []int
		for i, b := range seg {
			if !b.HasLogs {
				missing = append(missing, i)
			}
		}
		if len(missing) > 0 {
			some := make([]*Block, len(missing))
			for k, i := range missing {
				some[k] = seg[i]
			}
			filled, err := f.logsByHash(ctx, some)
			if err != nil {
				return err
			}
			for k, i := range missing {
				seg[i] = filled[k]
			}
		}
	}
	f.mu.Lock()
	var removed []*Block
	if known {
		removed = append(removed, f.hist[fork+1-f.hist[0].Number:]...)
	} else {
		removed = append(removed, f.hist...)
	}
	f.mu.Unlock()
	f.m.reorgs.Inc()
	if ce := f.log.Check(zap.InfoLevel, "feed reorg"); ce != nil {
		ce.Write(zap.Uint64("fork", seg[0].Number-1), zap.Int("removed", len(removed)), zap.Int("added", len(seg)),
			zap.Uint64("old_head", tip.Number), zap.Uint64("new_head", seg[len(seg)-1].Number))
	}
	f.deliver(removed, seg)
	return nil
}

// jump resumes at latest after a gap longer than maxCatchUp: the history starts again there.
func (f *Feed) jump(ctx context.Context, latest *Block, withLogs bool) error {
	run := []*Block{latest}
	if withLogs {
		var err error
		if run, err = f.logsByHash(ctx, run); err != nil {
			return err
		}
	}
	f.mu.Lock()
	for _, b := range f.hist {
		delete(f.byHash, b.Hash)
	}
	clear(f.hist)
	f.hist = f.hist[:0]
	f.mu.Unlock()
	f.deliver(nil, run)
	return nil
}

// deliver records removed (the newest blocks of the history, ascending) as orphans and added
// (ascending, the first the child of the block below removed) as the new tip, then delivers
// the Removed events oldest first and the added blocks, to every sink of the round's
// snapshot.
func (f *Feed) deliver(removed, added []*Block) {
	f.mu.Lock()
	if len(removed) > 0 {
		f.hist = f.hist[:len(f.hist)-len(removed)]
		clear(f.hist[len(f.hist) : len(f.hist)+len(removed)])
		for _, b := range removed {
			f.orphans = append(f.orphans, b.Hash)
		}
	}
	for _, b := range added {
		f.appendLocked(b)
	}
	if over := len(f.orphans) - f.cfg.History; over > 0 {
		for _, h := range f.orphans[:over] {
			if b := f.byHash[h]; b != nil && !f.isCanonicalLocked(b) {
				delete(f.byHash, h)
			}
		}
		f.orphans = append(f.orphans[:0], f.orphans[over:]...)
	}
	f.mu.Unlock()

	sinks := f.snapshot
	for _, b := range removed {
		ev := Event{Block: b, Removed: true}
		for _, e := range sinks {
			if !e.gone.Load() {
				e.s.Deliver(ev)
			}
		}
	}
	for _, b := range added {
		ev := Event{Block: b}
		for _, e := range sinks {
			if !e.gone.Load() {
				e.s.Deliver(ev)
			}
		}
	}
	if len(added) > 0 {
		f.m.delivered.Set(float64(added[len(added)-1].Number))
	} else if len(removed) > 0 {
		f.m.delivered.Set(float64(removed[0].Number - 1))
	}
	f.setLag()
}

// appendLocked adds b at the tip of the history, dropping the oldest block beyond History.
// f.mu is held.
func (f *Feed) appendLocked(b *Block) {
	f.hist = append(f.hist, b)
	f.byHash[b.Hash] = b
	if over := len(f.hist) - f.cfg.History; over > 0 {
		for _, old := range f.hist[:over] {
			if f.byHash[old.Hash] == old {
				delete(f.byHash, old.Hash)
			}
		}
		n := copy(f.hist, f.hist[over:])
		clear(f.hist[n:])
		f.hist = f.hist[:n]
	}
}

// isCanonicalLocked reports whether b is in the history. f.mu is held.
func (f *Feed) isCanonicalLocked(b *Block) bool {
	c := f.canonicalLocked(b.Number)
	return c != nil && c.Hash == b.Hash
}

// setLag sets the lag gauge: the latest number seen less the delivered tip's.
func (f *Feed) setLag() {
	f.mu.Lock()
	var lag uint64
	if n := len(f.hist); n > 0 && f.seen > f.hist[n-1].Number {
		lag = f.seen - f.hist[n-1].Number
	}
	f.mu.Unlock()
	f.m.lag.Set(float64(lag))
}

// tip is the last delivered block (nil: no history).
func (f *Feed) tip() *Block {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.hist) == 0 {
		return nil
	}
	return f.hist[len(f.hist)-1]
}

// oldest is the oldest block of the history (which is not empty).
func (f *Feed) oldest() *Block {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hist[0]
}

// canonical is the history's block at number n (nil: not in the history).
func (f *Feed) canonical(n uint64) *Block {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.canonicalLocked(n)
}

// canonicalLocked is canonical with f.mu held.
func (f *Feed) canonicalLocked(n uint64) *Block {
	if len(f.hist) == 0 || n < f.hist[0].Number || n > f.hist[len(f.hist)-1].Number {
		return nil
	}
	return f.hist[n-f.hist[0].Number]
}
