// Package pkcs11 keeps accounts' keys on a PKCS#11 token (an HSM; SoftHSM2 in tests): it is
// the wallet.KeyBackend named wallet.BackendPKCS11.
//
// Keys are secp256k1 EC key pairs made on the token (Generate) or put there from outside
// (Import), the private half marked sensitive and not extractable; web3gate records only a
// reference, the key's CKA_ID in hex. Signing (Signer.SignDigest) runs CKM_ECDSA over the
// 32-byte digest on a pooled session and turns the token's raw r || s into Ethereum's
// [R || S || V] with wallet.SignatureFromRaw, which moves s to the lower half and checks
// that the signature recovers to the account: nothing unverified leaves this package.
//
// Files: config.go (the configuration), pin.go (the user PIN, from the environment or a
// file, never logged), ec.go (secp256k1 encodings: the curve OID, CKA_EC_POINT), module.go
// (the PKCS#11 library, loaded and initialised once per process), pool.go (the session pool,
// its timeouts, and recovery when the token goes away), backend.go (New, Close, finding the
// token, logging in), keys.go (Generate, Import, Open), signer.go (Signer), errors.go (which
// CKR_ codes mean "the token is gone for now"). The implementation needs cgo (the library is
// loaded with dlopen); nocgo.go is what a build without cgo gets: New answers an error.
//
// softhsmtest makes SoftHSM2 tokens for tests.
package pkcs11
