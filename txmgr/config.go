package txmgr

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/internal/defaults"
)

// Config is the `wallet.transactions:` section: the nonce manager and the confirmer.
type Config struct {
	// Fill: fields a client leaves out of eth_sendTransaction / eth_signTransaction (gas, the
	// fees, value, data) are filled as geth fills them, a "to" left out with data creates a
	// contract, and an explicit nonce is accepted when it is the account's next. false is the
	// strict form: every field required, nonce refused. Default true.
	Fill *bool `yaml:"fill"`
	// MaxInFlight is how many transactions of one account may be in flight on one chain
	// (reserved, signed, broadcast and not mined yet, or handed out by eth_signTransaction).
	// A send beyond it waits for a slot (InFlightWait, MaxQueued). Default 16, the
	// per-account share that geth's and reth's pools guarantee.
	MaxInFlight int `yaml:"maxInFlight"`
	// InFlightWait is how long a send beyond MaxInFlight waits for one of the account's
	// transactions to leave flight before it is refused with -32005 (and never longer than
	// the request lives). Default 30s.
	InFlightWait time.Duration `yaml:"inFlightWait"`
	// MaxQueued is how many sends of one account may wait for a slot at once; one more is
	// refused with -32005 at once. Default 1000.
	MaxQueued int `yaml:"maxQueued"`
	// HandOutTTL is how long a nonce handed out with eth_signTransaction stays held for the
	// caller's submission. A slot not seen on chain by then is reused. Default 2m.
	HandOutTTL time.Duration `yaml:"handOutTTL"`
	// GasCap refuses transactions asking for more gas than this (besides the block gas limit).
	// 0: no cap beyond the block gas limit. Default 0.
	GasCap uint64 `yaml:"gasCap"`
	// BroadcastTimeout bounds signing, persisting and broadcasting one transaction, retries of
	// the same bytes included. Default 15s.
	BroadcastTimeout time.Duration `yaml:"broadcastTimeout"`
	// PollInterval is how often the confirmer of each chain looks for new blocks. Default 1s.
	PollInterval time.Duration `yaml:"pollInterval"`
	// RebroadcastAfter is how long a broadcast transaction may stay out of every block before
	// its bytes are sent again (a node may drop it). Default 30s.
	RebroadcastAfter time.Duration `yaml:"rebroadcastAfter"`
	// FinalityDepth is how many blocks deep a mined transaction is before it is confirmed.
	// Default 12.
	FinalityDepth uint64 `yaml:"finalityDepth"`
	// Rules are optional per-account signing rules.
	Rules []RuleConfig `yaml:"rules"`
	// Bump re-signs transactions the chain has priced out with raised fees (bump.go).
	Bump BumpConfig `yaml:"bump"`
}

// RuleConfig restricts what one account signs; a transaction breaking it gets -32003.
type RuleConfig struct {
	// Account is the sender the rule applies to.
	Account string `yaml:"account"`
	// AllowedRecipients, when not empty, are the only `to` addresses the account signs for.
	AllowedRecipients []string `yaml:"allowedRecipients"`
	// MaxValue, when set, is the largest `value` (wei; decimal or 0x-hex) of one transaction.
	MaxValue string `yaml:"maxValue"`
	// NoContractCreation refuses contract creations (no `to`). A rule with
	// AllowedRecipients refuses them too, since a creation has no recipient on the list.
	NoContractCreation bool `yaml:"noContractCreation"`
}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	if c.Fill == nil {
		on := true
		c.Fill = &on
	}
	defaults.Set(&c.MaxInFlight, 16)
	defaults.Set(&c.InFlightWait, 30*time.Second)
	defaults.Set(&c.MaxQueued, 1000)
	defaults.Set(&c.HandOutTTL, 2*time.Minute)
	defaults.Set(&c.BroadcastTimeout, 15*time.Second)
	defaults.Set(&c.PollInterval, time.Second)
	defaults.Set(&c.RebroadcastAfter, 30*time.Second)
	defaults.Set(&c.FinalityDepth, 12)
	c.Bump.SetDefaults()
}

// Validate checks c; each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxInFlight < 1 {
		errs = append(errs, errors.New("maxInFlight: must be at least 1"))
	}
	if c.InFlightWait < 0 {
		errs = append(errs, errors.New("inFlightWait: must not be negative"))
	}
	if c.MaxQueued < 1 {
		errs = append(errs, errors.New("maxQueued: must be at least 1"))
	}
	if c.HandOutTTL < time.Second {
		errs = append(errs, errors.New("handOutTTL: must be at least 1s"))
	}
	if c.BroadcastTimeout < 100*time.Millisecond {
		errs = append(errs, errors.New("broadcastTimeout: must be at least 100ms"))
	}
	if c.PollInterval < 10*time.Millisecond {
		errs = append(errs, errors.New("pollInterval: must be at least 10ms"))
	}
	if c.RebroadcastAfter < time.Second {
		errs = append(errs, errors.New("rebroadcastAfter: must be at least 1s"))
	}
	if _, err := c.rules(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Bump.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// rule is a parsed RuleConfig.
type rule struct {
	recipients map[common.Address]bool // nil: any recipient
	maxValue   *big.Int                // nil: any value
	noCreate   bool                    // contract creations refused
}

func (c *Config) rules() (map[common.Address]rule, error) {
	out := map[common.Address]rule{}
	for i, rc := range c.Rules {
		at := fmt.Sprintf("rules[%d]", i)
		if !isAddress(rc.Account) {
			return nil, fmt.Errorf("%s.account: must be a 0x-prefixed 20-byte hex address", at)
		}
		acct := common.HexToAddress(rc.Account)
		if _, dup := out[acct]; dup {
			return nil, fmt.Errorf("%s.account: %s has a rule already", at, acct.Hex())
		}
		r := rule{noCreate: rc.NoContractCreation}
		for j, to := range rc.AllowedRecipients {
			if !isAddress(to) {
				return nil, fmt.Errorf("%s.allowedRecipients[%d]: must be a 0x-prefixed 20-byte hex address", at, j)
			}
			if r.recipients == nil {
				r.recipients = map[common.Address]bool{}
			}
			r.recipients[common.HexToAddress(to)] = true
		}
		if rc.MaxValue != "" {
			v, err := parseWei(rc.MaxValue)
			if err != nil {
				return nil, fmt.Errorf("%s.maxValue: %w", at, err)
			}
			r.maxValue = v
		}
		out[acct] = r
	}
	return out, nil
}

func isAddress(s string) bool {
	return len(s) == 42 && (strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X")) && common.IsHexAddress(s)
}

// parseWei reads a non-negative amount of wei, decimal or 0x-hex, of at most 256 bits.
func parseWei(s string) (*big.Int, error) {
	var v *big.Int
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		b, err := hexutil.DecodeBig(s)
		if err != nil {
			return nil, errors.New("must be a decimal or 0x-hex amount of wei")
		}
		v = b
	} else {
		b, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, errors.New("must be a decimal or 0x-hex amount of wei")
		}
		v = b
	}
	if v.Sign() < 0 || v.BitLen() > 256 {
		return nil, errors.New("must be between 0 and 2^256-1 wei")
	}
	return v, nil
}
