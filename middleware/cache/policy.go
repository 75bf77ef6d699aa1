package cache

import (
	"bytes"

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

// Each plan appends the canonical params to b (a JSON array) and sets pl's scope.

// eth_getBlockByHash [hash, fullTx]: final (a block's content never changes under
// its hash); null is not stored.
func planBlockByHash(a *args, _ Finality, pl *plan, b []byte) ([]byte, error) {
	b = append(b, '[')
	b, err := appendHash(b, a.at(0))
	if err != nil {
		return b, err
	}
	full, err := readBool(a.at(1), "")
	if err != nil {
		return b, err
	}
	pl.scope = scopeFinal
	b = append(b, ',')
	return append(appendBool(b, full), ']'), nil
}

// eth_getBlockByNumber [number or tag, fullTx]: by its block reference; null (a
// block past the head) is not stored.
func planBlockByNumber(a *args, f Finality, pl *plan, b []byte) ([]byte, error) {
	if a.at(0) == nil {
		return b, errCanon
	}
	r, err := readBlockNumber(a.at(0), "")
	if err != nil {
		return b, err
	}
	full, err := readBool(a.at(1), "")
	if err != nil {
		return b, err
	}
	pl.scope = scopeOf(r, f)
	b = r.appendJSON(append(b, '['))
	b = append(b, ',')
	return append(appendBool(b, full), ']'), nil
}

// eth_getBlockReceipts [number, tag or hash]: by its block reference; null is not stored.
func planBlockReceipts(a *args, f Finality, pl *plan, b []byte) ([]byte, error) {
	if a.at(0) == nil {
		return b, errCanon
	}
	r, err := readBlockRef(a.at(0), "")
	if err != nil {
		return b, err
	}
	pl.scope = scopeOf(r, f)
	return append(r.appendJSON(append(b, '[')), ']'), nil
}

// eth_getTransactionByHash, eth_getTransactionReceipt [hash]: decided by the result (keepMined).
func planTxByHash(a *args, _ Finality, pl *plan, b []byte) ([]byte, error) {
	b, err := appendHash(append(b, '['), a.at(0))
	if err != nil || a.n != 1 {
		return b, errCanon
	}
	pl.scope = scopeResult
	return append(b, ']'), nil
}

// eth_getBalance, eth_getCode, eth_getTransactionCount [address, block].
func planAccount(a *args, f Finality, pl *plan, b []byte) ([]byte, error) {
	b, err := appendAddress(append(b, '['), a.at(0))
	if err != nil {
		return b, err
	}
	r, err := readBlockRef(a.at(1), "")
	if err != nil {
		return b, err
	}
	pl.scope = scopeOf(r, f)
	return append(r.appendJSON(append(b, ',')), ']'), nil
}

// eth_getStorageAt [address, slot, block]: the slot is a number (geth reads it as up
// to 32 big-endian bytes), kept in minimal hex.
func planStorage(a *args, f Finality, pl *plan, b []byte) ([]byte, error) {
	b, err := appendAddress(append(b, '['), a.at(0))
	if err != nil {
		return b, err
	}
	if b, err = appendQuantity(append(b, ','), a.at(1)); err != nil {
		return b, err
	}
	r, err := readBlockRef(a.at(2), "")
	if err != nil {
		return b, err
	}
	pl.scope = scopeOf(r, f)
	return append(r.appendJSON(append(b, ',')), ']'), nil
}

// eth_getProof [address, storage keys, block]: the keys are kept as sent (the
// answer repeats each key as given).
func planProof(a *args, f Finality, pl *plan, b []byte) ([]byte, error) {
	b, err := appendAddress(append(b, '['), a.at(0))
	if err != nil {
		return b, err
	}
	keys := a.at(1)
	if keys == nil || keys[0] != '[' {
		return b, errCanon
	}
	b = append(b, ",["...)
	it := newIter(keys)
	for i := 0; ; i++ {
		_, k, ok := it.next()
		if !ok {
			break
		}
		s, err := readString(k)
		if err != nil {
			return b, err
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	r, err := readBlockRef(a.at(2), "")
	if err != nil {
		return b, err
	}
	pl.scope = scopeOf(r, f)
	return append(r.appendJSON(append(b, "],"...)), ']'), nil
}

// eth_call [call object, block = latest]: the object canonicalized (appendCall); a state or
// block override argument is not read (not cached).
func planCall(a *args, f Finality, pl *plan, b []byte) ([]byte, error) {
	if a.at(2) != nil || a.at(3) != nil {
		return b, errCanon
	}
	b, err := appendCall(append(b, '['), a.at(0))
	if err != nil {
		return b, err
	}
	r, err := readBlockRef(a.at(1), "latest")
	if err != nil {
		return b, err
	}
	pl.scope = scopeOf(r, f)
	return append(r.appendJSON(append(b, ',')), ']'), nil
}

// eth_getLogs [filter]: a block hash is final (keepLogs: an empty answer is not stored); a
// range is final when both ends are numbers at or below the finalized block, else
// head; pending at either end is not cached.
func planLogs(a *args, f Finality, pl *plan, b []byte) ([]byte, error) {
	if a.n != 1 {
		return b, errCanon
	}
	b, flt, err := appendFilter(append(b, '['), a.at(0))
	if err != nil {
		return b, err
	}
	b = append(b, ']')
	if flt.blockHash {
		pl.scope, pl.blockHash = scopeFinal, true
		return b, nil
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
	return b, nil
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
	n, err := readBlockNumber([]byte(res.Get("blockNumber").Raw), "")
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
