package txmgr

// Broadcasting signed bytes, and reading a node's answer to them.

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// Broadcast outcomes a node reports in its error message.
func isAlreadyKnown(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "already known") || strings.Contains(m, "known transaction") ||
		strings.Contains(m, "already imported") || strings.Contains(m, "alreadyknown") ||
		strings.Contains(m, "already in the mempool") || strings.Contains(m, "already exists")
}

func isNonceTooLow(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "nonce too low") || strings.Contains(m, "nonce is too low") ||
		strings.Contains(m, "noncetoolow") || strings.Contains(m, "oldnonce") ||
		strings.Contains(m, "replacement transaction underpriced")
}

// broadcastRetry is the pause between broadcasts of the same bytes after a transport failure.
const broadcastRetry = 200 * time.Millisecond

// broadcast sends rec's signed bytes until a node accepts them (or reports them known), the
// nonce turns out to be used, a node rejects them, or ctx ends. See complete for retry.
func (t *Manager) broadcast(ctx context.Context, ch Chain, rec *store.TxRecord) (common.Hash, bool, error) {
	params := []byte(`["` + hexutil.Encode(rec.Raw) + `"]`)
	for {
		_, err := ch.Forward(ctx, "eth_sendRawTransaction", params)
		var rpcErr *jsonrpc.Error
		switch {
		case err == nil || errors.As(err, &rpcErr) && isAlreadyKnown(rpcErr.Message):
			t.markBroadcast(ctx, rec)
			return rec.Hash, false, nil
		case errors.As(err, &rpcErr) && isNonceTooLow(rpcErr.Message):
			return t.reconcile(ctx, ch, rec)
		case errors.Is(err, jsonrpc.ErrUpstreamUnavailable) || errors.Is(err, jsonrpc.ErrUpstreamTimeout) || !errors.As(err, &rpcErr):
			// Transport: the same bytes again, until the deadline.
			select {
			case <-ctx.Done():
				return common.Hash{}, false, notAccepted(rec, err)
			case <-time.After(broadcastRetry):
			}
		case rec.State == store.StateBroadcast || rec.State == store.StateStuck:
			// A rebroadcast refused (anvil refuses a fee cap below the current base fee even
			// for a transaction in its pool): a node accepted these bytes once, they may still
			// be mined, and fee bumping raises a priced-out one. Not a failure.
			return common.Hash{}, false, rpcErr
		default:
			// The node refused the transaction itself (fees, funds, gas): it will never be
			// mined, and its nonce must not stay a gap.
			t.giveUp(ctx, ch, rec, "rejected by the node: "+rpcErr.Message)
			return common.Hash{}, false, rpcErr
		}
	}
}

// notAccepted is the error of a transaction persisted but not accepted by any node in time:
// the confirmer keeps sending it, so its hash is in the error's data. A caller retrying with
// the same Idempotency-Key gets that hash instead of a second transaction.
func notAccepted(rec *store.TxRecord, err error) error {
	var rpcErr *jsonrpc.Error
	base := jsonrpc.ErrUpstreamUnavailable
	if errors.As(err, &rpcErr) && errors.Is(rpcErr, jsonrpc.ErrUpstreamTimeout) {
		base = jsonrpc.ErrUpstreamTimeout
	}
	return base.Withf("%s: the transaction is signed and stored, no node has accepted it yet; web3gate keeps broadcasting it",
		base.Message).WithData(map[string]any{"hash": rec.Hash.Hex(), "nonce": hexutil.Uint64(rec.Nonce), "state": store.StateSigned})
}

func (t *Manager) markBroadcast(ctx context.Context, rec *store.TxRecord) {
	// Not waited for: if a crash loses this write, the row is still signed and is sent
	// again at recovery, which a node answers with "already known".
	id := rec.ID
	t.db.WriteGroupedLater(func(tx *store.DBTx) error {
		err := tx.SetState(context.Background(), id, []string{store.StateSigned}, store.StateBroadcast, "")
		if errors.Is(err, store.ErrNotFound) {
			return nil // moved on already (mined by the confirmer)
		}
		return err
	})
	rec.State = store.StateBroadcast
}
