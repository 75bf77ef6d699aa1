package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestProductsFilterAndOrder(t *testing.T) { forEachBackend(t, testProductsFilterAndOrder) }

func testProductsFilterAndOrder(t *testing.T, be backend) {
	db := openBackend(t, be)
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
	err := db.Write(ctx, func(dbtx *DBTx) error {
		for i := range rows {
			r := rows[i]
			r.ID = fmt.Sprintf("%-36s", r.ID) // the schema wants a UUID's length
			r.Network, r.TokenContract, r.CreatedAt = "mainnet", "0x"+strings.Repeat("a", 40), now
			r.Body = []byte(`{"id":"` + strings.TrimSpace(r.ID) + `"}`)
			if _, err := dbtx.PutProduct(ctx, &r); err != nil {
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
		out, err := db.Products(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range out {
			ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(string(p.Body), `{"id":"`), `"}`))
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
		if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.DeleteProduct(ctx, p2) }); !errors.Is(err, want) {
			t.Fatalf("DeleteProduct = %v, want %v", err, want)
		}
	}
	if got := list(ProductFilter{}); got != "p3,p1" {
		t.Errorf("after deleting p2: %s", got)
	}
}

// productRow is a valid row for the schema: id padded to a UUID's length.
func productRow(id string, mod func(r *ProductRow)) *ProductRow {
	live := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	r := &ProductRow{ID: fmt.Sprintf("%-36s", id), Network: "mainnet", TokenContract: "0x" + strings.Repeat("a", 40),
		SaleType: "OPEN_EDITION", LiveAt: &live, CreatedAt: live, Body: []byte(`{"id":"` + id + `"}`)}
	if mod != nil {
		mod(r)
	}
	return r
}

func TestPutInsertGetProduct(t *testing.T) { forEachBackend(t, testPutInsertGetProduct) }

func testPutInsertGetProduct(t *testing.T, be backend) {
	db := openBackend(t, be)
	ctx := context.Background()
	put := func(r *ProductRow) PutResult {
		t.Helper()
		var res PutResult
		if err := db.Write(ctx, func(dbtx *DBTx) error {
			var err error
			res, err = dbtx.PutProduct(ctx, r)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return res
	}
	body := func(id string) (string, error) {
		var b []byte
		err := db.Read(ctx, func(dbtx *DBTx) error {
			var err error
			b, err = dbtx.Product(ctx, fmt.Sprintf("%-36s", id))
			return err
		})
		return string(b), err
	}
	if got := put(productRow("p1", nil)); got != Inserted {
		t.Errorf("first put = %v, want Inserted", got)
	}
	if got := put(productRow("p1", nil)); got != Unchanged {
		t.Errorf("same put = %v, want Unchanged", got)
	}
	changed := productRow("p1", func(r *ProductRow) { r.Body, r.TotalSold = []byte(`{"id":"p1","v":2}`), 7 })
	if got := put(changed); got != Updated {
		t.Errorf("changed put = %v, want Updated", got)
	}
	if b, err := body("p1"); err != nil || b != `{"id":"p1","v":2}` {
		t.Errorf("Product(p1) = %s, %v", b, err)
	}
	if _, err := body("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Product(nope) = %v, want ErrNotFound", err)
	}
	err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.InsertProduct(ctx, productRow("p1", nil)) })
	if !errors.Is(err, ErrExists) {
		t.Errorf("InsertProduct of an existing id = %v, want ErrExists", err)
	}
	if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.InsertProduct(ctx, productRow("p2", nil)) }); err != nil {
		t.Fatal(err)
	}
	if b, err := body("p2"); err != nil || b != `{"id":"p2"}` {
		t.Errorf("Product(p2) = %s, %v", b, err)
	}
}

// TestChainSold: products of an indexed network (and contract) count nft_minted as sold, in
// the figure returned and in the sold filter, the others keep their stored figure; the
// triggers of 0008 keep that true through writes of nft_minted and of products, and a scope
// change recomputes everything.
func TestChainSold(t *testing.T) { forEachBackend(t, testChainSold) }

func testChainSold(t *testing.T, be backend) {
	db := openBackend(t, be)
	ctx := context.Background()
	addr := func(c byte) string { return "0x" + strings.Repeat(string(c), 40) }
	ten := int64(10)
	rows := []*ProductRow{
		// mainnet (chain 1) is indexed whole.
		productRow("m-minted-out", func(r *ProductRow) { r.TokenContract, r.TotalSold, r.TotalAvailable = addr('a'), 2, &ten }),
		productRow("m-minted-few", func(r *ProductRow) { r.TokenContract, r.TotalSold, r.TotalAvailable = addr('b'), 10, &ten }),
		productRow("m-no-row", func(r *ProductRow) { r.TokenContract, r.TotalSold, r.TotalAvailable = addr('c'), 10, &ten }),
		// polygon (chain 137): only contract d is indexed.
		productRow("p-indexed", func(r *ProductRow) {
			r.Network, r.TokenContract, r.TotalSold, r.TotalAvailable = "polygon", addr('d'), 0, &ten
		}),
		productRow("p-not-indexed", func(r *ProductRow) {
			r.Network, r.TokenContract, r.TotalSold, r.TotalAvailable = "polygon", addr('e'), 10, &ten
		}),
		// base is not indexed at all, though its chain has rows.
		productRow("b-not-indexed", func(r *ProductRow) { r.Network, r.TokenContract, r.TotalSold = "base", addr('a'), 4 }),
	}
	if err := db.Write(ctx, func(dbtx *DBTx) error {
		for _, r := range rows {
			if _, err := dbtx.PutProduct(ctx, r); err != nil {
				return err
			}
		}
		for _, m := range []struct {
			chain    int
			contract string
			minted   int64
		}{{1, addr('a'), 12}, {1, addr('b'), 3}, {137, addr('d'), 10}, {137, addr('e'), 1}, {8453, addr('a'), 99}} {
			if _, err := dbtx.ExecContext(ctx, `INSERT INTO nft_minted (chain_id, contract, minted) VALUES (?, ?, ?)`, m.chain, m.contract, m.minted); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	scope := []IndexedNetwork{{Network: "mainnet", ChainID: 1}, {Network: "polygon", ChainID: 137, Contracts: []string{addr('d')}}}
	setScope := func(scope []IndexedNetwork, want bool) {
		t.Helper()
		if changed, err := db.SetProductSoldScope(ctx, scope); err != nil || changed != want {
			t.Fatalf("SetProductSoldScope = %v, %v; want %v", changed, err, want)
		}
	}
	write := func(f func(dbtx *DBTx) error) {
		t.Helper()
		if err := db.Write(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	list := func(f ProductFilter) string {
		t.Helper()
		f.Limit, f.LiveAt = 20, time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
		out, err := db.Products(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, p := range out {
			_, id, _ := strings.Cut(string(p.Body), `{"id":"`)
			id, _, _ = strings.Cut(id, `"`)
			parts = append(parts, fmt.Sprintf("%s=%d/%d", id, p.Sold, p.StoredSold))
		}
		return strings.Join(parts, " ")
	}
	yes, no := true, false
	check := func(step string, cases ...struct {
		f    ProductFilter
		want string
	}) {
		t.Helper()
		for _, c := range cases {
			if got := list(c.f); got != c.want {
				t.Errorf("%s, %+v:\n got %s\nwant %s", step, c.f, got, c.want)
			}
		}
	}
	type tc = struct {
		f    ProductFilter
		want string
	}
	stored := "b-not-indexed=4/4 m-minted-few=10/10 m-minted-out=2/2 m-no-row=10/10 p-indexed=0/0 p-not-indexed=10/10"
	check("no scope yet", tc{ProductFilter{}, stored})

	setScope(scope, true)
	check("in scope",
		tc{ProductFilter{}, "b-not-indexed=4/4 m-minted-few=3/10 m-minted-out=12/2 m-no-row=0/10 p-indexed=10/0 p-not-indexed=10/10"},
		tc{ProductFilter{Sold: &yes}, "m-minted-out=12/2 p-indexed=10/0 p-not-indexed=10/10"},
		tc{ProductFilter{Sold: &no}, "b-not-indexed=4/4 m-minted-few=3/10 m-no-row=0/10"},
		tc{ProductFilter{Sold: &yes, Offset: 1}, "p-indexed=10/0 p-not-indexed=10/10"})
	setScope(scope, false) // the same scope again: nothing to recompute

	// The triggers: the indexer's writes of nft_minted move the products of the contract...
	write(func(dbtx *DBTx) error {
		if _, err := dbtx.ExecContext(ctx, `UPDATE nft_minted SET minted = 1 WHERE chain_id = 1 AND contract = ?`, addr('a')); err != nil {
			return err
		}
		if _, err := dbtx.ExecContext(ctx, `DELETE FROM nft_minted WHERE chain_id = 137 AND contract = ?`, addr('d')); err != nil {
			return err
		}
		_, err := dbtx.ExecContext(ctx, `INSERT INTO nft_minted (chain_id, contract, minted) VALUES (1, ?, 10)`, addr('c'))
		return err
	})
	check("after mints",
		tc{ProductFilter{}, "b-not-indexed=4/4 m-minted-few=3/10 m-minted-out=1/2 m-no-row=10/10 p-indexed=0/0 p-not-indexed=10/10"},
		tc{ProductFilter{Sold: &yes}, "m-no-row=10/10 p-not-indexed=10/10"})
	// ... and a product written (import, admin API) takes its figure at once.
	write(func(dbtx *DBTx) error {
		r := productRow("m-new", func(r *ProductRow) { r.TokenContract, r.TotalSold, r.TotalAvailable = addr('b'), 0, &ten })
		if _, err := dbtx.PutProduct(ctx, r); err != nil {
			return err
		}
		r = productRow("p-not-indexed", func(r *ProductRow) {
			r.Network, r.TokenContract, r.TotalSold, r.TotalAvailable = "polygon", addr('d'), 10, &ten // moves into scope
			r.Body = []byte(`{"id":"p-not-indexed","tokenContractAddress":"` + addr('d') + `"}`)
		})
		_, err := dbtx.PutProduct(ctx, r)
		return err
	})
	check("after writes",
		tc{ProductFilter{Sold: &no}, "b-not-indexed=4/4 m-minted-few=3/10 m-minted-out=1/2 m-new=3/0 p-indexed=0/0 p-not-indexed=0/10"})

	setScope(nil, true)
	check("out of scope", tc{ProductFilter{}, "b-not-indexed=4/4 m-minted-few=10/10 m-minted-out=2/2 m-new=0/0 m-no-row=10/10 p-indexed=0/0 p-not-indexed=10/10"})
}

// TestProductsQueryPlans: every shape of the list walks an index in the list's order,
// never sorting (EXPLAIN QUERY PLAN); sold=true walks the sold-out products alone.
func TestProductsQueryPlans(t *testing.T) {
	db := openTest(t, testConfig(t), options{})
	yes, no := true, false
	for _, c := range []struct {
		name string
		f    ProductFilter
		want string
	}{
		{"no filter", ProductFilter{}, "products_live (live_at<?)"},
		{"upcoming", ProductFilter{IncludeUpcoming: true}, "products_live (live_at>?)"},
		{"creator", ProductFilter{Creator: "a"}, "products_creator_live (creator=? AND live_at<?)"},
		{"one sale type", ProductFilter{SaleTypes: []string{"OPEN_EDITION"}}, "products_sale_live (sale_type=? AND live_at<?)"},
		{"two sale types", ProductFilter{SaleTypes: []string{"OPEN_EDITION", "LIMITED_EDITION"}}, "products_live (live_at<?)"},
		{"creator and sale type", ProductFilter{Creator: "a", SaleTypes: []string{"OPEN_EDITION"}}, "products_creator_live (creator=? AND live_at<?)"},
		{"creator, types, upcoming", ProductFilter{Creator: "a", SaleTypes: []string{"OPEN_EDITION", "ON_CHAIN_AUCTION"}, IncludeUpcoming: true}, "products_creator_live (creator=? AND live_at>?)"},
		{"sold", ProductFilter{Sold: &yes}, "products_sold_live (live_at<?)"},
		{"sold, upcoming", ProductFilter{Sold: &yes, IncludeUpcoming: true}, "products_sold_live (live_at>?)"},
		{"not sold", ProductFilter{Sold: &no}, "products_live (live_at<?)"},
		{"sold and a creator", ProductFilter{Sold: &yes, Creator: "a"}, "products_creator_live (creator=? AND live_at<?)"},
		{"sold and a sale type", ProductFilter{Sold: &yes, SaleTypes: []string{"OPEN_EDITION"}}, "products_sale_live (sale_type=? AND live_at<?)"},
		{"sold and sale types", ProductFilter{Sold: &yes, SaleTypes: []string{"OPEN_EDITION", "LIMITED_EDITION"}}, "products_sold_live (live_at<?)"},
		{"sold, deep", ProductFilter{Sold: &yes, Offset: 1000}, "products_sold_live (live_at<?)"},
	} {
		q, args := productsQuery(sqliteDialect, c.f)
		text := strings.Join(queryPlan(t, db, q, args...), "; ")
		if !strings.HasPrefix(text, "SEARCH products USING INDEX "+c.want) || strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want a walk of %s and no sort", c.name, text, c.want)
		}
	}
}
