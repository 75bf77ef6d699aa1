package txreq

import (
	"encoding/hex"
	"encoding/json"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// The field decoders. They are as lenient as wallets are and no more: leading zeros in a
// quantity are accepted ("0x01"), as are upper-case digits and the "0X" prefix, but a quantity
// is always a JSON string with a prefix and at least one hex digit; decimal strings and JSON
// numbers are rejected by name.

// hexDigits returns s without its 0x prefix, and whether s had one and only hex digits after it.
func hexDigits(raw json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	if len(s) < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return "", false
	}
	s = s[2:]
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return "", false
		}
	}
	return s, true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// quantity decodes a 0x-prefixed hex quantity that must fit in bits bits.
func quantity(raw json.RawMessage, name string, bits int) (*big.Int, error) {
	digits, ok := hexDigits(raw)
	if !ok || digits == "" {
		return nil, jsonrpc.ErrInvalidParams.Withf("%s must be a 0x-prefixed hex quantity", name)
	}
	digits = strings.TrimLeft(digits, "0")
	if len(digits) > bits/4 {
		return nil, jsonrpc.ErrInvalidParams.Withf("%s overflows %d bits", name, bits)
	}
	v := new(big.Int)
	if digits != "" {
		v.SetString(digits, 16) // only hex digits, checked above
	}
	return v, nil
}

// hexData decodes 0x-prefixed hex bytes; "0x" is empty data.
func hexData(raw json.RawMessage, name string) ([]byte, error) {
	digits, ok := hexDigits(raw)
	if !ok || len(digits)%2 != 0 {
		return nil, jsonrpc.ErrInvalidParams.Withf("%s must be 0x-prefixed hex with an even number of digits", name)
	}
	b, _ := hex.DecodeString(digits) // only hex digits, an even number, checked above
	return b, nil
}

// address decodes a 0x-prefixed 20-byte address. All lower or all upper case is taken as is;
// mixed case must pass the EIP-55 checksum.
func address(raw json.RawMessage, name string) (common.Address, error) {
	digits, ok := hexDigits(raw)
	if !ok || len(digits) != 2*common.AddressLength {
		return common.Address{}, jsonrpc.ErrInvalidParams.Withf("%s must be a 0x-prefixed 20-byte hex address", name)
	}
	var a common.Address
	hex.Decode(a[:], []byte(digits)) // only hex digits, checked above
	if mixedCase(digits) && a.Hex()[2:] != digits {
		return common.Address{}, jsonrpc.ErrInvalidParams.Withf("%s fails its EIP-55 checksum", name)
	}
	return a, nil
}

func mixedCase(s string) bool {
	var lower, upper bool
	for i := 0; i < len(s); i++ {
		lower = lower || 'a' <= s[i] && s[i] <= 'f'
		upper = upper || 'A' <= s[i] && s[i] <= 'F'
	}
	return lower && upper
}

// storageKey decodes an access-list storage key: 0x and exactly 32 bytes, as go-ethereum
// requires.
func storageKey(raw json.RawMessage, name string) (common.Hash, error) {
	digits, ok := hexDigits(raw)
	if !ok || len(digits) != 2*common.HashLength {
		return common.Hash{}, jsonrpc.ErrInvalidParams.Withf("%s must be a 0x-prefixed 32-byte hex key", name)
	}
	var h common.Hash
	hex.Decode(h[:], []byte(digits)) // only hex digits, checked above
	return h, nil
}
