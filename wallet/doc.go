// Package wallet holds the service's EVM accounts and signs for them: key custody (an
// encrypted go-ethereum keystore, unlocked once into memory) and the signing primitives.
//
// Keystore backends. Keys (keys.go) holds every private key decrypted in memory, for fast,
// concurrent signing; the encrypted V3 key files are kept by the backend wallet.keys.backend
// names (keys_config.go): the keystore directory (keys_dir.go), or the store's database,
// which replicas share (keys_store.go). keyfile.go reads and checks the key files and raw
// private keys offered for import, passphrase.go the service passphrase (from the
// environment or a file, never logged), and keys_copy.go copies every key from one backend
// to the other (accounts import-keystore, accounts export-keystore).
//
// Accounts per principal. Accounts (accounts.go) ties each key to the principal it belongs
// to, as the store records it: keys created or imported for an owner, listed, and checked
// (Holds) before anything is signed for a caller. The embedded dev chain's well-known keys
// are adopted for wallet.devPrincipal.
//
// Signing. Signers (signers.go) signs as any account, whichever backend holds its key: the
// keystore (Keys.SignHash, sign.go) or a hardware backend (signer.go: Signer and KeyBackend,
// implemented by wallet/pkcs11 and wallet/awskms), as the account's record names it:
// transactions (SignTx, with go-ethereum's latest signer for the chain), hashes, EIP-191 text
// and EIP-712 typed data. middleware/sign answers the signing methods with it.
//
// Transactions are not kept here: the nonce manager, which checks, reserves, signs (through
// Signers), broadcasts and confirms them, is package txmgr (txmgr/doc.go). txmgr imports wallet;
// wallet imports nothing of txmgr. The `wallet:` section of the configuration, which holds
// both (wallet.keys, wallet.transactions), is composed in config/wallet.go.
package wallet
