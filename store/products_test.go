package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestProductsFilterAndOrder(t *testing.T) {
	db := openTest(t, testConfig(t), options{})
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(h int) *time.Time { v := now.Add(time.Duration(h) * time.Hour); return &v }
	ten := int64(10)
	rows := []ProductRow{
		{ID: "p1", Creator: "alice", SaleType: "LIMITED_EDITION", TotalSold: 10, TotalAvailable: &ten, LiveAt: at(-5)},
		{ID: "p2", Creator: "alice", SaleType: "OPEN_EDITION", TotalSold: 99, LiveAt: at(-1)},
		{ID: "p3", Creator: "bob", SaleType: "ON_CHAIN_AUCTION", TotalSold: 1, TotalAvailable: &ten, LiveAt: at(-1)},
		{ID: "p4", Creator: "bob", SaleType: "OFF_CHAIN_AUCTION", LiveAt: at(+2)},                   // upcoming
		{ID: "p5", Creator: "bob", SaleType: "LIMITED_EDITION", LiveAt: at(-9), SalesEndAt: at(-3)}, // ended
		{ID: "p6", SaleType: "OPEN_EDITION"}, // never scheduled
	}
	err := db.Write(ctx, func(tx *Tx) error {
		for i := range rows {
			r := rows[i]
			r.ID = fmt.Sprintf("%-36s", r.ID) // the schema wants a UUID's length
			r.Network, r.TokenContract, r.CreatedAt = "mainnet", "0x"+strings.Repeat("a", 40), now
			r.Body = []byte(`{"id":"` + strings.TrimSpace(r.ID) + `"}`)
			if err := tx.UpsertProduct(ctx, &r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	list := func(f ProductFilter) string {
		t.Helper()
		if f.Limit == 0 {
			f.Limit = 20
		}
		f.LiveAt = now
		var out [][]byte
		if err := db.Read(ctx, func(tx *Tx) error {
			var err error
			out, err = tx.Products(ctx, f)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, b := range out {
			ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(string(b), `{"id":"`), `"}`))
		}
		return strings.Join(ids, ",")
	}
	yes, no := true, false
	for _, c := range []struct {
		name string
		f    ProductFilter
		want string
	}{
		{"live, newest first, ties by id", ProductFilter{}, "p2,p3,p1"},
		{"creator", ProductFilter{Creator: "bob"}, "p3"},
		{"sale types", ProductFilter{SaleTypes: []string{"LIMITED_EDITION", "OPEN_EDITION"}}, "p2,p1"},
		{"sold", ProductFilter{Sold: &yes}, "p1"},
		{"not sold", ProductFilter{Sold: &no}, "p2,p3"},
		{"upcoming included", ProductFilter{IncludeUpcoming: true}, "p4,p2,p3,p1"},
		{"limit and offset", ProductFilter{Limit: 1, Offset: 1}, "p3"},
	} {
		if got := list(c.f); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}

	// Delete removes one product; deleting it again is ErrNotFound.
	p2 := fmt.Sprintf("%-36s", "p2")
	for _, want := range []error{nil, ErrNotFound} {
		if err := db.Write(ctx, func(tx *Tx) error { return tx.DeleteProduct(ctx, p2) }); !errors.Is(err, want) {
			t.Fatalf("DeleteProduct = %v, want %v", err, want)
		}
	}
	if got := list(ProductFilter{}); got != "p3,p1" {
		t.Errorf("after deleting p2: %s", got)
	}
}
