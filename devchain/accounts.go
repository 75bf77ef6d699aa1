package devchain

import (
	"crypto/ecdsa"
	"fmt"
	"strconv"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// accountSeed prefixes the decimal index of a dev account; keccak256 of the whole string is
// the account's private key.
const accountSeed = "web3gate dev account "

// Account is a pre-funded dev account. Key is a secret even on a dev chain: never log it.
type Account struct {
	Address common.Address
	Key     *ecdsa.PrivateKey
}

// DevAccounts returns the first n deterministic dev accounts, the ones a dev chain with at
// least n accounts pre-funds (account 0 first). Tests use it to sign for a dev chain they do
// not hold a *Chain of, e.g. one behind the gateway. The keys are secrets like any key.
func DevAccounts(n int) ([]Account, error) {
	if n < 0 {
		return nil, fmt.Errorf("dev accounts: negative count %d", n)
	}
	return deriveAccounts(n)
}

// deriveAccounts returns the first n dev accounts. Account i's key is
// keccak256("web3gate dev account " + decimal i), so every start yields the same accounts.
func deriveAccounts(n int) ([]Account, error) {
	accounts := make([]Account, n)
	for i := range accounts {
		key, err := crypto.ToECDSA(crypto.Keccak256([]byte(accountSeed + strconv.Itoa(i))))
		if err != nil {
			return nil, fmt.Errorf("derive account %d: %w", i, err)
		}
		accounts[i] = Account{Address: crypto.PubkeyToAddress(key.PublicKey), Key: key}
	}
	return accounts, nil
}
