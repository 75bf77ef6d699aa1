package upstreams

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
)

// EmbeddedURL is the node URL that stands for the in-process JSON-RPC handler of a chain
// (Deps.Embedded), i.e. the embedded dev chain.
const EmbeddedURL = "embedded"

// MaxNodesPerChain is the largest number of urls one chain may list.
const MaxNodesPerChain = 64

// Config is the `upstreams:` section.
type Config struct {
	// Mainnet is the chain id that /v1/web3/mainnet serves. 0 means the first chain.
	Mainnet uint64 `yaml:"mainnet"`
	// Timeout bounds one upstream attempt.
	Timeout time.Duration `yaml:"timeout"`
	// MaxAttempts bounds the attempts of one read across the pool (failover and retry).
	MaxAttempts int `yaml:"maxAttempts"`
	// PollInterval is how often each node's head (eth_blockNumber) is polled.
	PollInterval time.Duration `yaml:"pollInterval"`
	// MaxLag: a node more than this many blocks behind the best head is skipped for reads
	// while other nodes are in range. A pointer, so that an explicit 0 (only nodes at the
	// best head) is told apart from an unset key (DefaultMaxLag).
	MaxLag *uint64 `yaml:"maxLag"`
	// EjectAfter consecutive failures eject a node for Cooldown.
	EjectAfter int           `yaml:"ejectAfter"`
	Cooldown   time.Duration `yaml:"cooldown"`
	// MaxResponseBytes is the largest upstream response body accepted.
	MaxResponseBytes int `yaml:"maxResponseBytes"`
	// Batch is upstream batching: the calls to one node beyond its in-flight limit go
	// together as JSON-RPC batches (see coalescer).
	Batch BatchConfig `yaml:"batch"`
	// Hedge is hedged reads: a pure read still unanswered after the chosen node's recent
	// latency is also sent to the next node (see hedge.go).
	Hedge HedgeConfig `yaml:"hedge"`
	// GetLogs is the splitting of eth_getLogs over large block ranges (see getlogs.go).
	GetLogs GetLogsConfig `yaml:"getLogs"`
	Chains  []ChainConfig `yaml:"chains"`
}

// HedgeConfig is `upstreams.hedge`.
type HedgeConfig struct {
	// Enabled turns hedged reads on (default true). A pool with one node never hedges.
	Enabled bool `yaml:"enabled"`
	// Quantile of the chosen node's recent answer latencies after which the read is hedged.
	Quantile float64 `yaml:"quantile"`
	// MinDelay and MaxDelay bound that delay; MaxDelay is also the delay of a node with too
	// few recent answers to estimate it.
	MinDelay time.Duration `yaml:"minDelay"`
	MaxDelay time.Duration `yaml:"maxDelay"`
	// MaxExtra is the largest share of reads that may be hedged (0.1: one hedge per ten
	// reads at most).
	MaxExtra float64 `yaml:"maxExtra"`
}

// GetLogsConfig is `upstreams.getLogs`.
type GetLogsConfig struct {
	// MaxRange is the largest block range of one eth_getLogs call; a larger one is refused.
	MaxRange uint64 `yaml:"maxRange"`
	// ChunkSize is the block range of one upstream call when a range is split; a node that
	// refuses a range as larger than it serves gets chunks of half that size for a while.
	ChunkSize uint64 `yaml:"chunkSize"`
	// MinChunkSize bounds below the chunk size learned of a node (a chunk still refused at
	// this size is halved for that call only).
	MinChunkSize uint64 `yaml:"minChunkSize"`
	// RecoverEvery: a learned chunk size doubles back toward ChunkSize once per this long.
	RecoverEvery time.Duration `yaml:"recoverEvery"`
	// Concurrency is the number of chunks of one call in flight at once.
	Concurrency int `yaml:"concurrency"`
}

// BatchConfig is `upstreams.batch`.
type BatchConfig struct {
	// Enabled turns upstream batching on for http(s) nodes (default true).
	Enabled bool `yaml:"enabled"`
	// MaxInFlight is the number of exchanges in flight to one node before further calls
	// queue and leave together as one batch when an exchange ends.
	MaxInFlight int `yaml:"maxInFlight"`
	// MaxSize is the largest batch.
	MaxSize int `yaml:"maxSize"`
}

// ChainConfig is one element of `upstreams.chains`.
type ChainConfig struct {
	ChainID uint64 `yaml:"chainId"`
	// Name labels the chain in logs and metrics. Empty means the decimal chain id.
	Name string `yaml:"name"`
	// URLs are the chain's nodes: http(s) URLs, or "embedded" for the in-process handler.
	URLs []string `yaml:"urls"`
	// WSURLs are ws(s):// URLs of the chain's nodes (the same nodes as URLs or others), used
	// only by the chain's live feed (package feeds): it subscribes to the node's newHeads and
	// takes pushed heads instead of polling, and falls back to polling URLs when no socket is
	// up. Tried in order, the next on a failure. Empty: the feed polls.
	WSURLs []string `yaml:"wsUrls"`
	// Finality is how the chain's final block is known: auto (the `finalized` block tag while
	// the nodes answer it with a block, else FinalityDepth below the head), tag or depth.
	// Empty means auto.
	Finality string `yaml:"finality"`
	// FinalityDepth is the depth below the head that is final when the tag is not used;
	// 0 means the process-wide default (cache.finalityDepth).
	FinalityDepth uint64 `yaml:"finalityDepth"`
}

// The defaults of the section, as documented in config.yaml.
const (
	DefaultTimeout          = 10 * time.Second
	DefaultMaxAttempts      = 3
	DefaultPollInterval     = time.Second
	DefaultMaxLag           = 5
	DefaultEjectAfter       = 3
	DefaultCooldown         = 10 * time.Second
	DefaultMaxResponseBytes = 32 << 20
	DefaultBatchMaxInFlight = 4
	DefaultBatchMaxSize     = 50
	DefaultHedgeQuantile    = 0.9
	DefaultHedgeMinDelay    = 10 * time.Millisecond
	DefaultHedgeMaxDelay    = 2 * time.Second
	DefaultHedgeMaxExtra    = 0.1
	DefaultGetLogsMaxRange  = 100_000
	DefaultGetLogsChunkSize = 2000
	DefaultGetLogsConc      = 4
	DefaultGetLogsMinChunk  = 10
	DefaultGetLogsRecover   = time.Minute
)

// Bounds of upstreams.getLogs.
const (
	MaxGetLogsRange       = 100_000_000
	MaxGetLogsConcurrency = 64
)

// DefaultConfig returns the section with every default set and no chains. A loader that
// decodes YAML onto it keeps explicit false booleans, which SetDefaults cannot tell from
// unset keys.
func DefaultConfig() Config {
	var c Config
	c.Batch.Enabled = true
	c.Hedge.Enabled = true
	c.SetDefaults()
	return c
}

// SetDefaults fills unset (zero) fields with their defaults. An empty chain name becomes the
// decimal chain id; Mainnet 0 becomes the first chain's id. It adds no chains.
func (c *Config) SetDefaults() {
	defaults.Set(&c.Timeout, DefaultTimeout)
	defaults.Set(&c.MaxAttempts, DefaultMaxAttempts)
	defaults.Set(&c.PollInterval, DefaultPollInterval)
	if c.MaxLag == nil {
		c.MaxLag = new(uint64(DefaultMaxLag))
	}
	defaults.Set(&c.EjectAfter, DefaultEjectAfter)
	defaults.Set(&c.Cooldown, DefaultCooldown)
	defaults.Set(&c.MaxResponseBytes, DefaultMaxResponseBytes)
	defaults.Set(&c.Batch.MaxInFlight, DefaultBatchMaxInFlight)
	defaults.Set(&c.Batch.MaxSize, DefaultBatchMaxSize)
	defaults.Set(&c.Hedge.Quantile, DefaultHedgeQuantile)
	defaults.Set(&c.Hedge.MinDelay, DefaultHedgeMinDelay)
	defaults.Set(&c.Hedge.MaxDelay, DefaultHedgeMaxDelay)
	defaults.Set(&c.Hedge.MaxExtra, DefaultHedgeMaxExtra)
	defaults.Set(&c.GetLogs.MaxRange, DefaultGetLogsMaxRange)
	defaults.Set(&c.GetLogs.ChunkSize, DefaultGetLogsChunkSize)
	defaults.Set(&c.GetLogs.Concurrency, DefaultGetLogsConc)
	defaults.Set(&c.GetLogs.MinChunkSize, min(DefaultGetLogsMinChunk, c.GetLogs.ChunkSize))
	defaults.Set(&c.GetLogs.RecoverEvery, DefaultGetLogsRecover)
	for i := range c.Chains {
		if c.Chains[i].Name == "" && c.Chains[i].ChainID != 0 {
			c.Chains[i].Name = strconv.FormatUint(c.Chains[i].ChainID, 10)
		}
	}
	if c.Mainnet == 0 && len(c.Chains) > 0 {
		c.Mainnet = c.Chains[0].ChainID
	}
}

// Validate checks c (after SetDefaults). The errors are joined; each message starts with the
// key path relative to the section. Messages never repeat a URL, which may hold a secret.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"timeout", c.Timeout}, {"pollInterval", c.PollInterval}, {"cooldown", c.Cooldown}} {
		if d.v <= 0 {
			add("%s: must be a positive duration", d.key)
		}
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		add("maxAttempts: must be between 1 and 100")
	}
	if c.EjectAfter < 1 {
		add("ejectAfter: must be at least 1")
	}
	if c.MaxResponseBytes < 1024 {
		add("maxResponseBytes: must be at least 1024")
	}
	if c.Batch.MaxInFlight < 1 || c.Batch.MaxInFlight > maxConnsPerNode {
		add("batch.maxInFlight: must be between 1 and %d", maxConnsPerNode)
	}
	if c.Batch.MaxSize < 2 || c.Batch.MaxSize > 1000 {
		add("batch.maxSize: must be between 2 and 1000")
	}
	if !(c.Hedge.Quantile > 0 && c.Hedge.Quantile < 1) {
		add("hedge.quantile: must be between 0 and 1 (exclusive)")
	}
	if c.Hedge.MinDelay <= 0 {
		add("hedge.minDelay: must be a positive duration")
	}
	if c.Hedge.MaxDelay < c.Hedge.MinDelay {
		add("hedge.maxDelay: must not be below hedge.minDelay")
	}
	if !(c.Hedge.MaxExtra > 0 && c.Hedge.MaxExtra <= 1) {
		add("hedge.maxExtra: must be above 0 and at most 1")
	}
	if c.GetLogs.MaxRange < 1 || c.GetLogs.MaxRange > MaxGetLogsRange {
		add("getLogs.maxRange: must be between 1 and %d", MaxGetLogsRange)
	}
	if c.GetLogs.ChunkSize < 1 || c.GetLogs.ChunkSize > c.GetLogs.MaxRange {
		add("getLogs.chunkSize: must be between 1 and getLogs.maxRange")
	}
	if c.GetLogs.MinChunkSize < 1 || c.GetLogs.MinChunkSize > c.GetLogs.ChunkSize {
		add("getLogs.minChunkSize: must be between 1 and getLogs.chunkSize")
	}
	if c.GetLogs.RecoverEvery < time.Second || c.GetLogs.RecoverEvery > 24*time.Hour {
		add("getLogs.recoverEvery: must be between 1s and 24h")
	}
	if c.GetLogs.Concurrency < 1 || c.GetLogs.Concurrency > MaxGetLogsConcurrency {
		add("getLogs.concurrency: must be between 1 and %d", MaxGetLogsConcurrency)
	}

	if len(c.Chains) == 0 {
		add("chains: at least one chain is required")
	}
	byID := make(map[uint64]int, len(c.Chains))
	byName := make(map[string]int, len(c.Chains))
	for i, ch := range c.Chains {
		key := fmt.Sprintf("chains[%d]", i)
		switch j, dup := byID[ch.ChainID]; {
		case ch.ChainID == 0:
			add("%s.chainId: must be a positive integer", key)
		case dup:
			add("%s.chainId: duplicate of chains[%d]", key, j)
		default:
			byID[ch.ChainID] = i
		}
		switch j, dup := byName[ch.Name]; {
		case ch.Name == "":
			add("%s.name: must not be empty", key)
		case !validName(ch.Name):
			add("%s.name: must be 1 to 64 characters of letters, digits, '.', '_' or '-'", key)
		case dup:
			add("%s.name: duplicate of chains[%d]", key, j)
		default:
			byName[ch.Name] = i
		}
		switch ch.Finality {
		case "", FinalityAuto, FinalityTag, FinalityDepth:
		default:
			add("%s.finality: must be auto, tag or depth", key)
		}
		if ch.FinalityDepth > 1<<20 {
			add("%s.finalityDepth: must be at most 1048576", key)
		}
		if len(ch.URLs) == 0 {
			add("%s.urls: at least one url is required", key)
		}
		checkURLList(add, key, "urls", ch.URLs, func(u string) string {
			if u == EmbeddedURL {
				return ""
			}
			if _, err := parseNodeURL(u); err != nil {
				return fmt.Sprintf("must be an http(s) URL or %q", EmbeddedURL)
			}
			return ""
		})
		checkURLList(add, key, "wsUrls", ch.WSURLs, func(u string) string {
			if err := checkSocketURL(u); err != nil {
				return fmt.Sprintf("must be a ws(s) URL (%v)", err)
			}
			return ""
		})
	}
	if _, ok := byID[c.Mainnet]; !ok && len(c.Chains) > 0 {
		add("mainnet: chain %d is not configured", c.Mainnet)
	}
	return errors.Join(errs...)
}

// checkURLList adds what is wrong with the node URLs of chain key in its list field (urls,
// wsUrls): more than MaxNodesPerChain, a duplicate, or a URL that check refuses (its reason;
// "" when it is fine).
func checkURLList(add func(string, ...any), key, field string, urls []string, check func(string) string) {
	if len(urls) > MaxNodesPerChain {
		add("%s.%s: at most %d urls per chain", key, field, MaxNodesPerChain)
	}
	seen := make(map[string]int, len(urls))
	for k, u := range urls {
		if j, dup := seen[u]; dup {
			add("%s.%s[%d]: duplicate of %s[%d]", key, field, k, field, j)
			continue
		}
		seen[u] = k
		if why := check(u); why != "" {
			add("%s.%s[%d]: %s", key, field, k, why)
		}
	}
}

// parseNodeURL parses an http(s) node URL: scheme http or https, a host, no fragment.
func parseNodeURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("malformed URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("scheme must be http or https")
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, errors.New("missing host")
	}
	if u.Fragment != "" || u.Opaque != "" {
		return nil, errors.New("unexpected fragment or opaque part")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, errors.New("bad port")
		}
	}
	return u, nil
}

// checkSocketURL checks a ws(s) node URL: scheme ws or wss, a host, no fragment.
func checkSocketURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("malformed URL")
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return errors.New("scheme must be ws or wss")
	}
	if u.Host == "" || u.Hostname() == "" {
		return errors.New("missing host")
	}
	if u.Fragment != "" || u.Opaque != "" {
		return errors.New("unexpected fragment or opaque part")
	}
	return nil
}

// validName reports whether s is a usable chain name: it ends up in logs and metric labels.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
