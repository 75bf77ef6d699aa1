package wallet

// The keystore's signature of a digest, and what a transaction must be to be signed.

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// checkSignable refuses what SignTx does not sign: no transaction, a chain id that is not
// positive, a type other than 0, 1 and 2.
func checkSignable(tx *types.Transaction, chainID *big.Int) error {
	if tx == nil {
		return errors.New("sign transaction: no transaction")
	}
	if chainID == nil || chainID.Sign() <= 0 {
		return errors.New("sign transaction: chain id must be positive")
	}
	switch tx.Type() {
	case types.LegacyTxType, types.AccessListTxType, types.DynamicFeeTxType:
		return nil
	default:
		return fmt.Errorf("sign transaction: type %d is not supported", tx.Type())
	}
}

// SignHash signs a 32-byte hash as addr and returns the 65-byte signature [R || S || V] with
// V in {0, 1}, as crypto.Sign.
func (k *Keys) SignHash(addr common.Address, hash []byte) ([]byte, error) {
	if len(hash) != common.HashLength {
		return nil, fmt.Errorf("sign hash: must be %d bytes, got %d", common.HashLength, len(hash))
	}
	key, err := k.key(addr)
	if err != nil {
		return nil, err
	}
	sig, err := crypto.Sign(hash, key)
	if err != nil {
		return nil, fmt.Errorf("sign hash: %w", err)
	}
	return sig, nil
}
