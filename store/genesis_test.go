package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// migrationsUpTo is the embedded SQLite migration set up to version last.
func migrationsUpTo(t *testing.T, last int) fstest.MapFS {
	t.Helper()
	migs, err := loadMigrations(sqliteDialect.migrations())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, m := range migs {
		if m.version <= last {
			files[fmt.Sprintf("%04d_%s.sql", m.version, m.name)] = m.sql
		}
	}
	return migrationSet(files)
}

// chainRows writes, on chain, one row of account addr per transaction state (nonce i for the
// i-th state), each with an idempotency key, and a nonce head past them. It returns the
// rows by state.
func chainRows(t *testing.T, db *DB, chain uint64, addr common.Address) map[string]*TxRecord {
	t.Helper()
	ctx := context.Background()
	states := []string{StateReserved, StateSigned, StateBroadcast, StateMined, StateConfirmed, StateFailed, StateHandedOut, StateReleased}
	out := map[string]*TxRecord{}
	err := db.Write(ctx, func(dbtx *DBTx) error {
		for i, st := range states {
			r := testRecord(chain, addr, uint64(i))
			r.IdempotencyKey = fmt.Sprintf("key-%d-%d", chain, i)
			r.State = st
			if st != StateReserved {
				r.Hash = common.BigToHash(big.NewInt(int64(chain*100 + uint64(i) + 1)))
				r.Raw = []byte{byte(i)}
			}
			if st == StateMined || st == StateConfirmed {
				r.BlockNumber, r.BlockHash = uint64(i), common.HexToHash("0xb1")
			}
			if err := insertV8(ctx, dbtx, r); err != nil {
				return err
			}
			if r.BlockNumber != 0 {
				if _, err := dbtx.ExecContext(ctx, `UPDATE txs SET block_number = ?, block_hash = ? WHERE id = ?`,
					int64(r.BlockNumber), hashKey(r.BlockHash), r.ID); err != nil {
					return err
				}
			}
			out[st] = r
		}
		return dbtx.RaiseNextNonce(ctx, chain, addr, uint64(len(states)))
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// inFlight is the in-flight count and cost of (chain, addr).
func inFlight(t *testing.T, db *DB, chain uint64, addr common.Address) (int, *big.Int) {
	t.Helper()
	ctx := context.Background()
	var n int
	var sum *big.Int
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		var err error
		n, sum, err = dbtx.InFlight(ctx, chain, addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n, sum
}

// v8Columns are the columns of txs at schema version 8, which every later version keeps.
var v8Columns = []string{"id", "chain_id", "address", "nonce", "principal", "kind", "state", "fields", "max_cost",
	"cost0", "cost1", "cost2", "cost3", "cost4", "cost5", "cost6", "cost7", "raw", "hash", "idempotency_key",
	"block_number", "block_hash", "error", "created_at", "updated_at", "expires_at"}

// insertV8 records r with the columns of schema version 8 only (InsertTx writes the newest
// schema's), and sets r.ID.
func insertV8(ctx context.Context, dbtx *DBTx, r *TxRecord) error {
	l, err := costLimbs(r.MaxCost)
	if err != nil {
		return err
	}
	var hash sql.NullString
	if r.HasHash() {
		hash = nullString(hashKey(r.Hash))
	}
	now := formatTime(time.Now())
	return dbtx.QueryRowContext(ctx, `INSERT INTO txs (`+strings.Join(v8Columns[1:], ", ")+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		int64(r.ChainID), addressKey(r.Address), int64(r.Nonce), r.Principal, r.Kind, r.State, string(r.Fields),
		r.MaxCost.String(), l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], r.Raw, hash, nullString(r.IdempotencyKey),
		nil, nil, nullString(r.Error), now, now, nil).Scan(&r.ID)
}

// allTxs are every row of txs, by id: the columns of schema version 8, quoted as SQL
// literals, so that any change of a value or of its type shows.
func allTxs(t *testing.T, db *DB) map[int64]string {
	t.Helper()
	ctx := context.Background()
	quoted := make([]string, len(v8Columns))
	for i, c := range v8Columns {
		quoted[i] = "quote(" + c + ")"
	}
	out := map[int64]string{}
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		rows, err := dbtx.QueryContext(ctx, `SELECT id, `+strings.Join(quoted, " || ',' || ")+` FROM txs`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var row string
			if err := rows.Scan(&id, &row); err != nil {
				return err
			}
			out[id] = row
		}
		return rows.Err()
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// schemaObjects are the names of the indexes and triggers on txs.
func schemaObjects(t *testing.T, db *DB) string {
	t.Helper()
	ctx := context.Background()
	var names []string
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		rows, err := dbtx.QueryContext(ctx, `SELECT type || ':' || name FROM sqlite_schema
			WHERE tbl_name = 'txs' AND type IN ('index', 'trigger') AND name NOT LIKE 'sqlite_%' ORDER BY type, name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				return err
			}
			names = append(names, n)
		}
		return rows.Err()
	}); err != nil {
		t.Fatal(err)
	}
	return strings.Join(names, " ")
}

// TestMigration0009KeepsTransactions: rebuilding txs for the abandoned state keeps every row
// as it was (ids, states, costs, keys), the in-flight counts, the indexes and the triggers;
// the new state is accepted, an unknown one still refused.
func TestMigration0009KeepsTransactions(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	addr := addrN(11)
	old := openTest(t, cfg, options{migrations: migrationsUpTo(t, 8)})
	if v := old.SchemaVersion(); v != 8 {
		t.Fatalf("schema version %d, want 8", v)
	}
	chainRows(t, old, 5, addr)
	chainRows(t, old, 6, addr)
	before := allTxs(t, old)
	objects := schemaObjects(t, old)
	n5, c5 := inFlight(t, old, 5, addr)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	db := openTest(t, cfg, options{})
	if v, want := db.SchemaVersion(), embeddedVersion(t); v != want || v < 9 {
		t.Fatalf("schema version %d, want %d (>= 9)", v, want)
	}
	after := allTxs(t, db)
	if len(after) != len(before) || len(before) != 16 {
		t.Fatalf("%d rows after the migration, %d before, want 16", len(after), len(before))
	}
	for id, b := range before {
		a := after[id]
		if a != b {
			t.Errorf("row %d changed:\n before %s\n after  %s", id, b, a)
		}
	}
	// 0015 adds an index and a trigger of its own (versions, the in-flight cost), 0016 the
	// webhook outbox's trigger on txs.
	if got := strings.NewReplacer(" index:txs_versioned", "", " trigger:txs_inflight_cost", "", " trigger:txs_webhook_event", "").Replace(schemaObjects(t, db)); got != objects {
		t.Errorf("indexes and triggers after the migration:\n %s\nbefore:\n %s", got, objects)
	}
	if n, c := inFlight(t, db, 5, addr); n != n5 || c.Cmp(c5) != 0 || n != 4 {
		t.Errorf("in flight after the migration %d costing %v, before %d costing %v (want 4)", n, c, n5, c5)
	}
	// The triggers still work on the rebuilt table, and the CHECK knows the new state only.
	err := db.Write(ctx, func(dbtx *DBTx) error {
		r := testRecord(5, addr, 100)
		if err := dbtx.InsertTx(ctx, r); err != nil {
			return err
		}
		if err := dbtx.SetState(ctx, r.ID, []string{StateReserved}, StateAbandoned, "x"); err != nil {
			return fmt.Errorf("abandoned refused: %w", err)
		}
		if err := dbtx.SetState(ctx, r.ID, []string{StateAbandoned}, "bogus", ""); err == nil {
			t.Error("the state bogus was accepted")
		}
		return dbtx.InsertTx(ctx, testRecord(5, addr, 101))
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := inFlight(t, db, 5, addr); n != 5 {
		t.Errorf("in flight %d after one row abandoned and one inserted, want 5", n)
	}
}

// TestAbandonChain: after AbandonChain every row of the chain is abandoned, whatever its
// state; none is in flight, open or reusable; the nonce heads are gone and the highest
// stored nonce ignores them, so a reservation starts again from the node's nonce; nonces and
// idempotency keys are free again. Another chain's rows are untouched.
func TestAbandonChain(t *testing.T) { forEachBackend(t, testAbandonChain) }

func testAbandonChain(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addr := addrN(12)
	rows := chainRows(t, db, 5, addr)
	chainRows(t, db, 6, addr)
	if n, _ := inFlight(t, db, 5, addr); n != 4 {
		t.Fatalf("in flight before %d, want 4", n)
	}

	var abandoned int64
	if err := db.Write(ctx, func(dbtx *DBTx) error {
		var err error
		abandoned, err = dbtx.AbandonChain(ctx, 5, "chain 5 started over")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if abandoned != 8 {
		t.Fatalf("abandoned %d rows, want 8", abandoned)
	}
	if n, c := inFlight(t, db, 5, addr); n != 0 || c.Sign() != 0 {
		t.Errorf("in flight after abandoning: %d costing %v", n, c)
	}
	if n, _ := inFlight(t, db, 6, addr); n != 4 {
		t.Errorf("chain 6 in flight %d, want 4 (untouched)", n)
	}
	err := db.Read(ctx, func(dbtx *DBTx) error {
		for st, r := range rows {
			got, err := dbtx.TxByID(ctx, r.ID)
			if err != nil {
				return err
			}
			if got.State != StateAbandoned || got.Error != "chain 5 started over (it was "+st+")" || got.IdempotencyKey != "" {
				t.Errorf("%s row after abandoning: state %s, error %q, key %q", st, got.State, got.Error, got.IdempotencyKey)
			}
		}
		if _, ok, err := dbtx.NextNonce(ctx, 5, addr); err != nil || ok {
			t.Errorf("nonce head of chain 5 still there (%v)", err)
		}
		if next, ok, err := dbtx.NextNonce(ctx, 6, addr); err != nil || !ok || next != 8 {
			t.Errorf("nonce head of chain 6: %d %v %v, want 8", next, ok, err)
		}
		if m, ok, err := dbtx.MaxStoredNonce(ctx, 5, addr); err != nil || ok {
			t.Errorf("max stored nonce of chain 5: %d %v %v, want none", m, ok, err)
		}
		if s, ok, err := dbtx.ReusableSlot(ctx, 5, addr, 0); err != nil || ok {
			t.Errorf("reusable slot of chain 5: %d %v %v, want none (the released row is abandoned)", s, ok, err)
		}
		if open, err := dbtx.HasOpenTxs(ctx, 5); err != nil || open {
			t.Errorf("chain 5 has open rows: %v %v", open, err)
		}
		if stale, err := dbtx.StaleTxs(ctx, 5, []string{StateReserved, StateSigned, StateBroadcast}, rows[StateBroadcast].UpdatedAt.Add(1e12), 10); err != nil || len(stale) != 0 {
			t.Errorf("rows for recovery on chain 5: %d (%v)", len(stale), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A new row takes nonce 0 again, with a key an abandoned row had; a mined hash an
	// abandoned row shares moves the new row only; the status lookup answers the new one.
	again := testRecord(5, addr, 0)
	again.IdempotencyKey = rows[StateReserved].IdempotencyKey
	shared := rows[StateBroadcast].Hash
	err = db.Write(ctx, func(dbtx *DBTx) error {
		if err := dbtx.InsertTx(ctx, again); err != nil {
			return fmt.Errorf("nonce 0 after abandoning: %w", err)
		}
		if err := dbtx.SetSigned(ctx, again.ID, []byte{9}, shared, StateBroadcast); err != nil {
			return err
		}
		n, err := dbtx.SetMined(ctx, 5, shared, 1, common.HexToHash("0xb2"))
		if err != nil || n != 1 {
			t.Errorf("SetMined moved %d rows (%v), want 1: the new one", n, err)
		}
		recs, err := dbtx.TxsByHash(ctx, shared)
		if err != nil || len(recs) != 2 || recs[0].ID != again.ID || recs[0].State != StateMined || recs[1].State != StateAbandoned {
			t.Errorf("rows by the shared hash: %+v %v", recs, err)
		}
		// A slot released on the new chain is reusable though an abandoned row has its nonce.
		released := testRecord(5, addr, 1)
		released.Kind, released.State = KindSign, StateReleased
		if err := dbtx.InsertTx(ctx, released); err != nil {
			return err
		}
		if s, ok, err := dbtx.ReusableSlot(ctx, 5, addr, 0); err != nil || !ok || s != 1 {
			t.Errorf("reusable slot %d %v %v, want 1", s, ok, err)
		}
		// Abandoning again touches nothing abandoned already.
		n, err = dbtx.AbandonChain(ctx, 5, "again")
		if err != nil || n != 2 {
			t.Errorf("second AbandonChain: %d rows (%v), want 2 (the new rows)", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.RaiseNextNonce(ctx, 5, addr, 3) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, func(dbtx *DBTx) error { _, err := dbtx.AbandonChain(ctx, 5, "x"); return err }); err != nil {
		t.Fatal(err)
	}
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		_, ok, err := dbtx.NextNonce(ctx, 5, addr)
		if ok {
			return errors.New("a nonce head survived AbandonChain on a chain whose rows were all abandoned")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestChainGenesisRecord: none recorded, recorded, replaced; per chain.
func TestChainGenesisRecord(t *testing.T) { forEachBackend(t, testChainGenesisRecord) }

func testChainGenesisRecord(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	a, b := common.HexToHash("0xA1"), common.HexToHash("0xB2")
	read := func(chain uint64) (common.Hash, bool) {
		t.Helper()
		var h common.Hash
		var ok bool
		if err := db.Read(ctx, func(dbtx *DBTx) error {
			var err error
			h, ok, err = dbtx.ChainGenesis(ctx, chain)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return h, ok
	}
	if _, ok := read(1); ok {
		t.Fatal("a genesis recorded on a new store")
	}
	for _, h := range []common.Hash{a, b} {
		if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.RecordChainGenesis(ctx, 1, h) }); err != nil {
			t.Fatal(err)
		}
		if got, ok := read(1); !ok || got != h {
			t.Fatalf("genesis of chain 1 = %s %v, want %s", got.Hex(), ok, h.Hex())
		}
	}
	if _, ok := read(2); ok {
		t.Fatal("chain 2 has the genesis of chain 1")
	}
}
