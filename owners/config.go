package owners

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/internal/defaults"
	"github.com/web3gate/web3gate/metadata"
	"github.com/web3gate/web3gate/upstreams"
)

// Limits of the configuration.
const (
	// MaxContracts is the most contracts one chain may list (nodes cap the addresses of one
	// eth_getLogs filter; go-ethereum at 1000).
	MaxContracts = 1000
	// MaxBlockRangeLimit is the largest maxBlockRange accepted.
	MaxBlockRangeLimit = 1_000_000
	// MaxReorgDepth is the largest reorgDepth accepted.
	MaxReorgDepth = 100_000
)

// The defaults of a chain, as documented in config.yaml.
const (
	DefaultConfirmations       = 12
	DefaultMaxBlockRange       = 2000
	DefaultPollInterval        = 2 * time.Second
	DefaultProgressLogInterval = 30 * time.Second
	DefaultReorgDepth          = 64
	DefaultRequestTimeout      = 30 * time.Second
	DefaultMetadataConcurrency = 8
)

// Config is the `owners:` section: the NFT owners index and GET /v1/owners.
type Config struct {
	// Chains are the indexed chains; each must be under upstreams.chains. None: no index, and
	// /v1/owners answers 404 for every chain.
	Chains []ChainConfig `yaml:"chains"`
	// MetadataConcurrency bounds the token metadata lookups one /v1/owners request with
	// nfts=true&fetchNftMetadata=true runs at once. Default 8.
	MetadataConcurrency int `yaml:"metadataConcurrency"`
}

// ChainConfig is one element of `owners.chains`.
type ChainConfig struct {
	ChainID uint64 `yaml:"chainId"`
	// StartBlock is the first block indexed. Tokens that moved only before it are not seen.
	StartBlock uint64 `yaml:"startBlock"`
	// Confirmations: a block is indexed once this many blocks are on top of it. nil: 12.
	Confirmations *uint64 `yaml:"confirmations"`
	// Contracts limits the index to these contracts; empty: every contract of the chain.
	Contracts []string `yaml:"contracts"`
	// MaxBlockRange is the largest block range of one eth_getLogs request. A range the node
	// refuses (too many results, range too large, response too large, timeout) is halved
	// until it passes, and grows back after a run of successes. Default 2000.
	MaxBlockRange uint64 `yaml:"maxBlockRange"`
	// PollInterval is how often the chain's head is read once the index has caught up.
	// Default 2s.
	PollInterval time.Duration `yaml:"pollInterval"`
	// ProgressLogInterval is how often a backfill logs its progress (blocks/s, ETA).
	// Default 30s.
	ProgressLogInterval time.Duration `yaml:"progressLogInterval"`
	// ReorgDepth is how many recent blocks keep their hashes and undo data: a reorg up to
	// this deep is rolled back exactly; a deeper one rebuilds the chain's index from
	// StartBlock. Default 64.
	ReorgDepth uint64 `yaml:"reorgDepth"`
	// RequestTimeout bounds one fetch (eth_getLogs with the block headers it needs, retries
	// included); a fetch that times out is retried with half the range. Default 30s.
	RequestTimeout time.Duration `yaml:"requestTimeout"`
}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	defaults.Set(&c.MetadataConcurrency, DefaultMetadataConcurrency)
	for i := range c.Chains {
		ch := &c.Chains[i]
		if ch.Confirmations == nil {
			n := uint64(DefaultConfirmations)
			ch.Confirmations = &n
		}
		defaults.Set(&ch.MaxBlockRange, DefaultMaxBlockRange)
		defaults.Set(&ch.PollInterval, DefaultPollInterval)
		defaults.Set(&ch.ProgressLogInterval, DefaultProgressLogInterval)
		defaults.Set(&ch.ReorgDepth, DefaultReorgDepth)
		defaults.Set(&ch.RequestTimeout, DefaultRequestTimeout)
	}
}

// Validate checks c (after SetDefaults) against the configured upstream chains; each message
// names its key within the section.
func (c *Config) Validate(upstreamChains []upstreams.ChainConfig) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.MetadataConcurrency < 1 || c.MetadataConcurrency > 64 {
		add("metadataConcurrency: must be between 1 and 64")
	}
	known := map[uint64]bool{}
	for _, u := range upstreamChains {
		known[u.ChainID] = true
	}
	seen := map[uint64]int{}
	for i, ch := range c.Chains {
		key := fmt.Sprintf("chains[%d]", i)
		switch j, dup := seen[ch.ChainID]; {
		case ch.ChainID == 0:
			add("%s.chainId: must be a positive integer", key)
		case dup:
			add("%s.chainId: duplicate of chains[%d]", key, j)
		case !known[ch.ChainID]:
			add("%s.chainId: chain %d is not under upstreams.chains", key, ch.ChainID)
		default:
			seen[ch.ChainID] = i
		}
		if ch.Confirmations == nil || *ch.Confirmations > 10_000 {
			add("%s.confirmations: must be between 0 and 10000", key)
		}
		if len(ch.Contracts) > MaxContracts {
			add("%s.contracts: at most %d contracts", key, MaxContracts)
		}
		addrs := map[common.Address]int{}
		for k, s := range ch.Contracts {
			a, err := metadata.ParseAddress(s)
			if err != nil {
				add("%s.contracts[%d]: %v", key, k, err)
				continue
			}
			if j, dup := addrs[a]; dup {
				add("%s.contracts[%d]: duplicate of contracts[%d]", key, k, j)
				continue
			}
			addrs[a] = k
		}
		if ch.MaxBlockRange < 1 || ch.MaxBlockRange > MaxBlockRangeLimit {
			add("%s.maxBlockRange: must be between 1 and %d", key, MaxBlockRangeLimit)
		}
		if ch.PollInterval < 10*time.Millisecond {
			add("%s.pollInterval: must be at least 10ms", key)
		}
		if ch.ProgressLogInterval < time.Second {
			add("%s.progressLogInterval: must be at least 1s", key)
		}
		if ch.ReorgDepth < 1 || ch.ReorgDepth > MaxReorgDepth {
			add("%s.reorgDepth: must be between 1 and %d", key, MaxReorgDepth)
		}
		if ch.RequestTimeout < 100*time.Millisecond {
			add("%s.requestTimeout: must be at least 100ms", key)
		}
	}
	return errors.Join(errs...)
}

// Scope is what the index covers, for the product catalog: the indexed chains, each with its
// contracts (lowercase 0x addresses, sorted), or an empty slice when every contract of the
// chain is indexed. Call it on a validated Config.
func (c Config) Scope() map[uint64][]string {
	out := make(map[uint64][]string, len(c.Chains))
	for _, ch := range c.Chains {
		out[ch.ChainID] = ch.contractKeys()
	}
	return out
}

// contracts returns the chain's contracts, sorted; nil for all. Invalid entries (Validate
// reports them) are left out.
func (ch *ChainConfig) contracts() []common.Address {
	var out []common.Address
	for _, s := range ch.Contracts {
		if a, err := metadata.ParseAddress(s); err == nil && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b common.Address) int { return a.Cmp(b) })
	return out
}

func (ch *ChainConfig) contractKeys() []string {
	addrs := ch.contracts()
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = strings.ToLower(a.Hex())
	}
	return out
}

// scope is the part of the chain's configuration that decides what its index holds: an
// index built for another scope is dropped and rebuilt.
func (ch *ChainConfig) scope() string {
	contracts := "*"
	if keys := ch.contractKeys(); len(keys) > 0 {
		contracts = strings.Join(keys, ",")
	}
	return "startBlock=" + strconv.FormatUint(ch.StartBlock, 10) + " contracts=" + contracts
}
