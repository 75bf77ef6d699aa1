package store

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
)

// populate fills db through the repositories: accounts, clients, keys, transactions in every
// state on two chains (nonce heads, in-flight sums), chain genesis, metadata, the owners
// index (balances, nft_minted, progress, blocks, undo), products under the sold rule and
// quota usage.
func populate(t *testing.T, db *DB) {
	t.Helper()
	ctx := context.Background()
	for i := range 3 {
		if err := db.AddAccount(ctx, Account{Address: addrN(100 + i), Owner: fmt.Sprintf("owner%d", i%2), Source: SourceKeystore}); err != nil {
			t.Fatal(err)
		}
		if err := db.AddKey(ctx, StoredKey{Address: addrN(100 + i), JSON: []byte(fmt.Sprintf(`{"address":"%d"}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	disabled := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, c := range []Client{
		{ID: "c1", SecretHash: "$argon2id$h1", Principal: "alice", Scopes: []string{"eth_sendTransaction", "accounts"}},
		{ID: "c2", SecretHash: "$argon2id$h2", Principal: "bob", DisabledAt: &disabled},
	} {
		if err := db.AddClient(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	chainRows(t, db, 5, addrN(100))
	chainRows(t, db, 6, addrN(101))
	addr := func(c byte) string { return "0x" + strings.Repeat(string(c), 40) }
	ten := int64(10)
	err := db.Write(ctx, func(dbtx *DBTx) error {
		// An endpoint of the transactions' principal: the mined change below writes an
		// event and a delivery.
		if err := dbtx.InsertWebhook(ctx, testWebhook("wh_1", "p", "https://hooks.example/")); err != nil {
			return err
		}
		// Transactions through the lifecycle calls, on a third account.
		r := testRecord(5, addrN(102), 0)
		r.Request, r.Filled, r.Error = []byte(`{"from":"x"}`), []string{"gas", "maxFeePerGas"}, ""
		if err := dbtx.InsertTx(ctx, r); err != nil {
			return err
		}
		if err := dbtx.SetSigned(ctx, r.ID, []byte{1, 2, 3}, common.HexToHash("0xabc"), StateSigned); err != nil {
			return err
		}
		if _, err := dbtx.SetMined(ctx, 5, common.HexToHash("0xabc"), 7, common.HexToHash("0xb7")); err != nil {
			return err
		}
		// A request with a bump (fee bumping, tx_versions), stuck.
		r3 := testRecord(5, addrN(102), 2)
		r3.FeeBump = FeeBumpAllow
		if err := dbtx.InsertTx(ctx, r3); err != nil {
			return err
		}
		if err := dbtx.SetSigned(ctx, r3.ID, []byte{5}, common.HexToHash("0xab3"), StateBroadcast); err != nil {
			return err
		}
		if err := dbtx.AddVersion(ctx, r3, &TxVersion{Kind: VersionBump, Fields: []byte(`{"b":1}`), MaxCost: big.NewInt(77),
			Raw: []byte{6}, Hash: common.HexToHash("0xab4")}); err != nil {
			return err
		}
		if err := dbtx.SetState(ctx, r3.ID, []string{StateBroadcast}, StateStuck, ""); err != nil {
			return err
		}
		r2 := testRecord(5, addrN(102), 1)
		if err := dbtx.InsertTx(ctx, r2); err != nil {
			return err
		}
		if err := dbtx.SetHandedOut(ctx, r2.ID, []byte{4}, common.HexToHash("0xdef"), time.Now().Add(time.Hour)); err != nil {
			return err
		}
		if err := dbtx.RaiseNextNonce(ctx, 5, addrN(102), 3); err != nil {
			return err
		}
		if err := dbtx.RecordChainGenesis(ctx, 5, common.HexToHash("0x5555")); err != nil {
			return err
		}
		for i, id := range []string{"", "0x1", "0xff"} {
			if err := dbtx.PutMetadata(ctx, &MetadataRecord{ChainID: 1, Address: addrN(200), TokenID: id,
				Body: []byte(fmt.Sprintf(`{"n":%d}`, i)), Failures: i, UpdatedAt: time.Now()}); err != nil {
				return err
			}
		}
		bal := []NFTBalance{
			balance(common.HexToAddress(addr('a')), "0x1", addrN(1), "0x1", StandardERC721),
			balance(common.HexToAddress(addr('b')), "0x10000", addrN(2), "0x5", StandardERC1155),
		}
		if err := dbtx.PutNFTBalances(ctx, 1, bal); err != nil {
			return err
		}
		if err := dbtx.AddNFTMinted(ctx, 1, common.HexToAddress(addr('a')), 12); err != nil {
			return err
		}
		if err := dbtx.AddNFTMinted(ctx, 137, common.HexToAddress(addr('d')), 3); err != nil {
			return err
		}
		if err := dbtx.PutNFTIndexProgress(ctx, &NFTIndexProgress{ChainID: 1, Scope: "s", Block: 9, Hash: common.HexToHash("0x99"), UpdatedAt: time.Now()}); err != nil {
			return err
		}
		if err := dbtx.PutNFTIndexBlocks(ctx, 1, []NFTIndexBlock{{Number: 8, Hash: common.HexToHash("0x88"), Undo: true}, {Number: 9, Hash: common.HexToHash("0x99")}}); err != nil {
			return err
		}
		prev := int64(4)
		owner := addrN(3)
		amount := uint256.NewInt(2)
		return dbtx.PutNFTUndo(ctx, 1, []NFTUndo{
			{Block: 8, Seq: 0, Kind: NFTUndoOwner, Contract: common.HexToAddress(addr('a')), ID: *uint256.NewInt(1), Owner: &owner},
			{Block: 8, Seq: 1, Kind: NFTUndoBalance, Contract: common.HexToAddress(addr('b')), ID: *uint256.NewInt(16), Owner: &owner, Amount: amount},
			{Block: 8, Seq: 2, Kind: NFTUndoMinted, Contract: common.HexToAddress(addr('a')), Minted: &prev},
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SetProductSoldScope(ctx, []IndexedNetwork{{Network: "mainnet", ChainID: 1},
		{Network: "polygon", ChainID: 137, Contracts: []string{addr('d')}}}); err != nil {
		t.Fatal(err)
	}
	err = db.Write(ctx, func(dbtx *DBTx) error {
		for _, r := range []*ProductRow{
			productRow("m-a", func(r *ProductRow) { r.TokenContract, r.TotalSold, r.TotalAvailable = addr('a'), 2, &ten }),
			productRow("p-d", func(r *ProductRow) { r.Network, r.TokenContract, r.TotalAvailable = "polygon", addr('d'), &ten }),
			productRow("b-x", func(r *ProductRow) {
				r.Network, r.TokenContract, r.TotalSold, r.Creator = "base", addr('a'), 4, "carol"
			}),
		} {
			if _, err := dbtx.PutProduct(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Write(ctx, func(dbtx *DBTx) error {
		day := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
		for _, k := range []UsageKey{{"c1", UsageDay, day}, {"c1", UsageMonth, day.AddDate(0, 0, -26)}, {"c2", UsageDay, day}} {
			if _, err := dbtx.AddUsage(ctx, k, 1234, day.Add(time.Hour)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dump is every row of table, each rendered as text (blobs in hex), sorted.
func dump(t *testing.T, db *DB, table string, cols []string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	err := db.Read(ctx, func(dbtx *DBTx) error {
		rows, err := dbtx.QueryContext(ctx, `SELECT `+strings.Join(cols, ", ")+` FROM `+table)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			parts := make([]string, len(vals))
			for i, v := range vals {
				switch v := v.(type) {
				case []byte:
					parts[i] = "x" + hex.EncodeToString(v)
				case nil:
					parts[i] = "NULL"
				default:
					parts[i] = fmt.Sprint(v)
				}
			}
			out = append(out, strings.Join(parts, "|"))
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func tableColumns(t *testing.T, db *DB, table string) []string {
	t.Helper()
	var cols []string
	err := db.Read(context.Background(), func(dbtx *DBTx) error {
		var err error
		cols, err = dbtx.strings(context.Background(), `SELECT column_name FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`, table)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return cols
}

// TestCopySQLiteToPostgres: a populated SQLite store copied into an empty PostgreSQL one has
// every row of every table, the same derived in-flight sums and sold figures, its txs ids,
// and the next transaction gets a new id.
func TestCopySQLiteToPostgres(t *testing.T) {
	ctx := context.Background()
	src := openBackend(t, sqliteBackend)
	populate(t, src)
	dst := openBackend(t, postgresBackend)
	counts, err := Copy(ctx, src, dst)
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if len(counts) != len(copyOrder) {
		t.Fatalf("counts %v, want one per table", counts)
	}
	for _, c := range counts {
		if c.Rows == 0 {
			t.Errorf("table %s: nothing copied (the test populates every table)", c.Table)
		}
	}
	for _, table := range append(slices.Clone(copyOrder), derivedTables...) {
		cols := tableColumns(t, dst, table)
		a, b := dump(t, src, table, cols), dump(t, dst, table, cols)
		if table == "inflight" {
			// SQLite keeps an account's row at zero after its last in-flight transaction.
			a = slices.DeleteFunc(a, func(s string) bool { return strings.HasSuffix(s, "|0|0|0|0|0|0|0|0|0") })
		}
		if !slices.Equal(a, b) {
			t.Errorf("table %s differs:\nsqlite   %q\npostgres %q", table, a, b)
		}
	}
	// The id sequence continues after the copied ids.
	var maxID int64
	if err := src.Read(ctx, func(dbtx *DBTx) error { return dbtx.QueryRowContext(ctx, `SELECT MAX(id) FROM txs`).Scan(&maxID) }); err != nil {
		t.Fatal(err)
	}
	r := testRecord(9, addrN(9), 0)
	if err := dst.Write(ctx, func(dbtx *DBTx) error { return dbtx.InsertTx(ctx, r) }); err != nil {
		t.Fatal(err)
	}
	if r.ID != maxID+1 {
		t.Fatalf("first id after the copy %d, want %d", r.ID, maxID+1)
	}
	// So do the webhook events' seq and the deliveries' ids: one change adds one of each,
	// numbered after the copied ones.
	queries := []string{`SELECT COUNT(*) FROM webhook_events`, `SELECT COUNT(*) FROM webhook_deliveries`,
		`SELECT MAX(seq) FROM webhook_events`, `SELECT MAX(id) FROM webhook_deliveries`}
	before := make([]int64, len(queries))
	for i, q := range queries {
		if err := dst.Read(ctx, func(dbtx *DBTx) error { return dbtx.QueryRowContext(ctx, q).Scan(&before[i]) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := dst.Write(ctx, func(dbtx *DBTx) error {
		if err := dbtx.SetSigned(ctx, r.ID, []byte{9}, common.HexToHash("0x999"), StateSigned); err != nil {
			return err
		}
		return dbtx.SetState(ctx, r.ID, []string{StateSigned}, StateBroadcast, "")
	}); err != nil {
		t.Fatal(err)
	}
	for i, q := range queries {
		var n int64
		if err := dst.Read(ctx, func(dbtx *DBTx) error { return dbtx.QueryRowContext(ctx, q).Scan(&n) }); err != nil {
			t.Fatal(err)
		}
		if before[i] == 0 || n != before[i]+1 {
			t.Errorf("%s after the copy and one change: %d, want %d (one more than the copy's, which has some)", q, n, before[i]+1)
		}
	}

	// A second copy into the same target is refused: it is not empty.
	if _, err := Copy(ctx, src, dst); err == nil || !strings.Contains(err.Error(), "the target is not empty") {
		t.Fatalf("copy into a non-empty target = %v", err)
	}
}

// TestCopyFailureLeavesTargetEmpty: a row PostgreSQL refuses (a NUL in a text, written into
// SQLite behind the store's back) fails the copy after the tables before it were copied; the
// target is left empty.
func TestCopyFailureLeavesTargetEmpty(t *testing.T) {
	ctx := context.Background()
	src := openBackend(t, sqliteBackend)
	populate(t, src)
	if err := src.Write(ctx, func(dbtx *DBTx) error {
		_, err := dbtx.ExecContext(ctx, `UPDATE txs SET principal = 'a' || char(0) || 'b' WHERE id = (SELECT MAX(id) FROM txs)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	dst := openBackend(t, postgresBackend)
	_, err := Copy(ctx, src, dst)
	if err == nil || !strings.Contains(err.Error(), "nothing copied") || !strings.Contains(err.Error(), "table txs") {
		t.Fatalf("Copy = %v, want a failure in table txs", err)
	}
	for _, table := range append(slices.Clone(copyOrder), derivedTables...) {
		if rows := dump(t, dst, table, []string{"1"}); len(rows) != 0 {
			t.Errorf("table %s has %d rows after the failed copy", table, len(rows))
		}
	}
}

// TestCopyRefusesOtherSchemaVersion: a source at another schema version than the binary's.
func TestCopyRefusesOtherSchemaVersion(t *testing.T) {
	src := openTest(t, testConfig(t), options{migrations: migrationsUpTo(t, 10)})
	dst := openBackend(t, postgresBackend)
	_, err := Copy(context.Background(), src, dst)
	if err == nil || !strings.Contains(err.Error(), "the source is at schema version 10") {
		t.Fatalf("Copy from version 10 = %v", err)
	}
}
