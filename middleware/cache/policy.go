package cache

import (
	"bytes"
	"encoding/json"

	"github.com/tidwall/gjson"
)

// The rule of each cached method (the table is `policies` in cache.go). A block reference
// decides the scope:
//
//   - a number at or below the chain's finalized block (earliest is 0): final;
//   - a number above it, or the tags latest, safe and finalized (which move with the head):
//     head, i.e. true at the current head only (its number and hash in the key), at most
//     unfinalizedTtl;
//   - pending: never cached;
//   - a block hash (a 32-byte string or EIP-1898 {blockHash}): final, the state or content
//     under a hash never changes; with requireCanonical: true, head (canonicity can change).

// scopeOf is the scope a block reference allows.
func scopeOf(r blockRef, f Finality) scope {
	switch r.kind {
	case refNumber:
		if f.Known && r.num <= f.Finalized {
			return scopeFinal
		}
		return scopeHead
	case refTag, refCanonHash:
		return scopeHead
	case refHash:
		return scopeFinal
	}
	return scopeNone
}

// Arguments a node requires (geth and anvil answer -32602 without them: the block of the
// state reads, the fullTx flag) are required here too: a call without one is not cached, so
// that a cached answer never stands for a call its node would refuse. eth_call's block is
// optional (latest), as in geth.

// eth_getBlockByHash [hash, fullTx]: final (a block's content never changes under
// its hash); null is not stored.
func planBlockByHash(args []json.RawMessage, _ Finality, pl *plan) (any, error) {
	h, err := canonHash(arg(args, 0))
	if err != nil {
		return nil, err
	}
	full, err := canonBool(arg(args, 1), "")
	if err != nil {
		return nil, err
	}
	pl.scope = scopeFinal
	return []any{h, full}, nil
}

// eth_getBlockByNumber [number or tag, fullTx]: by its block reference; null (a
// block past the head) is not stored.
func planBlockByNumber(args []json.RawMessage, f Finality, pl *plan) (any, error) {
	if arg(args, 0) == nil {
		return nil, errCanon
	}
	r, err := readBlockNumber(arg(args, 0), "")
	if err != nil {
		return nil, err
	}
	full, err := canonBool(arg(args, 1), "")
	if err != nil {
		return nil, err
	}
	pl.scope = scopeOf(r, f)
	return []any{r.json(), full}, nil
}

// eth_getBlockReceipts [number, tag or hash]: by its block reference; null is not stored.
func planBlockReceipts(args []json.RawMessage, f Finality, pl *plan) (any, error) {
	if arg(args, 0) == nil {
		return nil, errCanon
	}
	r, err := readBlockRef(arg(args, 0), "")
	if err != nil {
		return nil, err
	}
	pl.scope = scopeOf(r, f)
	return []any{r.json()}, nil
}

// eth_getTransactionByHash, eth_getTransactionReceipt [hash]: decided by the result (keepMined).
func planTxByHash(args []json.RawMessage, _ Finality, pl *plan) (any, error) {
	h, err := canonHash(arg(args, 0))
	if err != nil || len(args) != 1 {
		return nil, errCanon
	}
	pl.scope = scopeResult
	return []any{h}, nil
}

// eth_getBalance, eth_getCode, eth_getTransactionCount [address, block].
func planAccount(args []json.RawMessage, f Finality, pl *plan) (any, error) {
	a, err := canonAddress(arg(args, 0))
	if err != nil {
		return nil, err
	}
	r, err := readBlockRef(arg(args, 1), "")
	if err != nil {
		return nil, err
	}
	pl.scope = scopeOf(r, f)
	return []any{a, r.json()}, nil
}

// eth_getStorageAt [address, slot, block]: the slot is a number (geth reads it as up
// to 32 big-endian bytes), kept in minimal hex.
func planStorage(args []json.RawMessage, f Finality, pl *plan) (any, error) {
	a, err := canonAddress(arg(args, 0))
	if err != nil {
		return nil, err
	}
	slot, err := canonQuantity(arg(args, 1))
	if err != nil {
		return nil, err
	}
	r, err := readBlockRef(arg(args, 2), "")
	if err != nil {
		return nil, err
	}
	pl.scope = scopeOf(r, f)
	return []any{a, slot, r.json()}, nil
}

// eth_getProof [address, storage keys, block]: the keys are kept as sent (the
// answer repeats each key as given).
func planProof(args []json.RawMessage, f Finality, pl *plan) (any, error) {
	a, err := canonAddress(arg(args, 0))
	if err != nil {
		return nil, err
	}
	var keys []json.RawMessage
	if raw := arg(args, 1); raw == nil || raw[0] != '[' || json.Unmarshal(raw, &keys) != nil {
		return nil, errCanon
	}
	slots := make([]string, len(keys))
	for i, k := range keys {
		if slots[i], err = readString(k); err != nil {
			return nil, err
		}
	}
	r, err := readBlockRef(arg(args, 2), "")
	if err != nil {
		return nil, err
	}
	pl.scope = scopeOf(r, f)
	return []any{a, slots, r.json()}, nil
}

// eth_call [call object, block = latest]: the object canonicalized (canonCall); a state or
// block override argument is not read (not cached).
func planCall(args []json.RawMessage, f Finality, pl *plan) (any, error) {
	if arg(args, 2) != nil || arg(args, 3) != nil {
		return nil, errCanon
	}
	call, err := canonCall(arg(args, 0))
	if err != nil {
		return nil, err
	}
	r, err := readBlockRef(arg(args, 1), "latest")
	if err != nil {
		return nil, err
	}
	pl.scope = scopeOf(r, f)
	return []any{call, r.json()}, nil
}

// eth_getLogs [filter]: a block hash is final (keepLogs: an empty answer is not stored); a
// range is final when both ends are numbers at or below the finalized block, else
// head; pending at either end is not cached.
func planLogs(args []json.RawMessage, f Finality, pl *plan) (any, error) {
	if len(args) != 1 {
		return nil, errCanon
	}
	flt, err := canonFilter(args[0])
	if err != nil {
		return nil, err
	}
	if flt.blockHash != "" {
		pl.scope, pl.blockHash = scopeFinal, true
		return []any{flt.canon}, nil
	}
	pl.to = flt.to
	from, to := scopeOf(flt.from, f), scopeOf(flt.to, f)
	switch {
	case from == scopeNone || to == scopeNone:
		pl.scope = scopeNone
	case from == scopeHead || to == scopeHead:
		pl.scope = scopeHead
	default:
		pl.scope = scopeFinal
	}
	return []any{flt.canon}, nil
}

// keepAny stores any result under the plan's scope.
func keepAny(_ Finality, pl *plan, _ []byte) scope { return pl.scope }

// keepNonNull stores a result that is not null (a block or receipts not yet there).
func keepNonNull(_ Finality, pl *plan, r []byte) scope {
	if isNull(r) {
		return scopeNone
	}
	return pl.scope
}

// keepMined stores a transaction or receipt once it has a block: final when the block is,
// else for the head; null (unknown or pending) is not stored.
func keepMined(f Finality, _ *plan, r []byte) scope {
	if isNull(r) {
		return scopeNone
	}
	res := gjson.ParseBytes(r)
	if res.Get("blockHash").Type != gjson.String {
		return scopeNone
	}
	n, err := readBlockNumber(json.RawMessage(res.Get("blockNumber").Raw), "")
	if err != nil || n.kind != refNumber {
		return scopeNone
	}
	if f.Known && n.num <= f.Finalized {
		return scopeFinal
	}
	return scopeHead
}

// keepLogs stores logs under the plan's scope, except an empty list by block hash (it may
// mean a block the node has not seen yet) or for a range that reaches past the head.
func keepLogs(f Finality, pl *plan, r []byte) scope {
	if string(bytes.TrimSpace(r)) != "[]" {
		return pl.scope
	}
	if pl.blockHash {
		return scopeNone
	}
	if pl.to.kind == refNumber && (!f.Known || pl.to.num > f.Head) {
		return scopeNone
	}
	return pl.scope
}
