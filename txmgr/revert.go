package txmgr

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// The receipt checks of the confirmer: a transaction in a block may have reverted there. Its
// nonce is used and its fee paid, yet it did nothing; such a row becomes failed, with the
// revert reason a replay of the call gives, and keeps its block. Rows are checked when the
// block scan marks them mined (one eth_getBlockReceipts per block holding any of them), a
// check that failed is tried again at the next pass, and before Confirm moves rows to
// confirmed every one not checked by this confirmer is (after a restart, or a row mined by
// another path: a rebroadcast's receipt lookup, an expired hand-out, a reconciliation).

// maxRevertReason bounds the stored revert reason, in bytes.
const maxRevertReason = 512

// revertPrefix is the start of every revert reason, as nodes word it.
const revertPrefix = "execution reverted"

var (
	selectorError = []byte{0x08, 0xc3, 0x79, 0xa0} // Error(string)
	selectorPanic = []byte{0x4e, 0x48, 0x7b, 0x71} // Panic(uint256)
)

// checkedAt is where a row's receipt was found successful.
type checkedAt struct {
	block  common.Hash
	number uint64
}

// txReceipt is what the checks read of a receipt.
type txReceipt struct {
	TransactionHash common.Hash     `json:"transactionHash"`
	BlockHash       common.Hash     `json:"blockHash"`
	Status          *hexutil.Uint64 `json:"status"` // nil before Byzantium: not known to have failed
}

// errReceiptMissing: the node has no receipt of a row's mined version in the row's block
// (the block left the canonical chain: reorgs moves the row back to broadcast).
var errReceiptMissing = errors.New("no receipt of the mined transaction in its block")

// checkReceipts reads the receipt status of the rows of ms in state mined that this confirmer
// has not checked in their block yet, and fails those that reverted. It returns the rows it
// could not check (to try again) and the first error.
func (c *confirmer) checkReceipts(ctx context.Context, ms []store.Mined) (left []store.Mined, err error) {
	if c.checked == nil {
		c.checked = map[int64]checkedAt{}
	}
	byBlock := map[common.Hash][]store.Mined{}
	var order []common.Hash
	queued := map[int64]common.Hash{}
	for _, m := range ms {
		if m.State != store.StateMined || m.BlockHash == (common.Hash{}) || m.MinedHash == (common.Hash{}) {
			continue // a cancel (a plain self-transfer) cannot revert
		}
		if at, ok := c.checked[m.ID]; ok && at.block == m.BlockHash {
			continue
		}
		if bh, ok := queued[m.ID]; ok && bh == m.BlockHash {
			continue // a retry and a new sight of the same row in the same block
		}
		queued[m.ID] = m.BlockHash
		if _, ok := byBlock[m.BlockHash]; !ok {
			order = append(order, m.BlockHash)
		}
		byBlock[m.BlockHash] = append(byBlock[m.BlockHash], m)
	}
	for _, bh := range order {
		rows := byBlock[bh]
		statuses, rerr := c.receiptStatuses(ctx, bh, rows)
		if rerr != nil {
			err = cmpErr(err, fmt.Errorf("receipts of block %s: %w", bh.Hex(), rerr))
			left = append(left, rows...)
			continue
		}
		for _, m := range rows {
			ok, found := statuses[m.MinedHash]
			if !found {
				err = cmpErr(err, fmt.Errorf("tx %d (%s): %w", m.ID, m.MinedHash.Hex(), errReceiptMissing))
				left = append(left, m)
				continue
			}
			if !ok {
				if ferr := c.failReverted(ctx, m); ferr != nil {
					err = cmpErr(err, fmt.Errorf("tx %d: %w", m.ID, ferr))
					left = append(left, m)
					continue
				}
			}
			c.checked[m.ID] = checkedAt{block: bh, number: m.BlockNumber}
		}
	}
	return left, err
}

// queueCheck has the receipt of rec, which a receipt lookup (not the block scan) found mined
// at m, checked at the next block scan.
func (c *confirmer) queueCheck(rec *store.TxRecord, m *minedAt) {
	c.unchecked = append(c.unchecked, store.Mined{ID: rec.ID, CreatedAt: rec.CreatedAt, Versions: rec.Versions,
		State: store.StateMined, BlockNumber: m.number, BlockHash: m.hash, MinedHash: rec.Hash})
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// receiptStatuses are the statuses (true: success) of the receipts in block bh, by
// transaction hash: the block's receipts in one call, or, from a node without
// eth_getBlockReceipts, the receipt of each of rows.
func (c *confirmer) receiptStatuses(ctx context.Context, bh common.Hash, rows []store.Mined) (map[common.Hash]bool, error) {
	out := make(map[common.Hash]bool, len(rows))
	add := func(r *txReceipt) {
		if r.BlockHash == bh {
			out[r.TransactionHash] = r.Status == nil || *r.Status != 0
		}
	}
	if !c.noBlockReceipts {
		res, err := c.ch.Forward(ctx, "eth_getBlockReceipts", []byte(`["`+bh.Hex()+`"]`))
		switch {
		case err == nil:
			var rs []*txReceipt
			if err := json.Unmarshal(res, &rs); err != nil {
				return nil, fmt.Errorf("eth_getBlockReceipts: %w", err)
			}
			for _, r := range rs {
				if r != nil {
					add(r)
				}
			}
			return out, nil
		case !methodUnsupported(err):
			return nil, err
		}
		c.noBlockReceipts = true
		c.log.Info("confirmer: the node has no eth_getBlockReceipts; receipts are read one by one", zap.Error(err))
	}
	for _, m := range rows {
		res, err := c.ch.Forward(ctx, "eth_getTransactionReceipt", []byte(`["`+m.MinedHash.Hex()+`"]`))
		if err != nil {
			return nil, err
		}
		var r *txReceipt
		if err := json.Unmarshal(res, &r); err != nil {
			return nil, fmt.Errorf("eth_getTransactionReceipt: %w", err)
		}
		if r != nil {
			r.TransactionHash = m.MinedHash
			add(r)
		}
	}
	return out, nil
}

// methodUnsupported reports whether a node refused a method it does not implement. Upstream
// errors pass through as the node wrote them, so their code and wording are all there is.
func methodUnsupported(err error) bool {
	var e *jsonrpc.Error
	if !errors.As(err, &e) {
		return false
	}
	if e.Code == jsonrpc.ErrMethodNotFound.Code {
		return true
	}
	m := strings.ToLower(e.Message)
	return strings.Contains(m, "method not found") || strings.Contains(m, "not supported") ||
		strings.Contains(m, "unsupported") || strings.Contains(m, "does not exist") || strings.Contains(m, "not available")
}

// failReverted records that row m reverted in its block, with the reason a replay gives.
func (c *confirmer) failReverted(ctx context.Context, m store.Mined) error {
	var fields []byte
	if err := c.t.db.Read(ctx, func(tx *store.DBTx) error {
		rec, err := tx.TxByID(ctx, m.ID)
		if err != nil {
			return err
		}
		if rec.Hash == m.MinedHash {
			fields = rec.Fields
			return nil
		}
		vs, err := tx.VersionsByHash(ctx, m.MinedHash)
		if err != nil {
			return err
		}
		for _, v := range vs {
			if v.TxID == m.ID {
				fields = v.Fields
			}
		}
		return nil
	}); err != nil {
		return err
	}
	reason := revertPrefix
	if fields != nil {
		var err error
		if reason, err = c.replay(ctx, fields, m.BlockNumber); err != nil {
			return err
		}
	}
	var changed bool
	if err := c.t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
		var err error
		changed, err = tx.SetReverted(ctx, m.ID, m.BlockHash, reason)
		return err
	}); err != nil {
		return err
	}
	if changed {
		// The caller's transaction did what the chain let it: news for the caller (status,
		// webhook), not a fault of the service.
		c.t.metrics.reverted.WithLabelValues(chainLabel(c.chainID)).Inc()
		c.log.Info("confirmer: transaction reverted", zap.Int64("tx", m.ID), zap.String("hash", m.MinedHash.Hex()),
			zap.Uint64("block", m.BlockNumber), zap.String("reason", reason))
	}
	return nil
}

// replay is the revert reason of the stored transaction object fields mined in block number:
// an eth_call of it (no fees: the call must not fail for a balance the fees would need) on the
// state before that block. The state the transaction met may differ (transactions before it
// in its block): a replay that does not revert, or a node that gives no revert data, is plain
// "execution reverted". A node not reached is an error: the check is tried again.
func (c *confirmer) replay(ctx context.Context, fields []byte, number uint64) (string, error) {
	r, err := parseFields(fields, c.chainID)
	if err != nil || number == 0 {
		return revertPrefix, nil
	}
	call := map[string]any{"from": r.From, "gas": hexutil.Uint64(r.Gas), "data": hexutil.Bytes(r.Data)}
	if r.To != nil {
		call["to"] = r.To
	}
	if r.Value != nil {
		call["value"] = (*hexutil.Big)(r.Value)
	}
	params, err := json.Marshal([]any{call, hexutil.EncodeUint64(number - 1)})
	if err != nil {
		return "", err
	}
	_, err = c.ch.Forward(ctx, "eth_call", params)
	if err == nil {
		return revertPrefix, nil
	}
	if ctx.Err() != nil || errors.Is(err, jsonrpc.ErrUpstreamUnavailable) || errors.Is(err, jsonrpc.ErrUpstreamTimeout) {
		return "", fmt.Errorf("replay: %w", err)
	}
	var e *jsonrpc.Error
	if !errors.As(err, &e) {
		return "", fmt.Errorf("replay: %w", err)
	}
	return revertReason(revertData(e.Data)), nil
}

// revertData is the revert data of an eth_call error's data member: a hex string, as geth and
// anvil put it; nil when there is none.
func revertData(data any) []byte {
	var s string
	switch d := data.(type) {
	case json.RawMessage:
		if json.Unmarshal(d, &s) != nil {
			return nil
		}
	case string:
		s = d
	default:
		return nil
	}
	b, err := hexutil.Decode(s)
	if err != nil {
		return nil
	}
	return b
}

// revertReason words revert data: Error(string) as its text, Panic(uint256) as "panic 0x11",
// other data (a custom error) as hex, at most maxRevertReason bytes.
func revertReason(data []byte) string {
	var reason string
	switch {
	case len(data) == 0:
		return revertPrefix
	case bytes.HasPrefix(data, selectorError):
		s, ok := abiString(data[4:])
		if !ok {
			reason = "custom error 0x" + hex.EncodeToString(data)
			break
		}
		reason = s
	case bytes.HasPrefix(data, selectorPanic) && len(data) == 4+32:
		reason = "panic 0x" + new(big.Int).SetBytes(data[4:]).Text(16)
	default:
		reason = "custom error 0x" + hex.EncodeToString(data)
	}
	// Contract text is any bytes: made valid UTF-8 without NULs before the cut, so that the
	// store's own cleaning cannot lengthen it past the bound.
	reason = strings.ReplaceAll(strings.ToValidUTF8(reason, "\uFFFD"), "\x00", "\uFFFD")
	return truncateUTF8(revertPrefix+": "+reason, maxRevertReason)
}

// abiString decodes the ABI encoding of one string argument.
func abiString(b []byte) (string, bool) {
	word := func(at uint64) (uint64, bool) {
		if at > uint64(len(b)) || uint64(len(b))-at < 32 {
			return 0, false
		}
		w := b[at : at+32]
		for _, x := range w[:24] {
			if x != 0 {
				return 0, false
			}
		}
		return binary.BigEndian.Uint64(w[24:]), true
	}
	off, ok := word(0)
	if !ok {
		return "", false
	}
	n, ok := word(off)
	if !ok || n > uint64(len(b))-off-32 {
		return "", false
	}
	start := off + 32
	return string(b[start : start+n]), true
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}
