// Package filters is the HTTP filters stage: eth_newFilter, eth_newBlockFilter,
// eth_newPendingTransactionFilter, eth_getFilterChanges, eth_getFilterLogs and
// eth_uninstallFilter, answered by web3gate and never forwarded to a node (a node's filter
// lives on that node only, and the next poll may reach another node or another replica).
//
// A filter's state is a row of the store (store/filters.go): its chain, owner, kind, criteria,
// cursor (the last block it reported) and expiry. A poll asks the chain's feed (feeds/) what
// happened after the cursor, answers it, and moves the cursor by compare and swap, so that
// whichever replica a poll reaches serves it and two concurrent polls never report the same
// changes twice.
package filters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// Feed is the live feed of one chain (*feeds.Feed satisfies it).
type Feed interface {
	Latest(ctx context.Context) (feeds.Cursor, error)
	Changes(ctx context.Context, since feeds.Cursor, logs bool, maxBlocks int) (removed, added []*feeds.Block, err error)
}

// Deps are the stage's collaborators.
type Deps struct {
	// DB holds the filters.
	DB *store.DB
	// Feed is the feed of a chain; false for a chain without one.
	Feed func(chainID uint64) (Feed, bool)
	// Chains label the chains of web3gate_filters_alive: chain id → name (upstreams'
	// chains[].name). A filter of a chain not listed is not counted.
	Chains map[uint64]string
	// Logger: nil, no logs.
	Logger *zap.Logger
	// Registry receives the metrics; nil: they are not registered.
	Registry prometheus.Registerer
	// Charger charges eth_getFilterLogs and the polls of logs filters by their block range;
	// nil: they cost their table price only (rate limits off).
	Charger Charger
}

// Charger charges a call more than the table price its exchange paid, once the stage knows
// what it amounts to (*ratelimit.Stage satisfies it).
type Charger interface {
	// ChargeAs charges c what the call as (an eth_getLogs) costs less what c's own method
	// costs; nothing when that is not more. Its error (-32005, as the rate limit refuses)
	// answers c.
	ChargeAs(c *proxy.Call, as *jsonrpc.Request) error
}

// Stage answers the filter methods; every other call passes on.
type Stage struct {
	cfg    Config
	db     *store.DB
	feed   func(chainID uint64) (Feed, bool)
	chains map[uint64]string
	charge Charger
	log    *zap.Logger
	now    func() time.Time

	polls map[string]prometheus.Counter // by outcome
	alive *prometheus.GaugeVec

	start, stop sync.Once
	quit, done  chan struct{}
}

var _ proxy.Stage = (*Stage)(nil)

// Outcomes of a poll (label outcome of web3gate_filter_polls_total).
const (
	pollChanges  = "changes"   // answered with changes
	pollEmpty    = "empty"     // answered [], nothing new
	pollRaced    = "raced"     // answered [] after losing the cursor to concurrent polls twice
	pollNotFound = "not_found" // no such live filter of the caller
	pollDropped  = "dropped"   // the filter was dropped by this poll
	pollLimited  = "limited"   // refused by the rate limit or quota for its block range
	pollError    = "error"     // the feed, the chain or the store failed
)

// New builds the stage (cfg's unset fields defaulted, then validated). Start runs its sweeper.
func New(cfg Config, deps Deps) (*Stage, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("filters: %w", err)
	}
	if deps.DB == nil || deps.Feed == nil {
		return nil, errors.New("filters: a store and the chains' feeds are required")
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	reg := deps.Registry
	if reg == nil {
		reg = prometheus.NewRegistry() // unexported: the metrics are kept but not served
	}
	f := promauto.With(reg)
	pollsVec := f.NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_filter_polls_total",
		Help: "eth_getFilterChanges calls, by outcome (changes, empty, raced: lost to concurrent polls of the same filter, not_found, dropped: the poll dropped the filter, limited: refused by the rate limit or quota for its block range, error).",
	}, []string{"outcome"})
	s := &Stage{
		cfg: cfg, db: deps.DB, feed: deps.Feed, chains: deps.Chains, charge: deps.Charger, log: log, now: time.Now,
		polls: map[string]prometheus.Counter{},
		alive: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "web3gate_filters_alive",
			Help: "Live HTTP filters (eth_newFilter, eth_newBlockFilter) in the store, by chain; refreshed by the sweeper every filters.ttl/5.",
		}, []string{"chain"}),
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	for _, o := range []string{pollChanges, pollEmpty, pollRaced, pollNotFound, pollDropped, pollLimited, pollError} {
		s.polls[o] = pollsVec.WithLabelValues(o)
	}
	for _, name := range deps.Chains {
		s.alive.WithLabelValues(name).Set(0)
	}
	return s, nil
}

// Serve implements proxy.Stage.
func (s *Stage) Serve(c *proxy.Call, next proxy.Handler) (*proxy.Response, error) {
	switch c.Method() {
	case "eth_newFilter":
		return s.newFilter(c)
	case "eth_newBlockFilter":
		return s.newBlockFilter(c)
	case "eth_newPendingTransactionFilter":
		return nil, errPendingNotOffered
	case "eth_getFilterChanges":
		return s.getFilterChanges(c)
	case "eth_getFilterLogs":
		return s.getFilterLogs(c, next)
	case "eth_uninstallFilter":
		return s.uninstallFilter(c)
	}
	return next.Serve(c)
}

// Errors, in geth's words where geth has them (geth answers its filter errors with -32000).
var (
	errNotFound = &jsonrpc.Error{Code: -32000, Message: "filter not found", HTTPStatus: http.StatusOK}
	// errDropped is derived (With) for each dropped filter with its reason.
	errDropped           = &jsonrpc.Error{Code: -32000, Message: "filter dropped", HTTPStatus: http.StatusOK}
	errPendingNotOffered = jsonrpc.ErrMethodNotFound.With("eth_newPendingTransactionFilter is not offered on this chain: " +
		"web3gate follows mined blocks, not the nodes' pending transactions (use eth_newBlockFilter or eth_newFilter)")
)

// owner is who owns the filters the call makes and polls: the principal of its bearer token,
// else its client id (the auth stage requires one).
func owner(c *proxy.Call) string {
	if c.Principal.Authenticated() {
		return c.Principal.ID
	}
	if c.Principal != nil && c.Principal.ClientID != "" {
		return "client:" + c.Principal.ClientID
	}
	return "client:" + c.Exchange.ClientID
}

// chainFeed is the feed of the call's chain.
func (s *Stage) chainFeed(c *proxy.Call) (Feed, error) {
	f, ok := s.feed(c.ChainID)
	if !ok {
		return nil, jsonrpc.ErrUnknownChain.Withf("chain %d is not served here", c.ChainID)
	}
	return f, nil
}

// params decodes the call's params array, of at most max elements (geth's wording).
func params(c *proxy.Call, max int) ([]json.RawMessage, error) {
	var ps []json.RawMessage
	if len(c.Request.Params) > 0 {
		if err := json.Unmarshal(c.Request.Params, &ps); err != nil {
			return nil, jsonrpc.ErrInvalidParams.With("non-array args")
		}
	}
	if len(ps) > max {
		return nil, jsonrpc.ErrInvalidParams.Withf("too many arguments, want at most %d", max)
	}
	return ps, nil
}

// filterKey reads the filter id, the one param of the poll methods and eth_uninstallFilter,
// into the key of the caller's filter on the call's chain. ok is false when the id cannot be
// any filter's (never issued by web3gate).
func filterKey(c *proxy.Call) (k store.FilterKey, ok bool, err error) {
	ps, err := params(c, 1)
	if err != nil {
		return k, false, err
	}
	if len(ps) == 0 {
		return k, false, jsonrpc.ErrInvalidParams.With("missing value for required argument 0")
	}
	var id string
	if err := json.Unmarshal(ps[0], &id); err != nil {
		return k, false, jsonrpc.ErrInvalidParams.With("invalid argument 0: the filter id must be a string")
	}
	return store.FilterKey{ChainID: c.ChainID, ID: id, Owner: owner(c)}, jsonrpc.ValidID(id), nil
}

// quoted is s as a JSON string result.
func quoted(s string) *proxy.Response { return &proxy.Response{Result: strconv.AppendQuote(nil, s)} }

// Start runs the sweeper: every filters.ttl/5 it deletes the expired filters and refreshes
// web3gate_filters_alive. Every replica sweeps; the deletions do not conflict.
func (s *Stage) Start() {
	s.start.Do(func() { go s.sweep() })
}

// Close stops the sweeper and waits for it.
func (s *Stage) Close() {
	s.stop.Do(func() { close(s.quit) })
	started := true
	s.start.Do(func() { started = false })
	if started {
		<-s.done
	}
}

func (s *Stage) sweep() {
	defer close(s.done)
	every := min(max(s.cfg.TTL/5, 200*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.sweepOnce(every)
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
	}
}

// sweepOnce deletes the expired filters and refreshes the gauge, within timeout.
func (s *Stage) sweepOnce(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	now := s.now()
	var (
		swept int64
		live  map[uint64]int
	)
	err := s.db.WriteOne(ctx, func(tx *store.DBTx) error {
		var err error
		swept, err = tx.SweepFilters(ctx, now)
		return err
	})
	if err == nil {
		err = s.db.ReadOne(ctx, func(tx *store.DBTx) error {
			var err error
			live, err = tx.LiveFilters(ctx, now)
			return err
		})
	}
	if err != nil {
		// A store outage is logged by the store, once; anything else here.
		if !errors.Is(err, store.ErrUnavailable) {
			s.log.Warn("filters sweep", zap.Error(err))
		}
		return
	}
	if ce := s.log.Check(zap.DebugLevel, "filters swept"); ce != nil && swept > 0 {
		ce.Write(zap.Int64("deleted", swept))
	}
	for id, name := range s.chains {
		s.alive.WithLabelValues(name).Set(float64(live[id]))
	}
}
