package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

func TestKeyRoundTrip(t *testing.T) { forEachBackend(t, testKeyRoundTrip) }

func testKeyRoundTrip(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	if has, err := db.HasKeys(ctx); has || err != nil {
		t.Fatalf("HasKeys on a new store = %v, %v; want false, nil", has, err)
	}
	a := StoredKey{Address: common.HexToAddress("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"), JSON: []byte(`{"version":3}`),
		CreatedAt: time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)}
	b := StoredKey{Address: common.HexToAddress("0x00000000000000000000000000000000000000b0"), JSON: []byte(`{"version":3,"id":"b"}`),
		CreatedAt: a.CreatedAt.Add(-time.Hour)}
	for _, k := range []StoredKey{a, b} {
		if err := db.AddKey(ctx, k); err != nil {
			t.Fatalf("AddKey(%s): %v", k.Address, err)
		}
	}
	got, err := db.Key(ctx, a.Address)
	if err != nil {
		t.Fatalf("Key: %v", err)
	}
	if got.Address != a.Address || string(got.JSON) != string(a.JSON) || !got.CreatedAt.Equal(a.CreatedAt) {
		t.Fatalf("Key = %+v, want %+v", got, a)
	}
	all, err := db.AllKeys(ctx)
	if err != nil {
		t.Fatalf("AllKeys: %v", err)
	}
	if len(all) != 2 || all[0].Address != b.Address || all[1].Address != a.Address {
		t.Fatalf("AllKeys = %+v, want b then a (oldest first)", all)
	}
	if has, err := db.HasKeys(ctx); !has || err != nil {
		t.Fatalf("HasKeys = %v, %v; want true, nil", has, err)
	}
	var stored string
	err = db.Read(ctx, func(dbtx *DBTx) error {
		return dbtx.QueryRowContext(ctx, `SELECT address FROM account_keys WHERE key_json = ?`, string(a.JSON)).Scan(&stored)
	})
	if err != nil || stored != "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" {
		t.Fatalf("stored address = %q, %v; want lowercase hex", stored, err)
	}
}

func TestKeyErrors(t *testing.T) { forEachBackend(t, testKeyErrors) }

func testKeyErrors(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addr := common.HexToAddress("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed")
	if _, err := db.Key(ctx, addr); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Key of a missing address: %v, want ErrNotFound", err)
	}
	if err := db.AddKey(ctx, StoredKey{Address: addr, JSON: []byte(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddKey(ctx, StoredKey{Address: addr, JSON: []byte(`{"a":2}`)}); !errors.Is(err, ErrExists) {
		t.Fatalf("second AddKey of one address: %v, want ErrExists", err)
	}
	got, err := db.Key(ctx, addr)
	if err != nil || string(got.JSON) != `{"a":1}` {
		t.Fatalf("Key after a refused second AddKey = %s, %v; want the first", got.JSON, err)
	}
	for _, tc := range []struct {
		name string
		k    StoredKey
	}{
		{"zero address", StoredKey{JSON: []byte(`{}`)}},
		{"no JSON", StoredKey{Address: common.HexToAddress("0x01")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := db.AddKey(ctx, tc.k); err == nil {
				t.Fatal("AddKey accepted it")
			}
		})
	}
	// The table refuses an address that is not lowercase hex, whoever writes it.
	err = db.Write(ctx, func(dbtx *DBTx) error {
		_, err := dbtx.ExecContext(ctx, `INSERT INTO account_keys (address, key_json, created_at) VALUES (?, '{}', '2025-01-01T00:00:00.000000000Z')`,
			"0x5AAEB6053F3E94C9B9A09F33669435E7EF1BEAED")
		return err
	})
	if err == nil {
		t.Fatal("an upper-case address was stored")
	}
}
