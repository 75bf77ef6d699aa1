package sign

import (
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/tidwall/gjson"

	"github.com/web3gate/web3gate/proxy"
)

// ethGetTransactionCount answers eth_getTransactionCount(addr, "pending") for an account
// web3gate holds from its own nonce state: the nonce its next transaction gets, counting the
// transactions reserved or signed and not yet broadcast, and the nonces handed out by
// eth_signTransaction, which no node knows of. A client that reads it and sends it (cast,
// ethers' populateTransaction) is accepted. Every other call, and an account web3gate has no
// nonce state for yet, goes to the node.
func (s *Stage) ethGetTransactionCount(c *proxy.Call, next proxy.Handler) (*proxy.Response, error) {
	ps := gjson.ParseBytes(c.Request.Params)
	addr, tag := ps.Get("0"), ps.Get("1")
	if !ps.IsArray() || addr.Type != gjson.String || tag.Type != gjson.String || tag.Str != "pending" ||
		len(addr.Str) != 42 || !common.IsHexAddress(addr.Str) {
		return next.Serve(c)
	}
	n, err := s.txs.PendingNonce(c.Ctx, c.ChainID, common.HexToAddress(addr.Str))
	if err != nil {
		return nil, err
	}
	if n == nil {
		return next.Serve(c)
	}
	return result(hexutil.Uint64(*n))
}
