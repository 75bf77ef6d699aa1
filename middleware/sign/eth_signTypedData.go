package sign

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/txmgr"
	"github.com/web3gate/web3gate/wallet"
)

// signTypedData answers eth_signTypedData_v4 (and _v3, and the unsuffixed name as wallets
// alias it) [address, typedData]: an EIP-712 signature (V 27/28). typedData may be the object
// or a JSON string holding it, as ethers and viem send it.
func (s *Stage) signTypedData(c *proxy.Call) (*proxy.Response, error) {
	ps, err := params(c, 2, 2)
	if err != nil {
		return nil, err
	}
	addr, err := address(ps[0], "address")
	if err != nil {
		return nil, err
	}
	doc := []byte(ps[1])
	var str string
	if json.Unmarshal(ps[1], &str) == nil {
		doc = []byte(str)
	}
	var td apitypes.TypedData
	if err := json.Unmarshal(doc, &td); err != nil {
		return nil, jsonrpc.ErrInvalidParams.With("typed data is not an EIP-712 document")
	}
	if err := s.held(c.Ctx, c, addr); err != nil {
		return nil, err
	}
	sig, err := s.keys.SignTypedData(c.Ctx, addr, td)
	if errors.Is(err, wallet.ErrInvalidTypedData) {
		return nil, jsonrpc.ErrInvalidParams.Withf("typed data: %s", strings.TrimPrefix(err.Error(), wallet.ErrInvalidTypedData.Error()+": "))
	}
	if err != nil {
		return nil, txmgr.SigningError(err)
	}
	return result(hexutil.Bytes(sig))
}
