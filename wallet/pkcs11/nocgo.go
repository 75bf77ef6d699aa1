//go:build !cgo

package pkcs11

import (
	"context"
	"crypto/ecdsa"
	"errors"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/wallet"
)

// errNoCgo is what a build without cgo answers: PKCS#11 libraries are loaded with dlopen.
var errNoCgo = errors.New("PKCS#11 backend: this web3gate was built without cgo; PKCS#11 needs a " +
	"cgo build: CGO_ENABLED=1 go build")

// Backend is the PKCS#11 key backend; in a build without cgo, New refuses to make one.
type Backend struct{}

var _ wallet.KeyBackend = (*Backend)(nil)

// New answers that PKCS#11 needs a cgo build.
func New(Config, *zap.Logger) (*Backend, error) { return nil, errNoCgo }

// Name is wallet.BackendPKCS11.
func (*Backend) Name() string { return wallet.BackendPKCS11 }

// Generate answers errNoCgo.
func (*Backend) Generate(context.Context, string) (wallet.KeyRef, error) {
	return wallet.KeyRef{}, errNoCgo
}

// Import answers errNoCgo.
func (*Backend) Import(context.Context, *ecdsa.PrivateKey, string) (wallet.KeyRef, error) {
	return wallet.KeyRef{}, errNoCgo
}

// Open answers errNoCgo.
func (*Backend) Open(context.Context, string, common.Address) (wallet.Signer, error) {
	return nil, errNoCgo
}

// Close does nothing.
func (*Backend) Close() error { return nil }
