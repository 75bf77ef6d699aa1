// Package ratelimit is the rate-limit stage: budgets in compute units per second, per client
// id and per principal, charged once per exchange (a batch costs the sum of its calls, allowed
// or refused whole), shared by the replicas through Redis when it is configured and kept
// locally otherwise; and the same for the public REST routes, per client id or source address.
package ratelimit

import (
	"errors"
	"hash/maphash"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/internal/redisx"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Quotas charges spent units to a client's durable quotas; nil: no quotas.
type Quotas interface {
	// Charge adds units to clientID's usage. It never blocks on the store. It returns nil, or
	// an error whose Error() is the client-facing message ("quota exceeded: ...") and which
	// implements interface{ RetryAfter() time.Duration } (time until the period resets).
	Charge(clientID string, units uint64) error
}

// Deps are the stage's collaborators.
type Deps struct {
	Registry prometheus.Registerer
	Logger   *zap.Logger
	// Redis, when not nil, holds the budgets that the replicas share.
	Redis *redisx.Client
	// Quotas, when not nil, is charged the units of every allowed exchange of a client id.
	Quotas Quotas
	// Head is the head block of a chain (0: not known), for eth_getLogs ranges with tags; nil:
	// never known.
	Head func(chainID uint64) uint64
	// KnownClient reports whether a REST request's X-API-Key (or apiKey) is a client id; an
	// unknown one is limited by its source address, as a request without one is. nil: none is.
	KnownClient func(id string) bool
}

// Stage is the rate-limit stage, and the limiter of the REST routes (REST).
type Stage struct {
	cfg           Config
	log           *zap.Logger
	redis         *redisx.Client
	script        *redisx.Script
	quotas        Quotas
	head          func(uint64) uint64
	known         func(string) bool
	blocksPerUnit uint64
	// subBytesPerUnit is rateLimit.subscribeBytesPerUnit.
	subBytesPerUnit uint64
	prefix          string // of the Redis keys

	costs      costTable
	clients    map[string]*clientEntry // rateLimit.clients
	defClient  clientEntry
	principals map[string]*limits
	defPrinc   limits
	restIP     limits
	restClient limits

	rpcClients, rpcPrincipals, restClients *table[string]
	restIPs                                *table[netip.Addr]

	m         *metrics
	lastLog   atomic.Int64 // unix nanoseconds of the last fallback log
	logEvery  time.Duration
	notLogged atomic.Int64
}

var _ proxy.Stage = (*Stage)(nil)
var _ proxy.Charger = (*Stage)(nil)

// limits are one budget: the whole of it (shared through Redis) and this replica's share of
// it (the local limiter's).
type limits struct {
	shared, local budget
}

func newLimits(r Rate, replicas int) limits {
	return limits{shared: newBudget(r, 1), local: newBudget(r, replicas)}
}

// clientEntry is a client id's budget, cost table and metrics.
type clientEntry struct {
	limits
	costs costTable
	m     *clientMetrics
}

// New builds the stage from a validated config.
func New(cfg Config, deps Deps) (*Stage, error) {
	if deps.Registry == nil {
		return nil, errors.New("ratelimit: a registry is required")
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	s := &Stage{
		cfg: cfg, log: log, redis: deps.Redis, quotas: deps.Quotas, head: deps.Head, known: deps.KnownClient,
		blocksPerUnit: cfg.GetLogsBlocksPerUnit, subBytesPerUnit: cfg.SubscribeBytesPerUnit, prefix: deps.Redis.KeyPrefix() + "rl:",
		costs:      newCostTable(DefaultCosts, cfg.Costs),
		clients:    map[string]*clientEntry{},
		principals: map[string]*limits{},
		defPrinc:   newLimits(cfg.Principal, cfg.Replicas),
		restIP:     newLimits(cfg.REST.IP, cfg.Replicas),
		restClient: newLimits(cfg.REST.Client, cfg.Replicas),
		logEvery:   time.Minute,
	}
	if s.redis != nil {
		s.script = redisx.NewScript(gcraScript)
	}
	names := make([]string, 0, len(cfg.Clients))
	for _, c := range cfg.Clients {
		names = append(names, c.ClientID)
	}
	m, err := newMetrics(deps.Registry, names)
	if err != nil {
		return nil, err
	}
	s.m = m
	s.defClient = clientEntry{limits: newLimits(cfg.Client, cfg.Replicas), costs: s.costs, m: m.other}
	for _, c := range cfg.Clients {
		s.clients[c.ClientID] = &clientEntry{limits: newLimits(c.Rate, cfg.Replicas),
			costs: newCostTable(DefaultCosts, cfg.Costs, c.Costs), m: m.clients[c.ClientID]}
	}
	for _, p := range cfg.Principals {
		l := newLimits(p.Rate, cfg.Replicas)
		s.principals[p.ID] = &l
	}
	cloneString := strings.Clone
	s.rpcClients = newTable(cfg.MaxKeys, hashString, cloneString)
	s.rpcPrincipals = newTable(cfg.MaxKeys, hashString, cloneString)
	s.restClients = newTable(cfg.MaxKeys, hashString, cloneString)
	s.restIPs = newTable(cfg.MaxKeys, hashAddr, func(a netip.Addr) netip.Addr { return a })
	return s, nil
}

func hashAddr(seed maphash.Seed, a netip.Addr) uint64 {
	b := a.As16()
	return maphash.Bytes(seed, b[:])
}

// Serve implements proxy.Stage: the exchange is charged when its first call comes (a batch's
// calls all at once), and every call of a refused exchange is refused.
func (s *Stage) Serve(c *proxy.Call, next proxy.Handler) (*proxy.Response, error) {
	if err := c.Exchange.Charge(s, c); err != nil {
		return nil, err
	}
	return next.Serve(c)
}

// ChargeExchange implements proxy.Charger: the exchange's cost (the sum of its calls') to
// its client id's budget and its principal's, both or neither, then to the client's quotas.
func (s *Stage) ChargeExchange(c *proxy.Call) error {
	e := c.Exchange
	w := s.payer(c)
	var cost uint64
	reqs := e.Requests()
	for i := range reqs {
		if reqs[i].Invalid == nil {
			cost = addCost(cost, s.cost(w.entry.costs, &reqs[i], c.ChainID))
		}
	}
	l, err := s.spend(e.Start, w, cost, "the request costs")
	e.Limit = l
	if err == nil {
		w.entry.m.allowed.Inc()
	}
	return err
}

// ChargeAs charges call c, once a later stage knows what it amounts to, what the call as
// (an eth_getLogs) costs less what c's own method costs, which its exchange was charged:
// nothing when that is not more. It is the filters stage's charge of eth_getFilterLogs and
// of a logs filter's poll, priced by eth_getLogs's range code and charged to the same
// budgets and quotas as the exchange. Its refusal, -32005 like the exchange's (HTTP 429),
// answers c alone: a batch's other calls stand. A single call's RateLimit-* headers then
// report this charge. Calls with the stage off (not in the chain): never made.
func (s *Stage) ChargeAs(c *proxy.Call, as *jsonrpc.Request) error {
	w := s.payer(c)
	cost, paid := s.cost(w.entry.costs, as, c.ChainID), s.cost(w.entry.costs, &c.Request, c.ChainID)
	if cost <= paid {
		return nil
	}
	l, err := s.spend(time.Now(), w, cost-paid, "the block range of the call costs")
	// The calls of a batch run at once and share the exchange: only a single call's answer
	// reports its budget after this charge.
	if !c.Exchange.Batch {
		c.Exchange.Limit = l
	}
	return err
}

// payer is who pays for a call: its client id's budget (the principal's client id, else the
// exchange's), cost table and metrics, and its principal's budget (none: nil).
type payer struct {
	clientID, principal string
	entry               *clientEntry
	princ               *limits
}

func (s *Stage) payer(c *proxy.Call) payer {
	e, p := c.Exchange, c.Principal
	w := payer{clientID: e.ClientID}
	if p != nil {
		if p.ClientID != "" {
			w.clientID = p.ClientID
		}
		w.principal = p.ID
	}
	if w.entry = s.clients[w.clientID]; w.entry == nil {
		w.entry = &s.defClient
	}
	if w.principal != "" {
		if w.princ = s.principals[w.principal]; w.princ == nil {
			w.princ = &s.defPrinc
		}
	}
	return w
}

// spend charges cost units at now (zero: the time of the call) to w's budgets, both or
// neither, then to its client's quotas, and counts them; it returns what the answer reports
// of the budget, and the refusal, if any, whose message says what costs them.
func (s *Stage) spend(now time.Time, w payer, cost uint64, what string) (proxy.LimitInfo, error) {
	// The exchange's start is the time the request came (fasthttp read the clock for it
	// already): one clock read less per request.
	if now.IsZero() {
		now = time.Now()
	}
	m := w.entry.m
	v := s.charge(now, s.rpcClients, w.clientID, &w.entry.limits, s.rpcPrincipals, w.principal, w.princ, cost, "c:", "p:")
	l := limitInfo(&v)
	if !v.ok {
		m.limited.Inc()
		return l, jsonrpc.ErrLimitExceeded.Withf("limit exceeded: %s %d compute units, more than its budget has left (%d of %d); retry after %d s",
			what, cost, v.remaining, v.limit, l.RetryAfter)
	}
	if s.quotas != nil && w.clientID != "" && cost > 0 {
		if err := s.quotas.Charge(w.clientID, cost); err != nil {
			m.quota.Inc()
			var ra interface{ RetryAfter() time.Duration }
			if errors.As(err, &ra) {
				l.RetryAfter = seconds(ra.RetryAfter())
			}
			if l.RetryAfter == 0 {
				l.RetryAfter = 1
			}
			return l, jsonrpc.ErrLimitExceeded.With(err.Error())
		}
	}
	m.units.Add(float64(cost))
	return l, nil
}

// charge charges cost at now to key k1 of budget l1 (table t1) and, when k2 is not empty, to
// key k2 of l2 (t2): on Redis when it is configured and answers, else locally with this replica's
// share. p1 and p2 prefix the keys in Redis.
func (s *Stage) charge(now time.Time, t1 *table[string], k1 string, l1 *limits, t2 *table[string], k2 string, l2 *limits, cost uint64, p1, p2 string) verdict {
	if s.redis != nil {
		if s.redis.Up() {
			keys := []string{s.prefix + p1 + k1}
			bs := []*budget{&l1.shared}
			if k2 != "" {
				keys = append(keys, s.prefix+p2+k2)
				bs = append(bs, &l2.shared)
			}
			if v, ok := s.shared(keys, bs, cost); ok {
				return v
			}
		}
		s.fellBack()
	}
	c1 := charge[string]{t: t1, key: k1, b: &l1.local, cost: cost}
	var c2 charge[string]
	if k2 != "" {
		c2 = charge[string]{t: t2, key: k2, b: &l2.local, cost: cost}
	}
	return take(now.UnixNano(), c1, c2)
}

// fellBack counts a charge decided locally while Redis is configured, and logs it at most
// once a minute.
func (s *Stage) fellBack() {
	s.m.fallback.Inc()
	now := time.Now().UnixNano()
	last := s.lastLog.Load()
	if now-last < int64(s.logEvery) || !s.lastLog.CompareAndSwap(last, now) {
		s.notLogged.Add(1)
		return
	}
	s.log.Warn("rate limits decided by this replica alone (Redis down or slow): each budget divided by rateLimit.replicas",
		zap.Int("replicas", s.cfg.Replicas), zap.Int64("not_logged", s.notLogged.Swap(0)))
}

// limitInfo is v as the exchange reports it.
func limitInfo(v *verdict) proxy.LimitInfo {
	l := proxy.LimitInfo{
		Limit:     uint32(min(v.limit, 1<<32-1)),
		Remaining: uint32(min(v.remaining, 1<<32-1)),
		Reset:     seconds(v.reset),
	}
	if !v.ok {
		l.RetryAfter = max(seconds(v.retryAfter), 1)
	}
	return l
}

// seconds is d in whole seconds, rounded up.
func seconds(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	return uint32(min((d+time.Second-1)/time.Second, 1<<32-1))
}

// REST wraps a REST route's handler: each request costs one unit of its client id's REST
// budget (a known client id in X-API-Key or apiKey) or else of its source address's
// (server.trustedProxies). Off (rest.enabled false): h itself.
func (s *Stage) REST(h proxy.RESTHandler) proxy.RESTHandler {
	if s == nil || !s.cfg.REST.Enabled {
		return h
	}
	return &restLimited{s: s, h: h}
}

type restLimited struct {
	s *Stage
	h proxy.RESTHandler
}

func (rl *restLimited) ServeREST(r *proxy.RESTRequest) (*proxy.RESTResponse, error) {
	s := rl.s
	id := r.Header("X-API-Key")
	if id == "" {
		id, _ = r.Query(proxy.QueryClientID)
	}
	var v verdict
	var m *clientMetrics
	if id != "" && s.known != nil && s.known(id) {
		m = s.m.client(id)
		v = s.charge(time.Now(), s.restClients, id, &s.restClient, nil, "", nil, 1, "rc:", "")
	} else {
		m = s.m.anonymous
		v = s.chargeIP(r.SourceIP())
	}
	info := limitInfo(&v)
	r.SetLimit(info)
	if !v.ok {
		m.limited.Inc()
		return nil, proxy.Errorf(429, "limit exceeded: too many requests; retry after %d s", info.RetryAfter)
	}
	m.allowed.Inc()
	m.units.Inc()
	return rl.h.ServeREST(r)
}

// chargeIP charges a request from ip to its REST budget.
func (s *Stage) chargeIP(ip netip.Addr) verdict {
	now := time.Now()
	if s.redis != nil {
		if s.redis.Up() {
			if v, ok := s.shared([]string{s.prefix + "ip:" + ip.String()}, []*budget{&s.restIP.shared}, 1); ok {
				return v
			}
		}
		s.fellBack()
	}
	return take(now.UnixNano(), charge[netip.Addr]{t: s.restIPs, key: ip, b: &s.restIP.local, cost: 1}, charge[string]{})
}
