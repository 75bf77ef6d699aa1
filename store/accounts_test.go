package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

func TestAccountRoundTrip(t *testing.T) { forEachBackend(t, testAccountRoundTrip) }

func testAccountRoundTrip(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	want := Account{Address: common.HexToAddress("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"), Owner: "alice",
		Source: SourceKeystore, CreatedAt: time.Date(2025, 6, 7, 8, 9, 10, 123456789, time.FixedZone("CEST", 2*3600))}
	if err := db.AddAccount(ctx, want); err != nil {
		t.Fatalf("AddAccount: %v", err)
	}
	got, err := db.Account(ctx, want.Address)
	if err != nil {
		t.Fatalf("Account: %v", err)
	}
	if got.Address != want.Address || got.Owner != want.Owner || got.Source != want.Source ||
		!got.CreatedAt.Equal(want.CreatedAt) || got.CreatedAt.Location() != time.UTC {
		t.Fatalf("Account = %+v, want %+v (in UTC)", got, want)
	}
}

// TestAccountHardwareKeyRef: an account whose key is in a hardware backend keeps its key
// reference; a hardware account without one, or a keystore account with one, is refused.
func TestAccountHardwareKeyRef(t *testing.T) { forEachBackend(t, testAccountHardwareKeyRef) }

func testAccountHardwareKeyRef(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	hsm := Account{Address: common.HexToAddress("0x00000000000000000000000000000000000000a1"), Owner: "alice",
		Source: SourcePKCS11, KeyRef: "5f1c0a0b0c0d0e0f"}
	kms := Account{Address: common.HexToAddress("0x00000000000000000000000000000000000000a2"), Owner: "alice",
		Source: SourceAWSKMS, KeyRef: "arn:aws:kms:eu-west-1:111122223333:key/0b7c6f1e"}
	for _, a := range []Account{hsm, kms} {
		if err := db.AddAccount(ctx, a); err != nil {
			t.Fatalf("AddAccount(%s): %v", a.Source, err)
		}
		got, err := db.Account(ctx, a.Address)
		if err != nil || got.Source != a.Source || got.KeyRef != a.KeyRef {
			t.Fatalf("Account(%s) = %+v, %v; want source %s, key %s", a.Address.Hex(), got, err, a.Source, a.KeyRef)
		}
	}
	list, err := db.AccountsOf(ctx, "alice")
	if err != nil || len(list) != 2 || list[0].KeyRef == "" || list[1].KeyRef == "" {
		t.Fatalf("AccountsOf = %+v, %v", list, err)
	}
	for _, bad := range []Account{
		{Address: common.HexToAddress("0xb1"), Owner: "bob", Source: SourcePKCS11},
		{Address: common.HexToAddress("0xb2"), Owner: "bob", Source: SourceKeystore, KeyRef: "x"},
		{Address: common.HexToAddress("0xb3"), Owner: "bob", Source: "vault", KeyRef: "x"},
	} {
		if err := db.AddAccount(ctx, bad); err == nil {
			t.Errorf("AddAccount(%+v) accepted", bad)
		}
	}
}

// TestAccountAddressCase: an address given in any case is one account, stored lowercase.
func TestAccountAddressCase(t *testing.T) { forEachBackend(t, testAccountAddressCase) }

func testAccountAddressCase(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	const checksummed = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	if err := db.AddAccount(ctx, Account{Address: common.HexToAddress(checksummed), Owner: "alice", Source: SourceDev}); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{checksummed, strings.ToLower(checksummed), "0x" + strings.ToUpper(checksummed[2:])} {
		t.Run(in, func(t *testing.T) {
			got, err := db.Account(ctx, common.HexToAddress(in))
			if err != nil {
				t.Fatalf("Account(%s): %v", in, err)
			}
			if got.Address.Hex() != checksummed {
				t.Fatalf("Account(%s).Address = %s, want %s", in, got.Address.Hex(), checksummed)
			}
		})
	}
	var stored string
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		return dbtx.QueryRowContext(ctx, `SELECT address FROM accounts`).Scan(&stored)
	}); err != nil {
		t.Fatal(err)
	}
	if stored != strings.ToLower(checksummed) {
		t.Fatalf("stored address = %s, want lowercase", stored)
	}
	err := db.AddAccount(ctx, Account{Address: common.HexToAddress(strings.ToLower(checksummed)), Owner: "bob", Source: SourceDev})
	if !errors.Is(err, ErrExists) {
		t.Fatalf("AddAccount of the same address in lowercase = %v, want ErrExists", err)
	}
}

func TestAccountErrors(t *testing.T) { forEachBackend(t, testAccountErrors) }

func testAccountErrors(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	a := Account{Address: addrN(7), Owner: "alice", Source: SourceKeystore}
	if err := db.AddAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	t.Run("exists", func(t *testing.T) {
		err := db.AddAccount(ctx, Account{Address: addrN(7), Owner: "bob", Source: SourceDev})
		if !errors.Is(err, ErrExists) {
			t.Fatalf("AddAccount duplicate = %v, want ErrExists", err)
		}
		got, err := db.Account(ctx, addrN(7))
		if err != nil || got.Owner != "alice" {
			t.Fatalf("Account after a refused duplicate = %+v, %v; want alice's", got, err)
		}
	})
	t.Run("not found", func(t *testing.T) {
		_, err := db.Account(ctx, addrN(8))
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("Account unknown = %v, want ErrNotFound", err)
		}
		if !strings.Contains(err.Error(), addrN(8).Hex()) {
			t.Fatalf("error %q does not name the address", err)
		}
	})
}

func TestAddAccountRejects(t *testing.T) { forEachBackend(t, testAddAccountRejects) }

func testAddAccountRejects(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	for _, tc := range []struct {
		name string
		a    Account
		want string
	}{
		{"zero address", Account{Owner: "alice", Source: SourceDev}, "add account: address is the zero address"},
		{"no owner", Account{Address: addrN(1), Source: SourceDev}, "add account: owner is empty"},
		{"unknown source", Account{Address: addrN(1), Owner: "alice", Source: "ledger"}, `add account: unknown source "ledger"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := db.AddAccount(ctx, tc.a)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("AddAccount = %v, want %q", err, tc.want)
			}
		})
	}
	all, err := db.AllAccounts(ctx)
	if err != nil || len(all) != 0 {
		t.Fatalf("AllAccounts = %v, %v; want none", all, err)
	}
}

// TestAccountsOf: each owner sees only its own accounts, oldest first, ties by address.
func TestAccountsOf(t *testing.T) { forEachBackend(t, testAccountsOf) }

func testAccountsOf(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// Whole seconds next to fractions: text order of the stored times must be time order.
	for _, a := range []Account{
		{Address: addrN(3), Owner: "alice", Source: SourceKeystore, CreatedAt: t0.Add(time.Second)},
		{Address: addrN(1), Owner: "bob", Source: SourceDev, CreatedAt: t0},
		{Address: addrN(2), Owner: "alice", Source: SourceDev, CreatedAt: t0.Add(100 * time.Millisecond)},
		{Address: addrN(5), Owner: "alice", Source: SourceKeystore, CreatedAt: t0},
		{Address: addrN(4), Owner: "alice", Source: SourceKeystore, CreatedAt: t0},
	} {
		if err := db.AddAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		owner string
		want  []common.Address
	}{
		{"alice", []common.Address{addrN(4), addrN(5), addrN(2), addrN(3)}},
		{"bob", []common.Address{addrN(1)}},
		{"carol", nil},
		{"Alice", nil}, // principals are exact
	} {
		t.Run(tc.owner, func(t *testing.T) {
			got, err := db.AccountsOf(ctx, tc.owner)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("AccountsOf(%s) = %d accounts, want %d", tc.owner, len(got), len(tc.want))
			}
			for i, a := range got {
				if a.Address != tc.want[i] || a.Owner != tc.owner {
					t.Fatalf("AccountsOf(%s)[%d] = %s of %s, want %s", tc.owner, i, a.Address.Hex(), a.Owner, tc.want[i].Hex())
				}
			}
		})
	}
	all, err := db.AllAccounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []common.Address{addrN(1), addrN(4), addrN(5), addrN(2), addrN(3)}
	if len(all) != len(want) {
		t.Fatalf("AllAccounts = %d, want %d", len(all), len(want))
	}
	for i, a := range all {
		if a.Address != want[i] {
			t.Fatalf("AllAccounts[%d] = %s, want %s", i, a.Address.Hex(), want[i].Hex())
		}
	}
}
