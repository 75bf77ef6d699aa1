package txmgr

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// BumpConfig is `wallet.transactions.bump`: fee bumping of transactions the chain has
// priced out (bump.go).
type BumpConfig struct {
	// Enabled turns automatic bumping on. The speed-up and cancel routes work either way.
	// Default true.
	Enabled *bool `yaml:"enabled"`
	// After is how long a transaction may stay out of every block before it is re-signed
	// with raised fees: a number of blocks ("3") or a duration ("45s"). Default 3 blocks.
	After BumpAfter `yaml:"after"`
	// Percent is the least raise of the tip and the fee cap (each) over the highest version
	// signed so far; geth and most nodes refuse a replacement below +10 %. Default 12.5.
	Percent float64 `yaml:"percent"`
	// MaxFeeCap is the highest fee cap (maxFeePerGas, or gasPrice) a bump may sign, in wei
	// (decimal or 0x-hex); "0": no cap besides the signing rules and the funds. Default "0".
	MaxFeeCap string `yaml:"maxFeeCap"`
	// CallerPriced also bumps transactions whose fees the caller set; else only those whose
	// request carried "X-Fee-Bump: allow". Fees web3gate filled are always bumped, unless the
	// request carried "X-Fee-Bump: deny". Default false.
	CallerPriced bool `yaml:"callerPriced"`
	// Chains override After, Percent and MaxFeeCap per chain.
	Chains []BumpChainConfig `yaml:"chains"`
}

// BumpChainConfig is one chain's override of the bump settings.
type BumpChainConfig struct {
	ChainID   uint64     `yaml:"chainId"`
	After     *BumpAfter `yaml:"after"`
	Percent   *float64   `yaml:"percent"`
	MaxFeeCap *string    `yaml:"maxFeeCap"`
}

// BumpAfter is a number of blocks or a duration.
type BumpAfter struct {
	Blocks   uint64
	Duration time.Duration
}

// IsZero reports an unset value.
func (a BumpAfter) IsZero() bool { return a.Blocks == 0 && a.Duration == 0 }

func (a BumpAfter) String() string {
	if a.Duration > 0 {
		return a.Duration.String()
	}
	return strconv.FormatUint(a.Blocks, 10) + " blocks"
}

// MarshalYAML writes a as UnmarshalYAML reads it (unset: null).
func (a BumpAfter) MarshalYAML() (any, error) {
	switch {
	case a.Duration > 0:
		return a.Duration.String(), nil
	case a.Blocks > 0:
		return a.Blocks, nil
	}
	return nil, nil
}

// UnmarshalYAML reads an integer (blocks) or a duration string.
func (a *BumpAfter) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New(`must be a number of blocks (3) or a duration ("45s")`)
	}
	if b, err := strconv.ParseUint(n.Value, 10, 64); err == nil {
		if b == 0 {
			return errors.New("must be at least 1 block")
		}
		*a = BumpAfter{Blocks: b}
		return nil
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil || d <= 0 {
		return fmt.Errorf(`must be a number of blocks (3) or a positive duration ("45s"), not %q`, n.Value)
	}
	*a = BumpAfter{Duration: d}
	return nil
}

// SetDefaults fills unset fields with their defaults.
func (c *BumpConfig) SetDefaults() {
	if c.Enabled == nil {
		on := true
		c.Enabled = &on
	}
	if c.After.IsZero() {
		c.After = BumpAfter{Blocks: 3}
	}
	if c.Percent == 0 {
		c.Percent = 12.5
	}
	if c.MaxFeeCap == "" {
		c.MaxFeeCap = "0"
	}
}

// Validate checks c; each message names its key within wallet.transactions.
func (c *BumpConfig) Validate() error {
	var errs []error
	checkPercent := func(at string, p float64) {
		if p < 1 || p > 1000 || math.IsNaN(p) {
			errs = append(errs, fmt.Errorf("%s: must be between 1 and 1000", at))
		}
	}
	checkPercent("bump.percent", c.Percent)
	if _, err := parseWei(c.MaxFeeCap); err != nil {
		errs = append(errs, fmt.Errorf("bump.maxFeeCap: %w", err))
	}
	seen := map[uint64]bool{}
	for i, ch := range c.Chains {
		at := fmt.Sprintf("bump.chains[%d]", i)
		if ch.ChainID == 0 {
			errs = append(errs, fmt.Errorf("%s.chainId: required", at))
		} else if seen[ch.ChainID] {
			errs = append(errs, fmt.Errorf("%s.chainId: chain %d has an entry already", at, ch.ChainID))
		}
		seen[ch.ChainID] = true
		if ch.Percent != nil {
			checkPercent(at+".percent", *ch.Percent)
		}
		if ch.MaxFeeCap != nil {
			if _, err := parseWei(*ch.MaxFeeCap); err != nil {
				errs = append(errs, fmt.Errorf("%s.maxFeeCap: %w", at, err))
			}
		}
	}
	return errors.Join(errs...)
}

// bumpRules are the bump settings of one chain.
type bumpRules struct {
	enabled      bool
	after        BumpAfter
	basisPoints  int64    // percent * 100
	maxFeeCap    *big.Int // nil: none
	callerPriced bool
}

// forChain are the settings of chainID (c validated).
func (c *BumpConfig) forChain(chainID uint64) bumpRules {
	after, percent, capText := c.After, c.Percent, c.MaxFeeCap
	for _, ch := range c.Chains {
		if ch.ChainID != chainID {
			continue
		}
		if ch.After != nil {
			after = *ch.After
		}
		if ch.Percent != nil {
			percent = *ch.Percent
		}
		if ch.MaxFeeCap != nil {
			capText = *ch.MaxFeeCap
		}
	}
	r := bumpRules{enabled: *c.Enabled, after: after, basisPoints: int64(math.Ceil(percent * 100)), callerPriced: c.CallerPriced}
	if v, err := parseWei(capText); err == nil && v.Sign() > 0 {
		r.maxFeeCap = v
	}
	return r
}
