package sign

import (
	"encoding/json"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/txmgr"
)

// personalSign answers personal_sign [message, address] with an EIP-191 signature
// (V 27/28). Some wallets send [address, message]: when the first parameter is an address and
// the second is not, the order is swapped. A message is 0x-hex bytes, or else UTF-8 text.
func (s *Stage) personalSign(c *proxy.Call) (*proxy.Response, error) {
	ps, err := params(c, 2, 3) // a third (password) parameter is accepted and ignored
	if err != nil {
		return nil, err
	}
	msgRaw, addrRaw := ps[0], ps[1]
	if isAddress(ps[0]) && !isAddress(ps[1]) {
		msgRaw, addrRaw = ps[1], ps[0]
	}
	addr, err := address(addrRaw, "address")
	if err != nil {
		return nil, err
	}
	msg, err := message(msgRaw)
	if err != nil {
		return nil, err
	}
	return s.signText(c, addr, msg)
}

// ethSign answers eth_sign [address, data]: the same EIP-191 signature over hex data.
func (s *Stage) ethSign(c *proxy.Call) (*proxy.Response, error) {
	ps, err := params(c, 2, 2)
	if err != nil {
		return nil, err
	}
	addr, err := address(ps[0], "address")
	if err != nil {
		return nil, err
	}
	var hexData string
	if err := json.Unmarshal(ps[1], &hexData); err != nil {
		return nil, jsonrpc.ErrInvalidParams.With("data must be 0x-prefixed hex")
	}
	data, err := hexutil.Decode(hexData)
	if err != nil {
		return nil, jsonrpc.ErrInvalidParams.With("data must be 0x-prefixed hex")
	}
	return s.signText(c, addr, data)
}

func (s *Stage) signText(c *proxy.Call, addr common.Address, msg []byte) (*proxy.Response, error) {
	if err := s.held(c.Ctx, c, addr); err != nil {
		return nil, err
	}
	sig, err := s.keys.SignText(c.Ctx, addr, msg)
	if err != nil {
		return nil, txmgr.SigningError(err)
	}
	return result(hexutil.Bytes(sig))
}

func isAddress(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && len(s) == 42 && common.IsHexAddress(s)
}

// message decodes a personal_sign message: 0x-hex bytes, else the string's UTF-8 bytes.
func message(raw json.RawMessage) ([]byte, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, jsonrpc.ErrInvalidParams.With("message must be a string")
	}
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		if b, err := hexutil.Decode(s); err == nil {
			return b, nil
		}
	}
	return []byte(s), nil
}
