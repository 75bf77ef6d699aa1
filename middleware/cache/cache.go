// Package cache is the response-cache stage: an allow-list of the reads dApps repeat, each
// with its policy (policy.go), keyed by chain, method and canonical params (canon.go), kept
// in ristretto and aware of finality: answers that can no longer change (at a finalized
// block, by hash) are kept until evicted, answers true at the current head only are keyed by
// the head's number and hash. Plus coalescing of identical read calls in flight at once.
// With Redis configured, Redis is the second level that the replicas share (shared.go).
package cache

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/tidwall/gjson"
	"golang.org/x/sync/singleflight"

	"github.com/web3gate/web3gate/internal/defaults"
	"github.com/web3gate/web3gate/internal/lazycache"
	"github.com/web3gate/web3gate/internal/redisx"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Config is the `cache:` section.
type Config struct {
	Enabled bool `yaml:"enabled"`
	// Local keeps answers in process (ristretto, MaxBytes). false: no in-process level, every
	// lookup asks Redis (redis.url must be set).
	Local          bool          `yaml:"local"`
	MaxBytes       int64         `yaml:"maxBytes"`
	FinalityDepth  uint64        `yaml:"finalityDepth"`
	UnfinalizedTTL time.Duration `yaml:"unfinalizedTtl"`
	Coalesce       bool          `yaml:"coalesce"`
	// MaxEntryBytes: a larger answer is cached at neither level. Default 4 MiB.
	MaxEntryBytes int64 `yaml:"maxEntryBytes"`
}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	defaults.Set(&c.MaxBytes, 64<<20)
	defaults.Set(&c.FinalityDepth, 12)
	defaults.Set(&c.UnfinalizedTTL, 2*time.Second)
	defaults.Set(&c.MaxEntryBytes, 4<<20)
}

// Validate checks c; each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxBytes < 1<<20 {
		errs = append(errs, errors.New("maxBytes: must be at least 1048576 (1 MiB)"))
	}
	if c.MaxEntryBytes < 1<<10 || c.MaxEntryBytes > c.MaxBytes {
		errs = append(errs, errors.New("maxEntryBytes: must be from 1024 to maxBytes"))
	}
	if c.UnfinalizedTTL < 0 {
		errs = append(errs, errors.New("unfinalizedTtl: must not be negative"))
	}
	return errors.Join(errs...)
}

// Deps are the stage's collaborators.
type Deps struct {
	Registry prometheus.Registerer
	// Head returns the best known head block of a chain, for finality decisions when
	// Finality is nil.
	Head func(chainID uint64) uint64
	// Finality returns a chain's head identity and finalized block (see Finality). nil: the
	// head from Head, FinalityDepth below it final, no head hash (a reorg at the same height
	// is not seen).
	Finality func(chainID uint64) Finality
	// Redis is the second level shared by the replicas; nil: none.
	Redis *redisx.Client
	// Shared reports whether a chain's answers go to Redis: false for a chain only this
	// process serves (the embedded dev chain). nil: every chain.
	Shared func(chainID uint64) bool
}

// Finality is what the stage knows of a chain at one call: its head block's number and hash
// and its highest final block. Known false: nothing is cached by block number or tag.
type Finality struct {
	Known     bool
	Head      uint64
	HeadHash  string
	Finalized uint64
}

// scope is the lifetime class of an entry.
type scope uint8

const (
	scopeNone  scope = iota // not cached
	scopeFinal              // immutable: kept until evicted (in Redis for redis.maxTtl)
	scopeHead               // true at the current head only: keyed by the head's number and hash, at most unfinalizedTtl
	// scopeResult: decided by the result (a transaction or receipt by hash: final once its
	// block is): looked up as final, then as head.
	scopeResult
)

// plan is what a cached call's params mean for the cache: their canonical form and the
// scope they allow, with what keep needs of them.
type plan struct {
	// key is "<chain>:<method>:<canonical params>", canon its params part.
	key, canon []byte
	scope      scope
	// skip is why the call is not cached (scope none): the reason label of skips_total.
	skip string
	// eth_getLogs: the range's end, and whether the filter names a block hash.
	to        blockRef
	blockHash bool
	args      args // the params as read
}

// policy is a cached method's rule. plan reads the params (at most max of them), appends
// their canonical form to b and sets the scope (errCanon: not cached); keep decides from a
// non-error result under which scope it is stored (scopeNone: not stored).
type policy struct {
	plan func(a *args, f Finality, pl *plan, b []byte) ([]byte, error)
	keep func(f Finality, pl *plan, result []byte) scope
	max  int
}

// policies is the allow-list: only these methods are ever cached (policy.go has the rule of
// each; docs/json-rpc.md a table). eth_chainId and net_version never reach the stage: the route
// stage answers them.
var policies = map[string]policy{
	"eth_getBlockByHash":        {planBlockByHash, keepNonNull, 2},
	"eth_getBlockByNumber":      {planBlockByNumber, keepNonNull, 2},
	"eth_getBlockReceipts":      {planBlockReceipts, keepNonNull, 1},
	"eth_getTransactionByHash":  {planTxByHash, keepMined, 1},
	"eth_getTransactionReceipt": {planTxByHash, keepMined, 1},
	"eth_getLogs":               {planLogs, keepLogs, 1},
	"eth_getBalance":            {planAccount, keepAny, 2},
	"eth_getCode":               {planAccount, keepAny, 2},
	"eth_getTransactionCount":   {planAccount, keepAny, 2},
	"eth_getStorageAt":          {planStorage, keepAny, 3},
	"eth_getProof":              {planProof, keepAny, 3},
	"eth_call":                  {planCall, keepAny, 4},
}

// Stage is the cache stage.
type Stage struct {
	cfg      Config
	finality func(uint64) Finality
	cache    *lazycache.Cache[string, []byte] // nil: no local level; built at the first store
	redis    *redisx.Client                   // nil: no shared level
	shared   func(uint64) bool
	flight   singleflight.Group
	// seen is the highest block number per chain (*atomic.Uint64) that an answer passing
	// through the stage showed (a receipt's block, a block, eth_blockNumber): while it is
	// above the finality poll's head, head answers are neither served nor stored, so a client
	// that saw block N through web3gate never gets an answer of an older head afterwards.
	seen sync.Map

	lookups      *prometheus.CounterVec
	counters     map[string]*methodCounters // per cached method, made at New
	redisLookups *prometheus.CounterVec
	stores       *prometheus.CounterVec
	skips        *prometheus.CounterVec
	coalesces    prometheus.Counter
}

var _ proxy.Stage = (*Stage)(nil)

// New builds the stage. With caching disabled it still coalesces when configured to.
func New(cfg Config, deps Deps) (*Stage, error) {
	if deps.Registry == nil || (deps.Head == nil && deps.Finality == nil) {
		return nil, errors.New("cache: registry and head or finality are required")
	}
	s := &Stage{cfg: cfg, finality: deps.Finality, shared: deps.Shared}
	if s.finality == nil {
		head, depth := deps.Head, cfg.FinalityDepth
		s.finality = func(chain uint64) Finality {
			h := head(chain)
			f := Finality{Known: h > 0, Head: h}
			if h > depth {
				f.Finalized = h - depth
			}
			return f
		}
	}
	if cfg.Enabled {
		s.redis = deps.Redis
	}
	if s.shared == nil {
		s.shared = func(uint64) bool { return true }
	}
	if cfg.Enabled && cfg.Local {
		c, err := lazycache.New(&ristretto.Config[string, []byte]{
			NumCounters: max(cfg.MaxBytes/100, 1000), // ~10x the entries expected at ~1 KiB each
			MaxCost:     cfg.MaxBytes,
			BufferItems: 64,
		})
		if err != nil {
			return nil, err
		}
		s.cache = c
	}
	f := promauto.With(deps.Registry)
	s.lookups = f.NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_cache_lookups_total",
		Help: "Response cache lookups of cacheable calls, by method and result (hit or miss).",
	}, []string{"method", "result"})
	s.counters = make(map[string]*methodCounters, len(policies))
	for m := range policies {
		l := jsonrpc.MethodLabel(m)
		s.counters[m] = &methodCounters{label: l, hit: s.lookups.WithLabelValues(l, "hit"), miss: s.lookups.WithLabelValues(l, "miss")}
	}
	s.redisLookups = f.NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_cache_redis_lookups_total",
		Help: "Response cache lookups in Redis (after a local miss), by method and result: hit, miss, error (failed or timed out), skipped (Redis marked down), invalid (not an entry of this version).",
	}, []string{"method", "result"})
	s.stores = f.NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_cache_stores_total",
		Help: "Answers stored in the response cache, by method and class: final (kept until evicted) or head (valid at the current head only).",
	}, []string{"method", "class"})
	s.skips = f.NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_cache_skips_total",
		Help: "Calls of cached methods that the cache did not look up, by method and reason: params (not read: unknown fields, overrides, malformed), pending (the pending block), unknown_head (the chain's head is not known yet).",
	}, []string{"method", "reason"})
	s.coalesces = f.NewCounter(prometheus.CounterOpts{
		Name: "web3gate_cache_coalesced_total",
		Help: "Calls answered by sharing an identical upstream request already in flight.",
	})
	return s, nil
}

// Close releases the cache.
func (s *Stage) Close() {
	if s.cache != nil {
		s.cache.Close()
	}
}

// Wait blocks until buffered cache writes are applied (ristretto applies them
// asynchronously, Redis fills are sent in the background).
func (s *Stage) Wait() {
	if s.cache != nil {
		s.cache.Wait()
	}
	s.redis.WaitWrites()
}

// ForgetChain removes chainID's answers from Redis: it is called at start for a chain that
// started over (a new genesis), whose answers by hash may no longer hold. The local level
// starts empty.
func (s *Stage) ForgetChain(ctx context.Context, chainID uint64) (int, error) {
	if s.redis == nil || !s.shared(chainID) {
		return 0, nil
	}
	return s.redis.DeleteMatching(ctx, s.redis.KeyPrefix()+"rc:"+strconv.FormatUint(chainID, 10)+":*")
}

// Serve implements proxy.Stage.
func (s *Stage) Serve(c *proxy.Call, next proxy.Handler) (*proxy.Response, error) {
	m := c.Method()
	pol, cacheable := policies[m]
	coalesce := s.cfg.Coalesce && jsonrpc.PureRead(m)
	cacheable = cacheable && s.cfg.Enabled
	if !cacheable && !coalesce {
		resp, err := next.Serve(c)
		if err == nil && resp != nil && s.cfg.Enabled && observed[m] {
			s.observe(c.ChainID, m, resp.Result)
		}
		return resp, err
	}
	if !cacheable {
		return s.miss(c, next, &lookup{coalesce: true})
	}
	// A hit allocates nothing but its response: the plan and the keys are built in a pooled
	// scratch, the keys looked up locally without a copy. Only a miss copies them out.
	ctr := s.counters[m]
	fin := s.finality(c.ChainID)
	sc := scratches.Get().(*scratch)
	defer sc.release()
	pl := &sc.pl
	sc.buf = s.plan(c, pol, fin, pl, sc.buf[:0])
	behind := fin.Known && pl.scope != scopeFinal && s.ahead(c.ChainID, fin.Head)
	if behind && pl.scope == scopeHead {
		// A client saw a block above the poll's head: no head answer until the poll catches up.
		pl.scope, pl.skip = scopeNone, "head_behind"
	}
	var final, hd []byte // the entry's keys as final and as head (nil: not looked up)
	if pl.scope == scopeNone {
		s.skips.WithLabelValues(ctr.label, pl.skip).Inc()
	} else {
		final, hd = s.keys(pl, fin)
		if behind {
			hd = nil
		}
		if s.cache != nil {
			for _, k := range [2][]byte{final, hd} {
				if k == nil {
					continue
				}
				if v, ok := s.cache.Get(unsafe.String(unsafe.SliceData(k), len(k))); ok {
					ctr.hit.Inc()
					return &proxy.Response{Result: v}, nil
				}
			}
			ctr.miss.Inc()
		}
	}
	l := &lookup{coalesce: coalesce, pol: pol, fin: fin, label: ctr.label,
		scope: pl.scope, to: pl.to, blockHash: pl.blockHash}
	if final != nil {
		l.final = string(final)
	}
	if hd != nil {
		l.hd = string(hd)
	}
	return s.miss(c, next, l)
}

// lookup is what a call that missed the local level needs of its plan: its own copy, the
// scratch going back to the pool.
type lookup struct {
	coalesce  bool
	pol       policy
	fin       Finality
	label     string
	final, hd string // the entry's keys as final and as head (empty: not looked up)
	scope     scope
	to        blockRef
	blockHash bool
}

// miss answers a call the local level did not: from Redis or the upstream, filling both
// levels.
func (s *Stage) miss(c *proxy.Call, next proxy.Handler, l *lookup) (*proxy.Response, error) {
	m := c.Method()
	shared := l.scope != scopeNone && s.redis != nil && s.shared(c.ChainID)
	// serve asks Redis, then the upstream, and fills both levels. Identical calls in flight
	// share one run of it (one Redis lookup, one upstream request).
	serve := func() (*proxy.Response, error) {
		if shared {
			for _, k := range [2]string{l.final, l.hd} {
				if k == "" {
					continue
				}
				if v, ttl, ok := s.sharedGet(k, c.ChainID, m, l.label); ok {
					s.fillLocal(k, v, ttl)
					return &proxy.Response{Result: v}, nil
				}
			}
		}
		resp, err := next.Serve(c)
		if err == nil && resp != nil && observed[m] {
			s.observe(c.ChainID, m, resp.Result)
		}
		if err != nil || resp == nil || l.scope == scopeNone || int64(len(resp.Result)) > s.cfg.MaxEntryBytes {
			return resp, err
		}
		pl := plan{scope: l.scope, to: l.to, blockHash: l.blockHash}
		sc := l.pol.keep(l.fin, &pl, resp.Result)
		if l.scope == scopeHead && sc == scopeFinal {
			sc = scopeHead // keep narrows a plan's scope, never widens it
		}
		var (
			key string
			ttl time.Duration
		)
		switch sc {
		case scopeFinal:
			key = l.final
		case scopeHead:
			key, ttl = l.hd, s.cfg.UnfinalizedTTL
			if ttl <= 0 || key == "" {
				return resp, nil
			}
		default:
			return resp, nil
		}
		if key == "" {
			return resp, nil
		}
		s.stores.WithLabelValues(l.label, scopeNames[sc]).Inc()
		s.fillLocal(key, resp.Result, ttl)
		if shared {
			s.sharedSet(key, c.ChainID, m, resp.Result, ttl)
		}
		return resp, nil
	}
	if !l.coalesce {
		return serve()
	}
	// Coalesced by the params as sent, not their canonical form: a call must not get the error
	// that another spelling of it got (a node may refuse 0x01 for 0x1).
	v, err, dup := s.flight.Do(cacheKey(c), func() (any, error) { return serve() })
	if dup {
		s.coalesces.Inc()
	}
	resp, _ := v.(*proxy.Response)
	return resp, err
}

// observed are the methods whose answers tell a block number the client now knows of.
var observed = map[string]bool{
	"eth_blockNumber": true, "eth_getBlockByNumber": true, "eth_getBlockByHash": true,
	"eth_getTransactionReceipt": true, "eth_getTransactionByHash": true,
}

// observe records the block number an answer of method shows (see Stage.seen).
func (s *Stage) observe(chain uint64, method string, result []byte) {
	var raw []byte
	switch method {
	case "eth_blockNumber":
		raw = result
	case "eth_getBlockByNumber", "eth_getBlockByHash":
		raw = []byte(gjson.GetBytes(result, "number").Raw)
	default:
		raw = []byte(gjson.GetBytes(result, "blockNumber").Raw)
	}
	r, err := readBlockNumber(raw, "")
	if err != nil || r.kind != refNumber {
		return
	}
	v, _ := s.seen.Load(chain)
	n, _ := v.(*atomic.Uint64)
	if n == nil {
		v, _ = s.seen.LoadOrStore(chain, new(atomic.Uint64))
		n = v.(*atomic.Uint64)
	}
	for old := n.Load(); r.num > old && !n.CompareAndSwap(old, r.num); old = n.Load() {
	}
}

// ahead reports whether an answer showed chain's clients a block above head.
func (s *Stage) ahead(chain, head uint64) bool {
	v, ok := s.seen.Load(chain)
	return ok && v.(*atomic.Uint64).Load() > head
}

// scopeNames are the class label values of stores_total.
var scopeNames = [...]string{scopeNone: "none", scopeFinal: "final", scopeHead: "head", scopeResult: "result"}

// methodCounters are a cached method's label and lookup counters.
type methodCounters struct {
	label     string
	hit, miss prometheus.Counter
}

// scratch is a cacheable call's plan and key buffer, pooled.
type scratch struct {
	pl  plan
	buf []byte
}

var scratches = sync.Pool{New: func() any { return &scratch{buf: make([]byte, 0, 512)} }}

// release puts sc back into the pool, without what it points to; a buffer that grew past
// 64 KiB (a large eth_getLogs filter) is not kept.
func (sc *scratch) release() {
	sc.pl = plan{}
	if cap(sc.buf) > 64<<10 {
		sc.buf = make([]byte, 0, 512)
	}
	scratches.Put(sc)
}

// plan reads c's params with pol into pl: the key "<chain>:<method>:<canonical params>"
// appended to b, and the scope; or scope none and the reason. It returns b extended.
func (s *Stage) plan(c *proxy.Call, pol policy, f Finality, pl *plan, b []byte) []byte {
	b = strconv.AppendUint(b, c.ChainID, 10)
	b = append(b, ':')
	b = append(b, c.Request.Method...)
	b = append(b, ':')
	n := len(b)
	err := readArgs(c.Request.Params, pol.max, &pl.args)
	if err == nil {
		b, err = pol.plan(&pl.args, f, pl, b)
	}
	pl.key, pl.canon = b, b[n:]
	switch {
	case err != nil:
		pl.scope, pl.skip = scopeNone, "params"
	case pl.scope == scopeNone:
		pl.skip = "pending"
	case pl.scope == scopeHead && !f.Known:
		pl.scope, pl.skip = scopeNone, "unknown_head"
	}
	return b
}

// keys are the entry's local keys: pl.key as final, and that with "@<head number>:<head
// hash>" as head, appended to pl.key (so sharing its array). A key the plan's scope never
// uses is nil.
func (s *Stage) keys(pl *plan, f Finality) (final, head []byte) {
	b := pl.key
	n := len(b)
	if f.Known {
		b = append(b, '@')
		b = strconv.AppendUint(b, f.Head, 10)
		b = append(b, ':')
		b = append(b, f.HeadHash...)
	}
	if pl.scope == scopeFinal || pl.scope == scopeResult {
		final = b[:n]
	}
	if (pl.scope == scopeHead || pl.scope == scopeResult) && f.Known {
		head = b
	}
	return final, head
}

// fillLocal keeps result under key in the local level for ttl (0: until evicted), and
// returns once the entry can be read: ristretto applies its writes in a goroutine of its
// own, and without the wait a client repeating a call as soon as it has the answer would
// send it upstream again. The wait is a round trip to that goroutine, on a miss only (an
// upstream call's own cost is hundreds of times more).
func (s *Stage) fillLocal(key string, result []byte, ttl time.Duration) {
	if s.cache != nil && s.cache.SetWithTTL(key, result, int64(len(key)+len(result)), ttl) {
		s.cache.Wait()
	}
}

// cacheKey is chain, method and the raw params: identical calls, whatever their ids (the
// coalescing key of calls that are not cached).
func cacheKey(c *proxy.Call) string {
	b := make([]byte, 0, 24+len(c.Request.Method)+len(c.Request.Params))
	b = strconv.AppendUint(b, c.ChainID, 10)
	b = append(b, ' ')
	b = append(b, c.Request.Method...)
	b = append(b, ' ')
	b = append(b, c.Request.Params...)
	return string(b)
}

func isNull(r []byte) bool { return len(r) == 0 || string(r) == "null" }
