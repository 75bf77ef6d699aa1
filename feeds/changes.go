package feeds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/upstreams"
)

// Cursor is a position in a chain: a block number and its hash.
type Cursor struct {
	Number uint64
	Hash   common.Hash
}

// ErrTooFar is Changes' error when more than maxBlocks blocks were added after the cursor
// (the caller drops the filter).
var ErrTooFar = errors.New("more blocks since the cursor than the filter may span")

// freshFor is how recent the feed's last successful round must be for Latest and Changes
// to answer from its history.
func (f *Feed) freshFor() time.Duration { return 3*f.cfg.PollInterval + time.Second }

// Latest is the chain's latest block as a cursor: the feed's last delivered block when its
// history is fresh (its last round ended less than 3 poll intervals + 1s ago), else one
// upstream call. It keeps the feed running (see the package comment).
func (f *Feed) Latest(ctx context.Context) (Cursor, error) {
	if f.set.closed.Load() {
		return Cursor{}, errClosed
	}
	f.touch(false)
	f.mu.Lock()
	if f.freshLocked() {
		b := f.hist[len(f.hist)-1]
		f.mu.Unlock()
		return Cursor{Number: b.Number, Hash: b.Hash}, nil
	}
	f.mu.Unlock()
	b, err := f.latest(ctx)
	if err != nil {
		return Cursor{}, err
	}
	return Cursor{Number: b.Number, Hash: b.Hash}, nil
}

// freshLocked reports whether the history answers for the chain's head. f.mu is held.
func (f *Feed) freshLocked() bool {
	return len(f.hist) > 0 && !f.lastOK.IsZero() && time.Since(f.lastOK) < f.freshFor()
}

// Changes is what happened after since, up to the current head: removed = the blocks of
// since's branch that are no longer canonical, oldest first, added = the canonical blocks
// after the fork point, ascending. With logs, the blocks carry their logs (HasLogs): the
// added blocks always (an error when they cannot be read), the removed ones when the feed
// kept them or the upstream still serves them by hash.
//
// It answers from the feed's history when that is fresh and covers since (on its canonical
// chain, or among the removed blocks the feed remembers); else from the upstream: the head
// and since's height in one round trip, then the added blocks in runs (with their logs in
// the same round trip), and for a since that is no longer canonical its branch walked back
// by hash (the feed's memory first, then eth_getBlockByHash) to the fork point.
//
// What cannot be known is left out: when neither the feed nor the node knows since's block
// any more (a node that dropped it, as anvil does after anvil_revert), removed holds one
// block with only its Number, Hash and ParentHash (the canonical block below it; no Header,
// no logs) and the new branch is taken to start at since's height (blocks replaced below it
// are not seen); a removed block's parent that is unknown likewise. The fork point is always
// removed[0]'s number less one, with hash removed[0].ParentHash: the new cursor when added
// is empty. A node without a block at since's height (behind the cursor, which came from a
// replica that was ahead; or a chain now shorter, if since is unknown) answers nothing new
// until the chain passes since's height.
//
// More than maxBlocks added blocks (maxBlocks > 0) is ErrTooFar, found before they are
// read. It keeps the feed running, fetching logs for every block when logs is set (see the
// package comment), so that the next poll is answered from the history.
func (f *Feed) Changes(ctx context.Context, since Cursor, logs bool, maxBlocks int) (removed, added []*Block, err error) {
	if f.set.closed.Load() {
		return nil, nil, errClosed
	}
	f.touch(logs)
	removed, added, ok, err := f.changesFromHistory(since, maxBlocks)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		if removed, added, err = f.changesFromUpstream(ctx, since, logs, maxBlocks); err != nil {
			return nil, nil, err
		}
	}
	if !logs {
		return removed, added, nil
	}
	if added, err = f.completeLogs(ctx, added, true); err != nil {
		return nil, nil, err
	}
	removed, _ = f.completeLogs(ctx, removed, false)
	return removed, added, nil
}

// tooFar reports whether n added blocks are more than maxBlocks allows.
func tooFar(n uint64, maxBlocks int) bool { return maxBlocks > 0 && n > uint64(maxBlocks) }

// changesFromHistory is Changes from the history; ok false when it does not cover since.
func (f *Feed) changesFromHistory(since Cursor, maxBlocks int) (removed, added []*Block, ok bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.freshLocked() {
		return nil, nil, false, nil
	}
	base, tip := f.hist[0].Number, f.hist[len(f.hist)-1]
	if b := f.canonicalLocked(since.Number); b != nil && b.Hash == since.Hash {
		if tooFar(tip.Number-since.Number, maxBlocks) {
			return nil, nil, false, ErrTooFar
		}
		return nil, slices.Clone(f.hist[since.Number+1-base:]), true, nil
	}
	cur := f.byHash[since.Hash]
	if cur == nil || cur.Number != since.Number {
		return nil, nil, false, nil
	}
	branch := []*Block{cur}
	for {
		if p := f.canonicalLocked(cur.Number - 1); cur.Number > 0 && p != nil && p.Hash == cur.ParentHash {
			break
		}
		parent := f.byHash[cur.ParentHash]
		if parent == nil || parent.Number+1 != cur.Number || len(branch) > f.cfg.History {
			return nil, nil, false, nil
		}
		branch = append(branch, parent)
		cur = parent
	}
	fork := cur.Number - 1
	if tooFar(tip.Number-fork, maxBlocks) {
		return nil, nil, false, ErrTooFar
	}
	slices.Reverse(branch)
	return branch, slices.Clone(f.hist[fork+1-base:]), true, nil
}

// changesFromUpstream is Changes from the upstream.
func (f *Feed) changesFromUpstream(ctx context.Context, since Cursor, logs bool, maxBlocks int) (removed, added []*Block, err error) {
	res, err := f.batch(ctx, []upstreams.BatchCall{latestCall, blockByNumberCall(since.Number)})
	if err != nil {
		return nil, nil, err
	}
	for _, r := range res {
		if r.Err != nil {
			return nil, nil, r.Err
		}
	}
	head, err := parseBlock(res[0].Result)
	if err == nil && head == nil {
		err = fmt.Errorf("%w: no latest block", errNotYet)
	}
	if err != nil {
		return nil, nil, err
	}
	at, err := parseBlock(res[1].Result)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case at == nil && since.Number > head.Number:
		return nil, nil, nil // the node is behind the cursor
	case at == nil:
		return nil, nil, fmt.Errorf("%w: block %d", errNotYet, since.Number)
	case at.Hash == since.Hash:
		if head.Number <= since.Number {
			return nil, nil, nil
		}
		if tooFar(head.Number-since.Number, maxBlocks) {
			return nil, nil, ErrTooFar
		}
		added, err = f.readRange(ctx, since.Number+1, since.Hash, head, logs)
		return nil, added, err
	}
	// since's block left the chain.
	removed, start, err := f.branchOf(ctx, since, maxBlocks)
	if err != nil {
		return nil, nil, err
	}
	if head.Number+1 < start {
		return removed, nil, nil
	}
	if tooFar(head.Number+1-start, maxBlocks) {
		return nil, nil, ErrTooFar
	}
	added, err = f.readRange(ctx, start, removed[0].ParentHash, head, logs)
	return removed, added, err
}

// readRange reads the canonical blocks from on up to head (from's parent must have hash
// parent), in runs, with their logs when logs. A run that fails is tried again at half the
// length (a node refusing a log range or an answer that large), down to one block. It stops
// early, with what it has, where the chain changes under it.
func (f *Feed) readRange(ctx context.Context, from uint64, parent common.Hash, head *Block, logs bool) ([]*Block, error) {
	var out []*Block
	span := uint64(maxBatch - 1)
	for from <= head.Number {
		to := min(head.Number, from+span-1)
		var top *Block
		if to == head.Number {
			top = head
		}
		run, err := f.fetchRun(ctx, from, to, top, logs)
		if err != nil {
			if span == 1 || ctx.Err() != nil {
				return nil, err
			}
			span /= 2
			continue
		}
		if len(run) == 0 || run[0].ParentHash != parent {
			break
		}
		out = append(out, run...)
		if len(run) < int(to-from+1) {
			break
		}
		from, parent = to+1, run[len(run)-1].Hash
	}
	return out, nil
}

// branchOf walks since's branch, which left the chain, back to the chain: the removed blocks
// oldest first, and start, the first height of the new branch; removed[0].ParentHash is the
// canonical block at start-1. Blocks come from the feed's memory, else from the upstream by
// hash; where neither knows one, a block with only its number, hash and (canonical) parent
// hash stands for it, the walk stops there and the new branch is taken to start at its
// height.
func (f *Feed) branchOf(ctx context.Context, since Cursor, maxBlocks int) (removed []*Block, start uint64, err error) {
	limit := f.cfg.History
	if maxBlocks > 0 {
		limit = min(limit, maxBlocks)
	}
	canon := map[uint64]common.Hash{}
	canonAt := func(n uint64) (common.Hash, error) {
		if h, ok := canon[n]; ok {
			return h, nil
		}
		hs, err := f.headers(ctx, n-min(n, walkWindow-1), n)
		if err != nil {
			return common.Hash{}, err
		}
		for _, b := range hs {
			canon[b.Number] = b.Hash
		}
		return canon[n], nil
	}
	stub := func(n uint64, h common.Hash) (*Block, error) {
		b := &Block{Number: n, Hash: h}
		if n > 0 {
			var err error
			if b.ParentHash, err = canonAt(n - 1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	cur, err := f.blockByHash(ctx, since.Hash)
	if err != nil {
		return nil, 0, err
	}
	if cur == nil || cur.Number != since.Number {
		b, err := stub(since.Number, since.Hash)
		if err != nil {
			return nil, 0, err
		}
		return []*Block{b}, since.Number, nil
	}
	branch := []*Block{cur}
	for cur.Number > 0 {
		n := cur.Number - 1
		h, err := canonAt(n)
		if err != nil {
			return nil, 0, err
		}
		if h == cur.ParentHash {
			start = cur.Number
			break
		}
		if len(branch) >= limit {
			return nil, 0, ErrTooFar
		}
		parent, err := f.blockByHash(ctx, cur.ParentHash)
		if err != nil {
			return nil, 0, err
		}
		if parent == nil || parent.Number != n {
			b, err := stub(n, cur.ParentHash)
			if err != nil {
				return nil, 0, err
			}
			branch = append(branch, b)
			start = n
			break
		}
		branch = append(branch, parent)
		cur = parent
	}
	slices.Reverse(branch)
	return branch, start, nil
}

// blockByHash is the block with hash h from the feed's memory, else from the upstream (nil:
// unknown to both).
func (f *Feed) blockByHash(ctx context.Context, h common.Hash) (*Block, error) {
	f.mu.Lock()
	b := f.byHash[h]
	f.mu.Unlock()
	if b != nil {
		return b, nil
	}
	res, err := f.batch(ctx, []upstreams.BatchCall{blockByHashCall(h)})
	if err != nil {
		return nil, err
	}
	if res[0].Err != nil {
		return nil, res[0].Err
	}
	b, err = parseBlock(res[0].Result)
	if err != nil || b == nil || b.Hash != h {
		return nil, err
	}
	return b, nil
}

// completeLogs returns blocks with the logs of those that lack them read by hash. strict:
// an error fails it; else a block whose logs cannot be read (an error, or none although its
// logsBloom says it has some) stays without. Blocks read for the history's blocks replace
// them there, so that the next poll finds them.
func (f *Feed) completeLogs(ctx context.Context, blocks []*Block, strict bool) ([]*Block, error) {
	var missing []*Block
	for _, b := range blocks {
		if !b.HasLogs && b.Header != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return blocks, nil
	}
	filled := make([]*Block, len(missing))
	if strict {
		var err error
		if filled, err = f.logsByHash(ctx, missing); err != nil {
			return nil, err
		}
	} else {
		for i, b := range missing {
			got, err := f.logsByHash(ctx, []*Block{b})
			if err != nil || (len(got[0].Logs) == 0 && !b.bloomEmpty) {
				filled[i] = b
				continue
			}
			filled[i] = got[0]
		}
	}
	out := slices.Clone(blocks)
	k := 0
	f.mu.Lock()
	for i, b := range out {
		if k < len(missing) && b == missing[k] {
			nb := filled[k]
			k++
			out[i] = nb
			if nb.HasLogs {
				f.replaceLocked(b, nb)
			}
		}
	}
	f.mu.Unlock()
	return out, nil
}

// replaceLocked puts b, old with its logs, in old's place in the history and memory. f.mu is
// held.
func (f *Feed) replaceLocked(old, b *Block) {
	if f.byHash[old.Hash] == old {
		f.byHash[old.Hash] = b
	}
	if c := f.canonicalLocked(old.Number); c == old {
		f.hist[old.Number-f.hist[0].Number] = b
	}
}
