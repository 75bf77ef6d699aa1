package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestInvalidText: text with a NUL or invalid UTF-8 is refused (ErrInvalidText) or, in a
// transaction's error, cleaned, and a lookup by it finds nothing: the same on both backends
// (PostgreSQL would refuse such text with an error of its own; SQLite would store it).
func TestInvalidText(t *testing.T) { forEachBackend(t, testInvalidText) }

func testInvalidText(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	bad := []string{"a\x00b", "\xff", "ok\xc3"}
	for _, s := range bad {
		if err := db.AddAccount(ctx, Account{Address: addrN(1), Owner: s, Source: SourceDev}); !errors.Is(err, ErrInvalidText) {
			t.Errorf("AddAccount(owner %q) = %v, want ErrInvalidText", s, err)
		}
		if got, err := db.AccountsOf(ctx, s); err != nil || len(got) != 0 {
			t.Errorf("AccountsOf(%q) = %v, %v, want none", s, got, err)
		}
		if err := db.AddClient(ctx, Client{ID: s, SecretHash: "h", Principal: "p"}); !errors.Is(err, ErrInvalidText) {
			t.Errorf("AddClient(id %q) = %v, want ErrInvalidText", s, err)
		}
		if err := db.AddClient(ctx, Client{ID: "c", SecretHash: "h", Principal: s}); !errors.Is(err, ErrInvalidText) {
			t.Errorf("AddClient(principal %q) = %v, want ErrInvalidText", s, err)
		}
		if _, err := db.Client(ctx, s); !errors.Is(err, ErrNotFound) {
			t.Errorf("Client(%q) = %v, want ErrNotFound", s, err)
		}
		if _, err := db.DisableClient(ctx, s, time.Now()); !errors.Is(err, ErrNotFound) {
			t.Errorf("DisableClient(%q) = %v, want ErrNotFound", s, err)
		}
		if err := db.AddKey(ctx, StoredKey{Address: addrN(1), JSON: []byte(`{"x":"` + s + `"}`)}); !errors.Is(err, ErrInvalidText) {
			t.Errorf("AddKey(%q) = %v, want ErrInvalidText", s, err)
		}
		err := db.Write(ctx, func(dbtx *DBTx) error {
			r := testRecord(1, addrN(1), 0)
			r.Principal = s
			if err := dbtx.InsertTx(ctx, r); !errors.Is(err, ErrInvalidText) {
				t.Errorf("InsertTx(principal %q) = %v, want ErrInvalidText", s, err)
			}
			if _, err := dbtx.TxByIdempotencyKey(ctx, s, "k"); !errors.Is(err, ErrNotFound) {
				t.Errorf("TxByIdempotencyKey(%q) = %v, want ErrNotFound", s, err)
			}
			p := productRow("00000000-0000-0000-0000-000000000001", func(r *ProductRow) { r.Creator = s })
			if _, err := dbtx.PutProduct(ctx, p); !errors.Is(err, ErrInvalidText) {
				t.Errorf("PutProduct(creator %q) = %v, want ErrInvalidText", s, err)
			}
			if _, err := dbtx.Product(ctx, s); !errors.Is(err, ErrNotFound) {
				t.Errorf("Product(%q) = %v, want ErrNotFound", s, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := db.Products(ctx, ProductFilter{Creator: s, Limit: 10}); err != nil || len(got) != 0 {
			t.Errorf("Products(creator %q) = %v, %v, want none", s, got, err)
		}
	}

	// A node's message with a NUL and a stray byte: stored, with U+FFFD in their place.
	var id int64
	err := db.Write(ctx, func(dbtx *DBTx) error {
		r := testRecord(1, addrN(2), 0)
		if err := dbtx.InsertTx(ctx, r); err != nil {
			return err
		}
		id = r.ID
		return dbtx.SetState(ctx, id, []string{StateReserved}, StateFailed, "rejected: \x00 bad \xff end")
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Read(ctx, func(dbtx *DBTx) error {
		r, err := dbtx.TxByID(ctx, id)
		if err != nil {
			return err
		}
		if want := "rejected: \uFFFD bad \uFFFD end"; r.Error != want {
			t.Errorf("stored error %q, want %q", r.Error, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
