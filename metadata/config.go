package metadata

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
)

// Config is the `metadata:` section: the /v1/tokens routes.
type Config struct {
	// IPFSGateways are URL prefixes, tried in order, to which "<cid>[/path]" of an ipfs://
	// URI (or of a /ipfs/ path) is appended. Default https://ipfs.io/ipfs/ and
	// https://dweb.link/ipfs/.
	IPFSGateways []string `yaml:"ipfsGateways"`
	// ArweaveGateway is the base URL to which "/<id>[/path]" of an ar:// URI is appended.
	// Default https://arweave.net.
	ArweaveGateway string `yaml:"arweaveGateway"`
	// Fetcher fetches metadata documents from URLs chosen by contract deployers.
	Fetcher FetcherConfig `yaml:"fetcher"`
	// ChainTimeout bounds the chain reads of one request (one batched round trip). Default 10s.
	ChainTimeout time.Duration `yaml:"chainTimeout"`
	// RefreshCooldown: forceRefresh=true within this long of an item's last fetch answers the
	// cached record. Default 60s.
	RefreshCooldown time.Duration `yaml:"refreshCooldown"`
	// MaxAge: a record fetched longer ago than this is served and refreshed in the background
	// (mints change totalSupply; documents change). Default 24h.
	MaxAge time.Duration `yaml:"maxAge"`
	// FailureBackoff is how long a record whose document could not be had is served before
	// the next try; it doubles with each failure in a row up to MaxFailureBackoff. Defaults
	// 30s and 1h.
	FailureBackoff    time.Duration `yaml:"failureBackoff"`
	MaxFailureBackoff time.Duration `yaml:"maxFailureBackoff"`
	// NegativeTTL is how long a 404 the chain gave (no contract, not an NFT contract, no such
	// token) answers again without a chain read; forceRefresh=true re-checks at once.
	// Default 30s.
	NegativeTTL time.Duration `yaml:"negativeTtl"`
	// CacheBytes is the memory budget of the in-process record cache. Default 32 MiB.
	CacheBytes int64 `yaml:"cacheBytes"`
}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	if c.IPFSGateways == nil {
		c.IPFSGateways = []string{"https://ipfs.io/ipfs/", "https://dweb.link/ipfs/"}
	}
	defaults.Set(&c.ArweaveGateway, "https://arweave.net")
	c.Fetcher.SetDefaults()
	defaults.Set(&c.ChainTimeout, 10*time.Second)
	defaults.Set(&c.RefreshCooldown, 60*time.Second)
	defaults.Set(&c.MaxAge, 24*time.Hour)
	defaults.Set(&c.FailureBackoff, 30*time.Second)
	defaults.Set(&c.MaxFailureBackoff, time.Hour)
	defaults.Set(&c.NegativeTTL, 30*time.Second)
	defaults.Set(&c.CacheBytes, 32<<20)
}

// Validate checks c; each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	if len(c.IPFSGateways) == 0 {
		errs = append(errs, errors.New("ipfsGateways: at least one gateway is needed"))
	}
	for i, g := range c.IPFSGateways {
		if err := gatewayURL(g); err != nil {
			errs = append(errs, fmt.Errorf("ipfsGateways[%d]: %w", i, err))
		}
	}
	if err := gatewayURL(c.ArweaveGateway); err != nil {
		errs = append(errs, fmt.Errorf("arweaveGateway: %w", err))
	}
	if err := c.Fetcher.Validate(); err != nil {
		errs = append(errs, underKey("fetcher", err)...)
	}
	if c.ChainTimeout < 100*time.Millisecond {
		errs = append(errs, errors.New("chainTimeout: must be at least 100ms"))
	}
	if c.RefreshCooldown < 0 {
		errs = append(errs, errors.New("refreshCooldown: must not be negative"))
	}
	if c.MaxAge < time.Second {
		errs = append(errs, errors.New("maxAge: must be at least 1s"))
	}
	if c.FailureBackoff < 10*time.Millisecond {
		errs = append(errs, errors.New("failureBackoff: must be at least 10ms"))
	}
	if c.MaxFailureBackoff < c.FailureBackoff {
		errs = append(errs, errors.New("maxFailureBackoff: must be at least failureBackoff"))
	}
	if c.NegativeTTL < time.Second || c.NegativeTTL > time.Hour {
		errs = append(errs, errors.New("negativeTtl: must be from 1s to 1h"))
	}
	if c.CacheBytes < 1<<20 {
		errs = append(errs, errors.New("cacheBytes: must be at least 1048576 (1 MiB)"))
	}
	return errors.Join(errs...)
}

// gatewayURL checks a gateway base URL: http or https with a host, no query or fragment.
func gatewayURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("must be an http(s) URL without query or fragment")
	}
	return nil
}

// underKey prefixes each error joined in err (errors.Join) with "key.".
func underKey(key string, err error) []error {
	list := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	}
	for i, e := range list {
		list[i] = fmt.Errorf("%s.%w", key, e)
	}
	return list
}
