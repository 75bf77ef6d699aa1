package app

// The hardware key backends (wallet.pkcs11, wallet.awskms), opened for the server and for
// the accounts commands.

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/wallet"
	"github.com/web3gate/web3gate/wallet/awskms"
	"github.com/web3gate/web3gate/wallet/pkcs11"
)

// OpenKeyBackends opens every hardware key backend cfg configures: the PKCS#11 token
// (wallet.pkcs11.module set) and AWS KMS (wallet.awskms.enabled). None: the keystore alone.
// On an error, those opened already are closed.
func OpenKeyBackends(ctx context.Context, cfg *config.Config, log *zap.Logger) ([]wallet.KeyBackend, error) {
	var out []wallet.KeyBackend
	fail := func(err error) ([]wallet.KeyBackend, error) {
		for _, b := range out {
			err = errors.Join(err, b.Close())
		}
		return nil, err
	}
	if cfg.Wallet.PKCS11.Enabled() {
		b, err := pkcs11.New(cfg.Wallet.PKCS11, log.Named("pkcs11"))
		if err != nil {
			return fail(fmt.Errorf("wallet.pkcs11: %w", err))
		}
		out = append(out, b)
	}
	if cfg.Wallet.AWSKMS.Enabled {
		b, err := awskms.New(ctx, cfg.Wallet.AWSKMS, log.Named("awskms"))
		if err != nil {
			return fail(fmt.Errorf("wallet.awskms: %w", err))
		}
		out = append(out, b)
	}
	return out, nil
}
