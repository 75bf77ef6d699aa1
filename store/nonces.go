package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
)

// The nonce side of a reservation: the nonce head of each (chain, account), the next nonce
// never handed out, and what a reservation reads before it decides (a released slot to reuse,
// the in-flight count and cost kept by triggers). The transaction rows are in txs.go.

// NextNonce is the next nonce never handed out for (chainID, addr); ok is false when the
// account has no nonce head on that chain yet.
func (t *DBTx) NextNonce(ctx context.Context, chainID uint64, addr common.Address) (next uint64, ok bool, err error) {
	var n int64
	err = t.QueryRowContext(ctx, qNextNonce,
		int64(chainID), addressKey(addr)).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("next nonce: %w", err)
	}
	return uint64(n), true, nil
}

// RaiseNextNonce sets the nonce head of (chainID, addr) to next, creating it, unless it is
// higher already: a head never goes down, because lower nonces may have been handed out.
func (t *DBTx) RaiseNextNonce(ctx context.Context, chainID uint64, addr common.Address, next uint64) error {
	_, err := t.ExecContext(ctx, qRaiseNextNonce,
		int64(chainID), addressKey(addr), int64(next))
	if err != nil {
		return fmt.Errorf("raise next nonce: %w", err)
	}
	return nil
}

// MaxStoredNonce is the highest nonce of any recorded transaction of (chainID, addr), abandoned
// ones left out (they belong to a chain that started over); ok is false when there is none.
func (t *DBTx) MaxStoredNonce(ctx context.Context, chainID uint64, addr common.Address) (uint64, bool, error) {
	var n sql.NullInt64
	if err := t.QueryRowContext(ctx, qMaxStoredNonce,
		int64(chainID), addressKey(addr)).Scan(&n); err != nil {
		return 0, false, fmt.Errorf("max stored nonce: %w", err)
	}
	return uint64(n.Int64), n.Valid, nil
}

// ReusableSlot is the lowest released nonce of (chainID, addr) at or above minNonce that no
// live transaction holds (released, failed and abandoned ones hold none); ok is false when
// there is none.
func (t *DBTx) ReusableSlot(ctx context.Context, chainID uint64, addr common.Address, minNonce uint64) (uint64, bool, error) {
	var n int64
	err := t.QueryRowContext(ctx, qReusableSlot, int64(chainID), addressKey(addr), int64(minNonce)).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reusable slot: %w", err)
	}
	return uint64(n), true, nil
}

// InFlight is the number of transactions of (chainID, addr) in flight (reserved, signed,
// broadcast, handed_out: they may still take funds from the account) and the sum of
// their max costs: one row, kept by triggers (migration 0002).
func (t *DBTx) InFlight(ctx context.Context, chainID uint64, addr common.Address) (int, *big.Int, error) {
	var n int64
	var c [8]int64
	err := t.QueryRowContext(ctx, qInFlight,
		int64(chainID), addressKey(addr)).Scan(&n, &c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6], &c[7])
	if errors.Is(err, sql.ErrNoRows) {
		return 0, new(big.Int), nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("in flight: %w", err)
	}
	sum := new(big.Int)
	for i := 7; i >= 0; i-- {
		sum.Lsh(sum, 32)
		sum.Add(sum, big.NewInt(c[i]))
	}
	return int(n), sum, nil
}

// NonceState is what a nonce reservation reads of one account before it decides, in one
// statement (ReservationState).
type NonceState struct {
	Next     uint64   // the nonce head
	HasHead  bool     // false: the account has no nonce head yet (Next is 0)
	Released bool     // a released slot no live transaction holds exists (ReusableSlot finds one)
	InFlight int      // transactions in flight
	Cost     *big.Int // the sum of their max costs
}

// ReservationState reads the nonce head of (chainID, addr), whether a reusable slot exists
// and the in-flight count and cost, in one statement: what NextNonce, ReusableSlot and
// InFlight read one by one.
func (t *DBTx) ReservationState(ctx context.Context, chainID uint64, addr common.Address) (NonceState, error) {
	var (
		s    NonceState
		next sql.NullInt64
		n    sql.NullInt64
		c    [8]sql.NullInt64
	)
	a := addressKey(addr)
	err := t.QueryRowContext(ctx, qReservationState, int64(chainID), a, int64(chainID), a, int64(chainID), a).Scan(
		&next, &s.Released, &n, &c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6], &c[7])
	if err != nil {
		return s, fmt.Errorf("reservation state: %w", err)
	}
	s.Next, s.HasHead, s.InFlight = uint64(next.Int64), next.Valid, int(n.Int64)
	s.Cost = new(big.Int)
	for i := 7; i >= 0; i-- {
		s.Cost.Lsh(s.Cost, 32)
		s.Cost.Add(s.Cost, big.NewInt(c[i].Int64))
	}
	return s, nil
}

// LowerNextNonce moves the nonce head of (chainID, addr) from from down to to, only when it is
// at from: the nonces between were never handed out to anything else. It reports whether it
// moved.
func (t *DBTx) LowerNextNonce(ctx context.Context, chainID uint64, addr common.Address, from, to uint64) (bool, error) {
	res, err := t.ExecContext(ctx, qLowerNextNonce,
		int64(to), int64(chainID), addressKey(addr), int64(from))
	if err != nil {
		return false, fmt.Errorf("lower next nonce: %w", err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// Queries prepared once at Open (see prepared).
var (
	qNextNonce      = prepared(`SELECT next_nonce FROM nonce_heads WHERE chain_id = ? AND address = ?`)
	qRaiseNextNonce = prepared(`INSERT INTO nonce_heads (chain_id, address, next_nonce) VALUES (?, ?, ?)
		ON CONFLICT (chain_id, address) DO UPDATE SET next_nonce = CASE
			WHEN excluded.next_nonce > nonce_heads.next_nonce THEN excluded.next_nonce ELSE nonce_heads.next_nonce END`)
	qMaxStoredNonce = prepared(`SELECT MAX(nonce) FROM txs WHERE chain_id = ? AND address = ? AND state <> 'abandoned'`)
	qReusableSlot   = prepared(`SELECT r.nonce FROM txs r
		WHERE r.chain_id = ? AND r.address = ? AND r.state = 'released' AND r.nonce >= ?
		  AND NOT EXISTS (SELECT 1 FROM txs l WHERE l.chain_id = r.chain_id AND l.address = r.address
		                  AND l.nonce = r.nonce AND l.state NOT IN ('released', 'failed', 'abandoned')
		                  UNION ALL SELECT 1 FROM txs f WHERE f.chain_id = r.chain_id AND f.address = r.address
		                  AND f.nonce = r.nonce AND f.state = 'failed' AND f.block_hash IS NOT NULL)
		ORDER BY r.nonce LIMIT 1`)
	qInFlight         = prepared(`SELECT n, c0, c1, c2, c3, c4, c5, c6, c7 FROM inflight WHERE chain_id = ? AND address = ?`)
	qReservationState = prepared(`SELECT (SELECT next_nonce FROM nonce_heads WHERE chain_id = ? AND address = ?),
		EXISTS (SELECT 1 FROM txs r WHERE r.chain_id = ? AND r.address = ? AND r.state = 'released'
		          AND NOT EXISTS (SELECT 1 FROM txs l WHERE l.chain_id = r.chain_id AND l.address = r.address
		                          AND l.nonce = r.nonce AND l.state NOT IN ('released', 'failed', 'abandoned')
		                  UNION ALL SELECT 1 FROM txs f WHERE f.chain_id = r.chain_id AND f.address = r.address
		                  AND f.nonce = r.nonce AND f.state = 'failed' AND f.block_hash IS NOT NULL)),
		i.n, i.c0, i.c1, i.c2, i.c3, i.c4, i.c5, i.c6, i.c7
		FROM (SELECT 1 AS one) d LEFT JOIN inflight i ON i.chain_id = ? AND i.address = ?`)
	qLowerNextNonce = prepared(`UPDATE nonce_heads SET next_nonce = ? WHERE chain_id = ? AND address = ? AND next_nonce = ?`)
)
