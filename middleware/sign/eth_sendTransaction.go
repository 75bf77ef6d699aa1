package sign

import (
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/tidwall/gjson"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr"
	"github.com/web3gate/web3gate/txmgr/txreq"
)

// maxIdempotencyKey is the longest Idempotency-Key accepted.
const maxIdempotencyKey = 255

// ethSendTransaction answers eth_sendTransaction with the hash of the transaction once a node
// accepted it: nonce supplied, signed, persisted and broadcast by the nonce manager.
func (s *Stage) ethSendTransaction(c *proxy.Call) (*proxy.Response, error) {
	key, err := idempotencyKey(c)
	if err != nil {
		return nil, err
	}
	bump, err := feeBump(c)
	if err != nil {
		return nil, err
	}
	r, err := s.txRequest(c)
	if err != nil {
		return nil, err
	}
	hash, err := s.txs.SendWith(c.Ctx, c.Principal.ID, c.ChainID, r, txmgr.SendOptions{IdempotencyKey: key, FeeBump: bump})
	if err != nil {
		return nil, err
	}
	return result(hash)
}

// ethSignTransaction answers eth_signTransaction with the signed transaction's bytes (0x-hex,
// ready for eth_sendRawTransaction): EIP-155 for a legacy transaction, EIP-1559 for type 2.
// The nonce is held for the caller for wallet.transactions.handOutTTL.
func (s *Stage) ethSignTransaction(c *proxy.Call) (*proxy.Response, error) {
	r, err := s.txRequest(c)
	if err != nil {
		return nil, err
	}
	raw, err := s.txs.SignTransaction(c.Ctx, c.Principal.ID, c.ChainID, r)
	if err != nil {
		return nil, err
	}
	return result(hexutil.Bytes(raw))
}

// txRequest checks, in the API's order, that the transaction's `from` is held for the caller
// (4100) and that the object is well-formed (-32602), and returns it parsed.
func (s *Stage) txRequest(c *proxy.Call) (*txreq.Request, error) {
	// `from` before the other fields: an account the caller does not hold is refused as such
	// even when the rest of the object is malformed.
	from := gjson.GetBytes(c.Request.Params, "0.from")
	checked := from.Type == gjson.String && len(from.Str) == 42 && common.IsHexAddress(from.Str)
	if checked {
		if err := s.held(c.Ctx, c, common.HexToAddress(from.Str)); err != nil {
			return nil, err
		}
	}
	parse := txreq.Parse
	if s.txs.Fill() {
		parse = txreq.ParseFill
	}
	r, err := parse(c.Request.Params, c.ChainID)
	if err != nil {
		return nil, err
	}
	if !checked || r.From != common.HexToAddress(from.Str) {
		if err := s.held(c.Ctx, c, r.From); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// feeBump is the exchange's X-Fee-Bump header: "allow" lets web3gate bump fees the caller set,
// "deny" keeps it from bumping the transaction at all; absent, the configuration decides
// (wallet.transactions.bump.callerPriced).
func feeBump(c *proxy.Call) (string, error) {
	if c.Exchange == nil {
		return "", nil
	}
	switch c.Exchange.FeeBump {
	case proxy.FeeBumpAllow:
		return store.FeeBumpAllow, nil
	case proxy.FeeBumpDeny:
		return store.FeeBumpDeny, nil
	case proxy.FeeBumpInvalid:
		return "", jsonrpc.ErrInvalidParams.With("X-Fee-Bump must be allow or deny")
	}
	return "", nil
}

// idempotencyKey is the exchange's Idempotency-Key: 1 to 255 visible ASCII characters, on a
// single (not batch) request.
func idempotencyKey(c *proxy.Call) (string, error) {
	ex := c.Exchange
	if ex == nil || !ex.HasIdempotencyKey {
		return "", nil
	}
	if ex.Batch {
		return "", jsonrpc.ErrInvalidParams.With("Idempotency-Key applies to a single request, not a batch")
	}
	k := ex.IdempotencyKey
	if len(k) == 0 || len(k) > maxIdempotencyKey {
		return "", jsonrpc.ErrInvalidParams.Withf("Idempotency-Key must be 1 to %d characters", maxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "", jsonrpc.ErrInvalidParams.With("Idempotency-Key must be visible ASCII characters")
		}
	}
	return k, nil
}
