//go:build !cgo

package softhsmtest

import (
	"testing"

	"github.com/web3gate/web3gate/wallet/pkcs11"
)

const noCgo = "SoftHSM2 tokens need a cgo build of the tests (CGO_ENABLED=1): PKCS#11 libraries are loaded with dlopen"

// Token fails t: a build without cgo cannot use PKCS#11.
func Token(t testing.TB) pkcs11.Config {
	t.Helper()
	t.Fatal(noCgo)
	return pkcs11.Config{}
}

// Module fails t: a build without cgo cannot use PKCS#11.
func Module(t testing.TB) string { t.Helper(); t.Fatal(noCgo); return "" }

// ConfFile fails t: a build without cgo cannot use PKCS#11.
func ConfFile(t testing.TB) string { t.Helper(); t.Fatal(noCgo); return "" }

// TokenDir fails t: a build without cgo cannot use PKCS#11.
func TokenDir(t testing.TB) string { t.Helper(); t.Fatal(noCgo); return "" }
