// Package feeds follows each configured chain and delivers its blocks, logs and reorgs to
// every consumer of that chain at once: one feed per chain, shared by all WebSocket
// subscriptions (eth_subscribe) and HTTP filters (eth_getFilterChanges) of a replica, so that N
// clients never cause N upstream calls.
//
// A feed polls its chain through the upstream pool (upstream ws:// node URLs are not used):
// eth_getBlockByNumber("latest") every feeds.pollInterval while it has consumers, and at once
// whenever the pool's head tracking sees a higher head.
package feeds

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/upstreams"
)

// Chain is the upstream pool of one chain (*upstreams.Pool satisfies it).
type Chain interface {
	Forward(ctx context.Context, method string, params []byte) ([]byte, error)
	ForwardBatch(ctx context.Context, calls []upstreams.BatchCall) ([]upstreams.BatchResult, error)
	// Head is the pool's head tracking: the best head among the nodes in rotation, 0 unknown.
	Head() uint64
}

// Deps are the dependencies of New.
type Deps struct {
	// Chains are the upstream pools by chain id; one feed each. A Chain with a
	// `Name() string` method (*upstreams.Pool) gives the chain label of logs and metrics,
	// else the decimal chain id.
	Chains map[uint64]Chain
	// Logger: nil, no logs.
	Logger *zap.Logger
	// Registry receives the web3gate_feed_* metrics; nil: they are not registered.
	Registry prometheus.Registerer
}

// Set is the feed of every chain.
type Set struct {
	feeds map[uint64]*Feed
}

// New builds one feed per chain of deps.Chains (cfg's unset fields defaulted, then
// validated). A feed starts polling with its first consumer.
func New(cfg Config, deps Deps) (*Set, error) {
	return &Set{feeds: map[uint64]*Feed{}}, nil
}

// Feed returns the feed of a chain.
func (s *Set) Feed(chainID uint64) (*Feed, bool) {
	f, ok := s.feeds[chainID]
	return f, ok
}

// Close stops every feed goroutine; sinks get nothing more. Later Subscribe calls add sinks
// that get nothing; Changes and Latest fail.
func (s *Set) Close() {}

// Feed is the live feed of one chain.
type Feed struct{}

// Block is one block of the feed. Immutable once delivered: share, never modify.
type Block struct {
	Number     uint64
	Hash       common.Hash
	ParentHash common.Hash
	// Header is the newHeads payload, geth's form: the block object as
	// eth_getBlockByNumber(n,false) returned it WITHOUT "transactions", "uncles", "size",
	// "totalDifficulty", "withdrawals".
	Header json.RawMessage
	// Logs are the block's logs in log-index order, fetched when the feed had a log consumer
	// (HasLogs true); one eth_getLogs per block for ALL consumers together.
	Logs    []Log
	HasLogs bool
}

// Log is one log of a block.
type Log struct {
	Address common.Address
	Topics  []common.Hash
	// Raw is the log object as the node returned it, with "removed": false.
	Raw json.RawMessage
	// RawRemoved is the same object with "removed": true.
	RawRemoved json.RawMessage
}

// Event is one step of a feed, delivered in order. On a reorg: first Removed events for the
// blocks that left the canonical chain, OLDEST FIRST (their logs again with removed:true;
// newHeads subscribers ignore Removed events), then the new branch's blocks ascending as
// ordinary events.
type Event struct {
	Block   *Block
	Removed bool
}

// Sink receives a feed's events. Deliver is called on the feed's goroutine, in order, and
// must not block (queue and return).
type Sink interface{ Deliver(ev Event) }

// Subscribe adds s; logs=true makes the feed fetch logs for every new block while s is
// subscribed. The feed polls only while it has sinks (or had a Changes call lately);
// unsubscribe is idempotent.
func (f *Feed) Subscribe(s Sink, logs bool) (unsubscribe func()) {
	return func() {}
}

// Cursor is a position in a chain: a block number and its hash.
type Cursor struct {
	Number uint64
	Hash   common.Hash
}

// ErrTooFar is Changes' error when more than maxBlocks blocks were added since the cursor.
var ErrTooFar = errors.New("too many blocks since the cursor")

// Latest is the chain's latest block as a cursor (from the feed's history when fresh, else
// one upstream call).
func (f *Feed) Latest(ctx context.Context) (Cursor, error) {
	return Cursor{}, errors.New("not implemented")
}

// Changes is what happened after since, up to the current head: removed = the blocks of
// since's branch that are no longer canonical, oldest first (with their logs when logs is set
// and they are known), added = the canonical blocks after the fork point, ascending (with
// logs when logs is set). More than maxBlocks added blocks → ErrTooFar.
func (f *Feed) Changes(ctx context.Context, since Cursor, logs bool, maxBlocks int) (removed, added []*Block, err error) {
	return nil, nil, errors.New("not implemented")
}
