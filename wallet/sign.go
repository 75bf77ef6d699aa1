package wallet

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
)

// SignTx signs tx as addr for the chain chainID with go-ethereum's latest signer for that
// chain: EIP-155 for legacy transactions, EIP-2930 and EIP-1559 for types 1 and 2. Blob and
// set-code transactions (types 3 and 4) are refused. A chain id inside tx must equal chainID.
func (k *Keys) SignTx(addr common.Address, tx *types.Transaction, chainID *big.Int) (*types.Transaction, error) {
	if tx == nil {
		return nil, errors.New("sign transaction: no transaction")
	}
	if chainID == nil || chainID.Sign() <= 0 {
		return nil, errors.New("sign transaction: chain id must be positive")
	}
	switch tx.Type() {
	case types.LegacyTxType, types.AccessListTxType, types.DynamicFeeTxType:
	default:
		return nil, fmt.Errorf("sign transaction: type %d is not supported", tx.Type())
	}
	key, err := k.key(addr)
	if err != nil {
		return nil, err
	}
	signed, err := types.SignTx(tx, types.LatestSignerForChainID(chainID), key)
	if err != nil {
		return nil, fmt.Errorf("sign transaction: %w", err)
	}
	return signed, nil
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

// SignText signs msg as addr the way personal_sign and eth_sign do (EIP-191 version 0x45:
// keccak256("\x19Ethereum Signed Message:\n" + len(msg) + msg)) and returns [R || S || V] with
// V in {27, 28}, as wallets return it.
func (k *Keys) SignText(addr common.Address, msg []byte) ([]byte, error) {
	sig, err := k.SignHash(addr, accounts.TextHash(msg))
	if err != nil {
		return nil, err
	}
	sig[crypto.RecoveryIDOffset] += 27
	return sig, nil
}

// SignTypedData signs EIP-712 typed data as addr (eth_signTypedData_v4) and returns
// [R || S || V] with V in {27, 28}.
func (k *Keys) SignTypedData(addr common.Address, data apitypes.TypedData) ([]byte, error) {
	if !k.Has(addr) {
		return nil, fmt.Errorf("%w %s", ErrUnknownAccount, addr.Hex())
	}
	hash, _, err := apitypes.TypedDataAndHash(data)
	if err != nil {
		return nil, fmt.Errorf("typed data: %w", err)
	}
	sig, err := k.SignHash(addr, hash)
	if err != nil {
		return nil, err
	}
	sig[crypto.RecoveryIDOffset] += 27
	return sig, nil
}
