package filters

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/proxy"
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
