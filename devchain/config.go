package devchain

import (
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/params"

	"github.com/web3gate/web3gate/internal/defaults"
)

// Limits of the configuration.
const (
	MaxAccounts = 1000
	// MinGasLimit is the smallest block gas limit accepted: one plain transfer must fit.
	MinGasLimit = params.TxGas
	// MaxChainID is the largest chain id EIP-2294 allows: floor(MAX_UINT64 / 2) - 36.
	MaxChainID = 1<<63 - 1 - 36
	// MaxBurstBlockInterval bounds BurstBlockInterval.
	MaxBurstBlockInterval = 10 * time.Second
)

// DefaultBurstBlockInterval is burstBlockInterval's default, set by the config loader before
// the file is applied (a zero there is an explicit 0). 30 ms: under a stream of sends, blocks
// of a dozen or more transactions instead of a few, for less CPU per send in the process
// running the chain (docs/performance.md, "Notes from the code", devchain).
const DefaultBurstBlockInterval = 30 * time.Millisecond

// Config is the `devchain:` section of config.yaml.
type Config struct {
	Enabled      bool   `yaml:"enabled"`
	ChainID      uint64 `yaml:"chainId"`      // default 1337
	Accounts     int    `yaml:"accounts"`     // default 10, max 1000
	BalanceEther uint64 `yaml:"balanceEther"` // default 10000
	GasLimit     uint64 `yaml:"gasLimit"`     // default 30000000
	// BurstBlockInterval: when transactions arrived while a block was being sealed, the
	// next block is sealed this long after the start of that one; a transaction reaching an
	// idle chain is mined at once. 0: each block as soon as the one before is sealed. Default DefaultBurstBlockInterval (config files); a Config
	// built in code starts at 0.
	BurstBlockInterval time.Duration `yaml:"burstBlockInterval"`
}

// SetDefaults fills unset fields with their defaults. Enabled is left as it is.
func (c *Config) SetDefaults() {
	defaults.Set(&c.ChainID, 1337)
	defaults.Set(&c.Accounts, 10)
	defaults.Set(&c.BalanceEther, 10000)
	defaults.Set(&c.GasLimit, 30_000_000)
}

// Validate checks c; each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	if c.ChainID == 0 {
		errs = append(errs, errors.New("chainId: must be > 0"))
	}
	if c.ChainID > MaxChainID {
		errs = append(errs, fmt.Errorf("chainId: must be at most %d (EIP-2294)", uint64(MaxChainID)))
	}
	if c.Accounts < 1 || c.Accounts > MaxAccounts {
		errs = append(errs, fmt.Errorf("accounts: must be between 1 and %d", MaxAccounts))
	}
	if c.BalanceEther == 0 {
		errs = append(errs, errors.New("balanceEther: must be > 0"))
	}
	if c.GasLimit < MinGasLimit || c.GasLimit > params.MaxGasLimit {
		errs = append(errs, fmt.Errorf("gasLimit: must be between %d and %d", MinGasLimit, params.MaxGasLimit))
	}
	if c.BurstBlockInterval < 0 || c.BurstBlockInterval > MaxBurstBlockInterval {
		errs = append(errs, fmt.Errorf("burstBlockInterval: must be between 0 and %s", MaxBurstBlockInterval))
	}
	return errors.Join(errs...)
}
