package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/web3gate/web3gate/internal/defaults"
	"github.com/web3gate/web3gate/txmgr"
	"github.com/web3gate/web3gate/wallet"
	"github.com/web3gate/web3gate/wallet/awskms"
	"github.com/web3gate/web3gate/wallet/pkcs11"
)

// WalletConfig is the `wallet:` section. Its parts belong to two packages: key custody
// (wallet: the keystore, and the principal owning the dev chain's accounts) and the nonce
// manager (txmgr, under `transactions:`). txmgr imports wallet to sign, so the section that
// holds both is composed here rather than in wallet.
type WalletConfig struct {
	Keys wallet.KeysConfig `yaml:"keys"`
	// DevPrincipal owns the embedded dev chain's pre-funded accounts.
	DevPrincipal string `yaml:"devPrincipal"`
	// Transactions configures the nonce manager, the confirmer and the signing rules.
	Transactions txmgr.Config `yaml:"transactions"`
	// PKCS11 is the PKCS#11 token (an HSM) holding the keys of the accounts whose backend is
	// pkcs11; off while its module is empty.
	PKCS11 pkcs11.Config `yaml:"pkcs11"`
	// AWSKMS is AWS KMS, holding the keys of the accounts whose backend is awskms; off unless
	// enabled.
	AWSKMS awskms.Config `yaml:"awskms"`
}

// SetDefaults fills unset fields with their defaults.
func (c *WalletConfig) SetDefaults() {
	c.Keys.SetDefaults()
	c.Transactions.SetDefaults()
	c.PKCS11.SetDefaults()
	c.AWSKMS.SetDefaults()
	defaults.Set(&c.DevPrincipal, "dev")
}

// Validate checks c; each message names its key within the section.
func (c *WalletConfig) Validate() error {
	var errs []error
	errs = append(errs, underKey("keys", c.Keys.Validate())...)
	errs = append(errs, underKey("transactions", c.Transactions.Validate())...)
	errs = append(errs, underKey("pkcs11", c.PKCS11.Validate())...)
	errs = append(errs, underKey("awskms", c.AWSKMS.Validate())...)
	if strings.TrimSpace(c.DevPrincipal) == "" {
		errs = append(errs, errors.New("devPrincipal: must not be empty"))
	}
	return errors.Join(errs...)
}

// underKey prefixes each error joined in err (errors.Join) with "key.".
func underKey(key string, err error) []error {
	if err == nil {
		return nil
	}
	list := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	}
	out := make([]error, len(list))
	for i, e := range list {
		out[i] = fmt.Errorf("%s.%w", key, e)
	}
	return out
}
