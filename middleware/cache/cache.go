// Package cache is the response-cache stage: an allow-list of methods whose answers are
// immutable once they exist (by-hash lookups), kept in ristretto and aware of finality, plus
// coalescing of identical read calls in flight at once. With Redis configured, Redis is the
// second level that the replicas share (shared.go).
package cache

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/tidwall/gjson"
	"golang.org/x/sync/singleflight"

	"github.com/web3gate/web3gate/internal/defaults"
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
	// Head returns the best known head block of a chain, for finality decisions.
	Head func(chainID uint64) uint64
	// Redis is the second level shared by the replicas; nil: none.
	Redis *redisx.Client
	// Shared reports whether a chain's answers go to Redis: false for a chain only this
	// process serves (the embedded dev chain). nil: every chain.
	Shared func(chainID uint64) bool
}

// policy decides, from a non-error result, whether to cache it and for how long
// (0 = until evicted).
type policy func(s *Stage, chainID uint64, result []byte) (ok bool, ttl time.Duration)

// policies is the allow-list: only these methods are ever cached.
var policies = map[string]policy{
	// A block's content never changes under its hash.
	"eth_getBlockByHash": func(_ *Stage, _ uint64, r []byte) (bool, time.Duration) { return !isNull(r), 0 },
	// A transaction is cacheable once mined; until final, a reorg could move it.
	"eth_getTransactionByHash": func(s *Stage, chain uint64, r []byte) (bool, time.Duration) {
		return s.minedTTL(chain, r)
	},
	"eth_getTransactionReceipt": func(s *Stage, chain uint64, r []byte) (bool, time.Duration) {
		return s.minedTTL(chain, r)
	},
}

// coalesced are the pure reads whose identical calls in flight share one upstream request.
var coalesced = map[string]bool{
	"eth_blockNumber": true, "eth_call": true, "eth_estimateGas": true, "eth_feeHistory": true,
	"eth_gasPrice": true, "eth_getBalance": true, "eth_getBlockByHash": true,
	"eth_getBlockByNumber": true, "eth_getBlockReceipts": true, "eth_getCode": true,
	"eth_getLogs": true, "eth_getProof": true, "eth_getStorageAt": true,
	"eth_getTransactionByHash": true, "eth_getTransactionCount": true,
	"eth_getTransactionReceipt": true, "eth_maxPriorityFeePerGas": true, "eth_syncing": true,
	"eth_blobBaseFee": true, "net_peerCount": true, "net_listening": true,
	"eth_getBlockTransactionCountByHash": true, "eth_getBlockTransactionCountByNumber": true,
	"eth_getTransactionByBlockHashAndIndex": true, "eth_getTransactionByBlockNumberAndIndex": true,
	"eth_createAccessList": true,
}

// Stage is the cache stage.
type Stage struct {
	cfg    Config
	head   func(uint64) uint64
	cache  *ristretto.Cache[string, []byte] // nil: no local level
	redis  *redisx.Client                   // nil: no shared level
	shared func(uint64) bool
	flight singleflight.Group

	lookups      *prometheus.CounterVec
	redisLookups *prometheus.CounterVec
	coalesces    prometheus.Counter
}

var _ proxy.Stage = (*Stage)(nil)

// New builds the stage. With caching disabled it still coalesces when configured to.
func New(cfg Config, deps Deps) (*Stage, error) {
	if deps.Registry == nil || deps.Head == nil {
		return nil, errors.New("cache: registry and head are required")
	}
	s := &Stage{cfg: cfg, head: deps.Head, shared: deps.Shared}
	if cfg.Enabled {
		s.redis = deps.Redis
	}
	if s.shared == nil {
		s.shared = func(uint64) bool { return true }
	}
	if cfg.Enabled && cfg.Local {
		c, err := ristretto.NewCache(&ristretto.Config[string, []byte]{
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
		Help: "Response cache lookups of cacheable methods, by method and result (hit or miss).",
	}, []string{"method", "result"})
	s.redisLookups = f.NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_cache_redis_lookups_total",
		Help: "Response cache lookups in Redis (after a local miss), by method and result: hit, miss, error (failed or timed out), skipped (Redis marked down), invalid (not an entry of this version).",
	}, []string{"method", "result"})
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
	pol := policies[m]
	if pol == nil && (!s.cfg.Coalesce || !coalesced[m]) {
		return next.Serve(c)
	}
	key := cacheKey(c)
	label := jsonrpc.MethodLabel(m)
	if pol != nil && s.cache != nil {
		if v, ok := s.cache.Get(key); ok {
			s.lookups.WithLabelValues(label, "hit").Inc()
			return &proxy.Response{Result: v}, nil
		}
		s.lookups.WithLabelValues(label, "miss").Inc()
	}
	if pol == nil || !s.cfg.Enabled {
		pol = nil // coalesced only
	}
	shared := pol != nil && s.redis != nil && s.shared(c.ChainID)
	// serve asks Redis, then the upstream, and fills both levels. Identical calls in flight
	// share one run of it (one Redis lookup, one upstream request).
	serve := func() (*proxy.Response, error) {
		if shared {
			if v, ttl, ok := s.sharedGet(c, label); ok {
				s.fillLocal(key, v, ttl)
				return &proxy.Response{Result: v}, nil
			}
		}
		resp, err := next.Serve(c)
		if err != nil || resp == nil || pol == nil || int64(len(resp.Result)) > s.cfg.MaxEntryBytes {
			return resp, err
		}
		if ok, ttl := pol(s, c.ChainID, resp.Result); ok {
			s.fillLocal(key, resp.Result, ttl)
			if shared {
				s.sharedSet(c, resp.Result, ttl)
			}
		}
		return resp, nil
	}
	if !s.cfg.Coalesce || !coalesced[m] {
		return serve()
	}
	v, err, dup := s.flight.Do(key, func() (any, error) { return serve() })
	if dup {
		s.coalesces.Inc()
	}
	resp, _ := v.(*proxy.Response)
	return resp, err
}

// fillLocal keeps result under key in the local level for ttl (0: until evicted).
func (s *Stage) fillLocal(key string, result []byte, ttl time.Duration) {
	if s.cache != nil {
		s.cache.SetWithTTL(key, result, int64(len(key)+len(result)), ttl)
	}
}

// minedTTL caches a transaction or receipt once it has a block: forever when the block is
// at least FinalityDepth below the head, else for UnfinalizedTTL.
func (s *Stage) minedTTL(chain uint64, r []byte) (bool, time.Duration) {
	if isNull(r) {
		return false, 0
	}
	res := gjson.ParseBytes(r)
	if res.Get("blockHash").Type != gjson.String {
		return false, 0
	}
	n, err := strconv.ParseUint(trimHex(res.Get("blockNumber").Str), 16, 64)
	if err != nil {
		return false, 0
	}
	if head := s.head(chain); head >= n+s.cfg.FinalityDepth {
		return true, 0
	}
	if s.cfg.UnfinalizedTTL <= 0 {
		return false, 0
	}
	return true, s.cfg.UnfinalizedTTL
}

// cacheKey is chain, method and the raw params: identical calls, whatever their ids.
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

func trimHex(s string) string {
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		return s[2:]
	}
	return "-"
}
