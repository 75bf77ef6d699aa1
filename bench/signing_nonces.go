//go:build linux

// The nonce checks of the signing measurements, and the waits for the chain and web3gate to settle.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
)

// Bounds of the wait for the chain to take every send of (g).
const (
	settlePoll    = 100 * time.Millisecond
	settleQuiet   = time.Second
	settleTimeout = 30 * time.Second
)

// checkHandedOut: signatures answered ok after the check's signature at nonce first must
// have taken the nonces after it, so that the one after them gets first + ok + 1.
func checkHandedOut(first, next uint64, ok float64) (string, error) {
	want := first + uint64(ok) + 1
	if next == want {
		return fmt.Sprintf("nonces handed out: %.0f signatures answered ok took nonces %d–%d, the next signature got %d: contiguous, none reused", ok, first+1, first+uint64(ok), next), nil
	}
	text := fmt.Sprintf("nonce MISMATCH: %.0f signatures answered ok after nonce %d, the next signature got nonce %d, want %d", ok, first, next, want)
	return text, fmt.Errorf("%s", text)
}

// checkMined: the sends answered ok must have been mined with one nonce each from start on,
// and nothing be left pending behind a gap.
func checkMined(start uint64, after nonceState, ok float64) (string, error) {
	mined := int64(after.latest) - int64(start)
	if float64(mined) == ok && after.pending == after.latest {
		return fmt.Sprintf("nonce gaps: 0 (%.0f sends answered ok, %d nonces mined: %d → %d; pending = latest)", ok, mined, start, after.latest), nil
	}
	text := fmt.Sprintf("nonce MISMATCH: %.0f sends answered ok, %d nonces mined (%d → %d), pending %d", ok, mined, start, after.latest, after.pending)
	switch {
	case after.pending != after.latest:
		text += fmt.Sprintf(": %d transactions stuck in the pool behind a gap or unmined", int64(after.pending)-int64(after.latest))
	case float64(mined) < ok:
		text += fmt.Sprintf(": %.0f sends answered ok are not on chain (a gap)", ok-float64(mined))
	default:
		text += fmt.Sprintf(": %.0f nonces taken by calls not answered ok", float64(mined)-ok)
	}
	return text, fmt.Errorf("%s", text)
}

// checkSigned decodes the raw transaction of an eth_signTransaction result, checks that it is
// the transfer asked for, signed by from on the dev chain, and returns its nonce.
func checkSigned(res json.RawMessage, from string) (uint64, error) {
	var raw string
	if err := json.Unmarshal(res, &raw); err != nil {
		return 0, err
	}
	b, err := hexutil.Decode(raw)
	if err != nil {
		return 0, err
	}
	var tx types.Transaction
	if err := tx.UnmarshalBinary(b); err != nil {
		return 0, err
	}
	if tx.ChainId().Cmp(big.NewInt(devChainID)) != 0 {
		return 0, fmt.Errorf("chain id %v, want %d", tx.ChainId(), devChainID)
	}
	sender, err := types.Sender(types.LatestSignerForChainID(tx.ChainId()), &tx)
	if err != nil {
		return 0, err
	}
	if sender != common.HexToAddress(from) {
		return 0, fmt.Errorf("signed by %s, want %s", sender, from)
	}
	if tx.To() == nil || *tx.To() != common.HexToAddress(sinkAddress) || tx.Value().Cmp(big.NewInt(1)) != 0 || tx.Gas() != 21000 {
		return 0, fmt.Errorf("not the transfer asked for: to %v, value %v, gas %d", tx.To(), tx.Value(), tx.Gas())
	}
	return tx.Nonce(), nil
}

// nonceState is an account's nonces and web3gate's count of a method's calls answered ok.
type nonceState struct {
	latest, pending uint64
	ok              float64
	block           uint64 // the chain's eth_blockNumber
}

// readNonces reads the account's eth_getTransactionCount at "latest" and "pending" through
// web3gate, and its count of okKey calls.
func readNonces(t *target, account, okKey string) (nonceState, error) {
	var n nonceState
	for _, q := range []struct {
		tag string
		dst *uint64
	}{{"latest", &n.latest}, {"pending", &n.pending}} {
		probe := *t
		probe.body = `{"jsonrpc":"2.0","id":1,"method":"eth_getTransactionCount","params":["` + account + `","` + q.tag + `"]}`
		res, err := rpcResult(&probe)
		if err != nil {
			return n, fmt.Errorf("eth_getTransactionCount %s: %w", q.tag, err)
		}
		var s string
		if err := json.Unmarshal(res, &s); err != nil {
			return n, fmt.Errorf("eth_getTransactionCount %s: %s: %w", q.tag, res, err)
		}
		if *q.dst, err = hexutil.DecodeUint64(s); err != nil {
			return n, fmt.Errorf("eth_getTransactionCount %s: %s: %w", q.tag, res, err)
		}
	}
	probe := *t
	probe.body = `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`
	res, err := rpcResult(&probe)
	if err != nil {
		return n, fmt.Errorf("eth_blockNumber: %w", err)
	}
	var s string
	if err := json.Unmarshal(res, &s); err != nil {
		return n, fmt.Errorf("eth_blockNumber: %s: %w", res, err)
	}
	if n.block, err = hexutil.DecodeUint64(s); err != nil {
		return n, fmt.Errorf("eth_blockNumber: %s: %w", res, err)
	}
	c, err := scrapeAll(t)
	if err != nil {
		return n, err
	}
	n.ok = c.methods[okKey]
	return n, nil
}

// settle waits until the account's nonce at "latest" equals "pending" and neither nor
// web3gate's count of okKey calls has moved for settleQuiet; it returns that state and when
// it last moved, from the call. After settleTimeout it returns the last state read, and an
// error.
func settle(ctx context.Context, t *target, account, okKey string) (nonceState, time.Duration, error) {
	start := time.Now()
	var last nonceState
	changed := start
	for first := true; ; first = false {
		cur, err := readNonces(t, account, okKey)
		if err != nil {
			return last, 0, err
		}
		now := time.Now()
		if first || cur != last {
			last, changed = cur, now
		}
		if cur.latest == cur.pending && now.Sub(changed) >= settleQuiet {
			return cur, changed.Sub(start), nil
		}
		if now.Sub(start) > settleTimeout {
			return cur, now.Sub(start), fmt.Errorf("the chain did not settle within %v: nonce %d at latest, %d pending, last change %v ago",
				settleTimeout, cur.latest, cur.pending, now.Sub(changed).Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return cur, 0, ctx.Err()
		case <-time.After(settlePoll):
		}
	}
}

// quiet waits until web3gate's count of okKey calls has not moved for settleQuiet, bounded
// by settleTimeout.
func quiet(ctx context.Context, t *target, okKey string) error {
	start := time.Now()
	last, changed := -1.0, start
	for {
		c, err := scrapeAll(t)
		if err != nil {
			return err
		}
		now := time.Now()
		if v := c.methods[okKey]; v != last {
			last, changed = v, now
		}
		if now.Sub(changed) >= settleQuiet {
			return nil
		}
		if now.Sub(start) > settleTimeout {
			return fmt.Errorf("web3gate was still answering %s %v after the load", okKey, settleTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(settlePoll):
		}
	}
}
