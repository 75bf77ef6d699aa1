package filters

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// newFilter answers eth_newFilter(criteria): a logs filter whose first poll reports the
// matching logs of the blocks after the chain's latest block now. The criteria are geth's:
// "address", "topics", and "fromBlock"/"toBlock" ("latest" or absent, "earliest" or a number;
// a number bounds the blocks whose logs polls report, as geth does) or "blockHash" (polls
// then report only that block's logs, should it join the chain after the filter's creation;
// eth_getFilterLogs reads them).
func (s *Stage) newFilter(c *proxy.Call) (*proxy.Response, error) {
	ps, err := params(c, 1)
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, jsonrpc.ErrInvalidParams.With("missing value for required argument 0")
	}
	crit, err := feeds.ParseCriteria(ps[0])
	if err != nil {
		return nil, err
	}
	if _, err := blockRange(crit); err != nil {
		return nil, err
	}
	stored, err := storeCriteria(crit)
	if err != nil {
		return nil, err
	}
	return s.create(c, store.FilterLogs, stored)
}

// newBlockFilter answers eth_newBlockFilter(): a filter whose polls report the hashes of the
// blocks added to the chain since the previous poll.
func (s *Stage) newBlockFilter(c *proxy.Call) (*proxy.Response, error) {
	if _, err := params(c, 0); err != nil {
		return nil, err
	}
	return s.create(c, store.FilterBlocks, "")
}

// create records a new filter of the caller on the call's chain, its cursor at the chain's
// latest block, and answers its id.
func (s *Stage) create(c *proxy.Call, kind, criteria string) (*proxy.Response, error) {
	feed, err := s.chainFeed(c)
	if err != nil {
		return nil, err
	}
	latest, err := feed.Latest(c.Ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	f := &store.Filter{
		FilterKey: store.FilterKey{ChainID: c.ChainID, Owner: owner(c)},
		Kind:      kind, Criteria: criteria,
		Cursor:    store.FilterCursor(latest),
		ExpiresAt: now.Add(s.cfg.TTL),
	}
	for range 3 { // a random id in use is all but impossible: try another
		f.ID = jsonrpc.NewID()
		err = s.db.Write(c.Ctx, func(tx *store.DBTx) error { return tx.CreateFilter(c.Ctx, f, s.cfg.MaxPerClient, now) })
		if !errors.Is(err, store.ErrExists) {
			break
		}
	}
	switch {
	case errors.Is(err, store.ErrFilterLimit):
		e := jsonrpc.ErrLimitExceeded.Withf("too many filters: %d live filters per client (filters.maxPerClient); "+
			"uninstall filters no longer polled (eth_uninstallFilter) or let them expire (filters.ttl)", s.cfg.MaxPerClient)
		// HTTP 200, not the 429 of a rate: retrying does not help until a filter is gone.
		e.HTTPStatus = http.StatusOK
		return nil, e
	case errors.Is(err, store.ErrInvalidText):
		return nil, jsonrpc.ErrInvalidParams.With("the filter cannot be stored: its client id or principal is not valid UTF-8 text")
	case err != nil:
		return nil, err
	}
	return quoted(f.ID), nil
}

// storedCriteria is the form of a logs filter's criteria in the store: canonical JSON that
// feeds.ParseCriteria reads back and that eth_getLogs takes as it is (eth_getFilterLogs).
type storedCriteria struct {
	Address   []common.Address `json:"address,omitempty"`
	Topics    [][]common.Hash  `json:"topics,omitempty"` // a nil position is null: any topic
	FromBlock string           `json:"fromBlock,omitempty"`
	ToBlock   string           `json:"toBlock,omitempty"`
	BlockHash *common.Hash     `json:"blockHash,omitempty"`
}

// storeCriteria is crit's canonical JSON (its block tags and numbers as given: ParseCriteria
// has checked them as geth reads them).
func storeCriteria(crit *feeds.Criteria) (string, error) {
	sc := storedCriteria{Address: crit.Addresses, FromBlock: crit.FromBlock, ToBlock: crit.ToBlock, BlockHash: crit.BlockHash}
	for _, pos := range crit.Topics {
		if len(pos) == 0 {
			pos = nil
		}
		sc.Topics = append(sc.Topics, pos)
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return "", fmt.Errorf("filter criteria: %w", err)
	}
	return string(b), nil
}

// span is the blocks whose logs a filter's polls report: [from, to], an end of
// rpc.LatestBlockNumber unbounded ("earliest" reads as block 0).
type span struct{ from, to rpc.BlockNumber }

// contains reports whether block n is within r.
func (r span) contains(n uint64) bool {
	return (r.from == rpc.LatestBlockNumber || n >= uint64(r.from)) && (r.to == rpc.LatestBlockNumber || n <= uint64(r.to))
}

// blockRange is crit's range as geth's eth_newFilter accepts it: latest to latest, a number
// to a number not below it, or a number to latest; pending logs are not supported, and the
// other combinations (safe, finalized, latest to a number) are refused with geth's words.
func blockRange(crit *feeds.Criteria) (span, error) {
	r := span{from: crit.From, to: crit.To}
	for _, end := range []*rpc.BlockNumber{&r.from, &r.to} {
		if *end == rpc.EarliestBlockNumber {
			*end = 0
		}
	}
	latest := rpc.LatestBlockNumber
	switch {
	case r.from == rpc.PendingBlockNumber || r.to == rpc.PendingBlockNumber:
		return span{}, jsonrpc.ErrInvalidParams.With("pending logs are not supported")
	case r.from < 0 && r.from != latest, r.to < 0 && r.to != latest, // safe, finalized
		r.from == latest && r.to != latest,
		r.to != latest && r.to < r.from:
		return span{}, jsonrpc.ErrInvalidParams.With("invalid from and to block combination")
	}
	return r, nil
}
