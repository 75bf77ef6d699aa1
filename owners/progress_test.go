package owners

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/store"
)

// TestExpectProgress: a write of the index goes ahead only when the stored progress is where
// the indexer left it; another process having moved it (or dropped it) is errIndexMoved, on
// both backends.
func TestExpectProgress(t *testing.T) {
	for _, driver := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			db := openStore(t)
			if driver == store.DriverPostgres {
				sc := store.Config{Driver: store.DriverPostgres, DSN: testengine.Postgres(t)}
				sc.SetDefaults()
				var err error
				if db, err = store.Open(ctx, sc, store.Deps{}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
			}
			ix := &indexer{chainID: 5, scope: "s1", db: db}
			check := func(have bool, after uint64) error {
				return db.Write(ctx, func(tx *store.DBTx) error { return ix.expectProgress(ctx, tx, have, after) })
			}
			if err := check(false, 0); err != nil {
				t.Fatalf("nothing stored, nothing expected: %v", err)
			}
			if err := check(true, 9); !errors.Is(err, errIndexMoved) {
				t.Fatalf("nothing stored, block 9 expected: %v", err)
			}
			if err := db.Write(ctx, func(tx *store.DBTx) error {
				return tx.PutNFTIndexProgress(ctx, &store.NFTIndexProgress{ChainID: 5, Scope: "s1", Block: 9,
					Hash: common.HexToHash("0x9"), UpdatedAt: time.Now()})
			}); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				have  bool
				after uint64
				scope string
				moved bool
			}{{true, 9, "s1", false}, {true, 8, "s1", true}, {false, 0, "s1", true}, {true, 9, "s2", true}} {
				ix.scope = tc.scope
				if err := check(tc.have, tc.after); errors.Is(err, errIndexMoved) != tc.moved || (err != nil && !tc.moved) {
					t.Errorf("stored 9/s1, expected %v/%d/%s: %v, want moved %v", tc.have, tc.after, tc.scope, err, tc.moved)
				}
			}
		})
	}
}
