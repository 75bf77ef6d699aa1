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
