package filters

import (
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// getFilterChanges answers eth_getFilterChanges(id): what happened on the chain since the
// filter's previous poll (or its creation). A block filter reports the hashes of the blocks
// added, in order; a logs filter first the matching logs of the blocks that left the chain in
// a reorg, again with "removed": true, then the matching logs of the blocks added. A poll
// that reports anything, or nothing, moves the filter's cursor and expiry.
//
// The cursor moves by compare and swap. When another poll of the same filter (on this replica
// or another) moved it between this poll's read and its write, this poll starts again once
// from the new cursor; when it loses a second time, it answers [] (the concurrent polls
// reported the changes, each once).
//
// A poll that would span more than filters.maxBlocks blocks or return more than
// filters.maxLogs logs drops the filter instead: it answers -32000 "filter dropped: …"
// naming the limit, and later polls "filter not found".
//
// A poll of a logs filter is charged as eth_getLogs over the blocks it covers (those added
// and removed since the cursor, within the filter's fromBlock..toBlock), once per call,
// before the cursor moves: a refusal answers -32005 and leaves the cursor where it was, so
// that a later poll reports those blocks. The retry after a lost compare and swap is not
// charged again (the poll that won paid for the blocks it reported).
func (s *Stage) getFilterChanges(c *proxy.Call) (*proxy.Response, error) {
	res, outcome, err := s.poll(c)
	s.polls[outcome].Inc()
	return res, err
}

// poll is getFilterChanges with its outcome, for the metric.
func (s *Stage) poll(c *proxy.Call) (*proxy.Response, string, error) {
	k, ok, err := filterKey(c)
	if err != nil {
		return nil, pollError, err
	}
	if !ok {
		return nil, pollNotFound, errNotFound
	}
	charged := false
	for range 2 {
		f, err := s.filter(c, k)
		if errors.Is(err, store.ErrNotFound) {
			return nil, pollNotFound, errNotFound
		}
		if err != nil {
			return nil, pollError, err
		}
		feed, err := s.chainFeed(c)
		if err != nil {
			return nil, pollError, err
		}
		ch, err := s.changes(c, feed, f)
		if err != nil {
			return nil, pollError, err
		}
		now := s.now()
		if ch.drop != "" {
			ok, err := s.cas(c, func(tx *store.DBTx) (bool, error) { return tx.DropFilter(c.Ctx, k, f.Seq, ch.drop, now) })
			if err != nil {
				return nil, pollError, err
			}
			if ok {
				s.log.Info("filter dropped", zap.Uint64("chain", k.ChainID), zap.String("kind", f.Kind), zap.String("reason", ch.drop))
				return nil, pollDropped, errDropped.With("filter dropped: " + ch.drop)
			}
			continue
		}
		if ch.as != nil && s.charge != nil && !charged {
			charged = true
			if err := s.charge.ChargeAs(c, ch.as); err != nil {
				return nil, pollLimited, err
			}
		}
		ok, err := s.cas(c, func(tx *store.DBTx) (bool, error) {
			return tx.AdvanceFilter(c.Ctx, k, f.Seq, ch.next, now.Add(s.cfg.TTL), now)
		})
		if err != nil {
			return nil, pollError, err
		}
		if ok {
			if ch.n == 0 {
				return &proxy.Response{Result: []byte("[]")}, pollEmpty, nil
			}
			return &proxy.Response{Result: ch.result}, pollChanges, nil
		}
	}
	return &proxy.Response{Result: []byte("[]")}, pollRaced, nil
}

// filter reads the caller's live filter k: ErrNotFound when it is gone or dropped.
func (s *Stage) filter(c *proxy.Call, k store.FilterKey) (*store.Filter, error) {
	var f *store.Filter
	err := s.db.ReadOne(c.Ctx, func(tx *store.DBTx) error {
		var err error
		f, err = tx.Filter(c.Ctx, k, s.now())
		return err
	})
	if err == nil && f.Dropped != "" {
		return nil, fmt.Errorf("filter dropped: %w", store.ErrNotFound)
	}
	return f, err
}

// cas runs one compare-and-swap statement of the filters.
func (s *Stage) cas(c *proxy.Call, stmt func(tx *store.DBTx) (bool, error)) (bool, error) {
	var ok bool
	err := s.db.WriteOne(c.Ctx, func(tx *store.DBTx) error {
		var err error
		ok, err = stmt(tx)
		return err
	})
	return ok, err
}

// changes is what one poll of a filter found.
type changes struct {
	result []byte             // the JSON array answered
	n      int                // its elements
	next   store.FilterCursor // the cursor after them
	drop   string             // set: the poll drops the filter, for this reason
	// as is the eth_getLogs the poll of a logs filter amounts to, for its charge: the blocks
	// it covers within the filter's range; nil: none (a block filter, or no such block).
	as *jsonrpc.Request
}

// changes asks the feed what happened after f's cursor and builds the answer.
func (s *Stage) changes(c *proxy.Call, feed Feed, f *store.Filter) (*changes, error) {
	logs := f.Kind == store.FilterLogs
	var (
		crit *feeds.Criteria
		rng  span
		err  error
	)
	if logs {
		if crit, err = feeds.ParseCriteria([]byte(f.Criteria)); err != nil {
			return nil, fmt.Errorf("stored filter criteria: %w", err)
		}
		if rng, err = blockRange(crit); err != nil {
			return nil, fmt.Errorf("stored filter criteria: %w", err)
		}
	}
	removed, added, err := feed.Changes(c.Ctx, feeds.Cursor(f.Cursor), logs, s.cfg.MaxBlocks)
	if errors.Is(err, feeds.ErrTooFar) {
		return &changes{drop: fmt.Sprintf("more than %d new blocks since the previous poll (filters.maxBlocks): poll more often, or raise filters.maxBlocks", s.cfg.MaxBlocks)}, nil
	}
	if err != nil {
		return nil, err
	}
	ch := &changes{next: f.Cursor}
	if logs {
		ch.as = coveredRange(crit, rng, removed, added)
	}
	switch {
	case len(added) > 0:
		last := added[len(added)-1]
		ch.next = store.FilterCursor{Number: last.Number, Hash: last.Hash}
	case len(removed) > 0 && removed[0].Number > 0:
		// The chain went back to a block below the cursor: the fork point, parent of the
		// oldest block removed.
		ch.next = store.FilterCursor{Number: removed[0].Number - 1, Hash: removed[0].ParentHash}
	}
	out := []byte{'['}
	add := func(raw []byte) {
		if ch.n > 0 {
			out = append(out, ',')
		}
		out = append(out, raw...)
		ch.n++
	}
	if !logs {
		for _, b := range added {
			add([]byte(`"` + b.Hash.Hex() + `"`))
		}
		ch.result = append(out, ']')
		return ch, nil
	}
	for pass, blocks := range [2][]*feeds.Block{removed, added} {
		for _, b := range blocks {
			if !rng.contains(b.Number) || crit.BlockHash != nil && *crit.BlockHash != b.Hash {
				continue
			}
			for i := range b.Logs {
				l := &b.Logs[i]
				if !crit.Match(l) {
					continue
				}
				if ch.n == s.cfg.MaxLogs {
					return &changes{drop: fmt.Sprintf("more than %d logs since the previous poll (filters.maxLogs): poll more often, narrow the filter, or raise filters.maxLogs", s.cfg.MaxLogs)}, nil
				}
				if pass == 0 {
					add(l.RawRemoved)
				} else {
					add(l.Raw)
				}
			}
		}
	}
	ch.result = append(out, ']')
	return ch, nil
}

// coveredRange is the eth_getLogs a poll of a logs filter with crit (range rng) amounts to:
// from the lowest to the highest block of removed and added, within rng; a blockHash filter's
// is that block's query. nil: the poll covers no block of rng.
func coveredRange(crit *feeds.Criteria, rng span, removed, added []*feeds.Block) *jsonrpc.Request {
	var lo, hi uint64
	n := 0
	for _, blocks := range [2][]*feeds.Block{removed, added} {
		for _, b := range blocks {
			if n == 0 || b.Number < lo {
				lo = b.Number
			}
			if n == 0 || b.Number > hi {
				hi = b.Number
			}
			n++
		}
	}
	if rng.from != rpc.LatestBlockNumber {
		lo = max(lo, uint64(rng.from))
	}
	if rng.to != rpc.LatestBlockNumber {
		hi = min(hi, uint64(rng.to))
	}
	if n == 0 || lo > hi {
		return nil
	}
	r := &jsonrpc.Request{Method: "eth_getLogs"}
	if crit.BlockHash != nil {
		r.Params = fmt.Appendf(nil, `[{"blockHash":%q}]`, crit.BlockHash.Hex())
	} else {
		r.Params = fmt.Appendf(nil, `[{"fromBlock":%q,"toBlock":%q}]`, hexutil.Uint64(lo).String(), hexutil.Uint64(hi).String())
	}
	return r
}
