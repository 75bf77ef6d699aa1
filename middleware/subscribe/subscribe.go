// Package subscribe is the eth_subscribe / eth_unsubscribe stage: subscriptions of a
// WebSocket (proxy.Exchange.Socket) to its chain's live feed (package feeds), one feed per
// chain shared by every subscriber. Over HTTP both methods are answered -32601
// "notifications not supported", as geth answers them.
package subscribe

import (
	"errors"
	"sync"

	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Feeds gives the live feed of a chain (*feeds.Set).
type Feeds interface {
	Feed(chainID uint64) (*feeds.Feed, bool)
}

// Config bounds the subscriptions the stage makes.
type Config struct {
	// Criteria bounds a logs subscription's filter (server.websocket.logsCriteria); zero
	// fields: no bound of their own.
	Criteria feeds.Bounds
}

// Deps are the stage's collaborators.
type Deps struct {
	Feeds Feeds
}

// Stage answers eth_subscribe and eth_unsubscribe, and passes every other call on.
type Stage struct {
	feeds  Feeds
	bounds feeds.Bounds

	mu    sync.Mutex
	memos map[uint64]*logsMemo // by chain id; guarded by mu
}

var _ proxy.Stage = (*Stage)(nil)

// New builds the stage.
func New(cfg Config, deps Deps) (*Stage, error) {
	if deps.Feeds == nil {
		return nil, errors.New("subscribe: the feeds are required")
	}
	return &Stage{feeds: deps.Feeds, bounds: cfg.Criteria, memos: map[uint64]*logsMemo{}}, nil
}

// Serve implements proxy.Stage.
func (s *Stage) Serve(c *proxy.Call, next proxy.Handler) (*proxy.Response, error) {
	switch c.Method() {
	case "eth_subscribe":
		if c.Exchange.Socket == nil {
			return nil, errNotificationsUnsupported
		}
		return s.subscribe(c)
	case "eth_unsubscribe":
		if c.Exchange.Socket == nil {
			return nil, errNotificationsUnsupported
		}
		return unsubscribe(c)
	}
	return next.Serve(c)
}

// errNotificationsUnsupported answers eth_subscribe and eth_unsubscribe over HTTP, as geth
// does.
var errNotificationsUnsupported = jsonrpc.ErrMethodNotFound.With("notifications not supported")

// memo is the logsMemo of a chain's feed.
func (s *Stage) memo(chainID uint64) *logsMemo {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.memos[chainID]
	if m == nil {
		m = &logsMemo{}
		s.memos[chainID] = m
	}
	return m
}
