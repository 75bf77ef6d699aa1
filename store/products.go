package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ProductRow is a product as stored: its JSON and the columns the list filters on.
type ProductRow struct {
	ID             string
	Network        string
	TokenContract  string // lowercase 0x address
	Creator        string // lowercase username; "" when none
	SaleType       string
	TotalSold      int64
	TotalAvailable *int64 // nil: unlimited
	LiveAt         *time.Time
	SalesEndAt     *time.Time
	CreatedAt      time.Time
	Body           []byte // the Product object, JSON
}

// PutResult says what PutProduct did.
type PutResult int

// The outcomes of PutProduct.
const (
	Inserted  PutResult = iota + 1 // no product had the id
	Updated                        // the product with the id was replaced
	Unchanged                      // the product with the id had the same body already
)

const productColumns = `id, network, token_contract, creator, sale_type, total_sold, total_available, live_at, sales_end_at, created_at, body`

var (
	qInsertProduct = prepared(`INSERT INTO products (` + productColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	// The insert of PutProduct: nothing happens when the id exists (then the update runs).
	qInsertNewProduct = prepared(`INSERT INTO products (` + productColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`)
	qUpdateProduct = prepared(`UPDATE products SET network = ?, token_contract = ?, creator = ?, sale_type = ?,
		total_sold = ?, total_available = ?, live_at = ?, sales_end_at = ?, created_at = ?, body = ?
		WHERE id = ? AND body IS DISTINCT FROM CAST(? AS BLOB)`)
	qDeleteProduct = prepared(`DELETE FROM products WHERE id = ?`)
	qProduct       = prepared(`SELECT body FROM products WHERE id = ?`)
)

func (p *ProductRow) args() []any {
	return []any{p.ID, p.Network, p.TokenContract, nullString(p.Creator), p.SaleType, p.TotalSold,
		nullInt(p.TotalAvailable), nullTime(p.LiveAt), nullTime(p.SalesEndAt), formatTime(p.CreatedAt), p.Body}
}

func (p *ProductRow) check() error {
	return checkTexts("product: id", p.ID, "product: network", p.Network, "product: token contract", p.TokenContract,
		"product: creator", p.Creator, "product: sale type", p.SaleType)
}

// InsertProduct inserts p; ErrExists when a product has its id.
func (t *DBTx) InsertProduct(ctx context.Context, p *ProductRow) error {
	if err := p.check(); err != nil {
		return err
	}
	if _, err := t.ExecContext(ctx, qInsertProduct, p.args()...); err != nil {
		return fmt.Errorf("insert product %s: %w", p.ID, err)
	}
	return nil
}

// PutProduct inserts p or replaces the product with its id, and says which it did.
func (t *DBTx) PutProduct(ctx context.Context, p *ProductRow) (PutResult, error) {
	if err := p.check(); err != nil {
		return 0, err
	}
	a := p.args()
	res, err := t.ExecContext(ctx, qInsertNewProduct, a...)
	if err != nil {
		return 0, fmt.Errorf("put product %s: %w", p.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return Inserted, nil
	}
	res, err = t.ExecContext(ctx, qUpdateProduct, append(a[1:], p.ID, p.Body)...)
	if err != nil {
		return 0, fmt.Errorf("put product %s: %w", p.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return Updated, nil
	}
	return Unchanged, nil
}

// DeleteProduct removes the product id; ErrNotFound when there is none.
func (t *DBTx) DeleteProduct(ctx context.Context, id string) error {
	if !validText(id) {
		return ErrNotFound
	}
	res, err := t.ExecContext(ctx, qDeleteProduct, id)
	if err != nil {
		return fmt.Errorf("delete product %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// Product returns the stored JSON of the product id; ErrNotFound when there is none.
func (t *DBTx) Product(ctx context.Context, id string) ([]byte, error) {
	if !validText(id) {
		return nil, ErrNotFound
	}
	var b []byte
	err := t.QueryRowContext(ctx, qProduct, id).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("product %s: %w", id, err)
	}
	return b, nil
}

// IndexedNetwork is a product network whose NFT contracts the owners indexer follows: the
// products of that network (and, with Contracts, of those contracts) count their tokens
// minted on chain (nft_minted) as sold.
type IndexedNetwork struct {
	Network string // a product's network name, e.g. mainnet
	ChainID uint64
	// Contracts are lowercase 0x addresses; empty: every contract of the chain.
	Contracts []string
}

var qProductSoldScope = prepared(`SELECT network, chain_id, contract FROM products_sold_scope ORDER BY network, contract`)

// SetProductSoldScope makes indexed the scope of the "sold from the chain" rule (migration
// 0008): a product whose network and contract it covers counts its contract's nft_minted as
// sold, every other product its stored total_sold. When the scope changed, every product is
// recomputed, in the same transaction; the triggers of 0008 keep the figures right after
// that, on every write of a product or of nft_minted. It reports whether the scope changed.
// Replicas on one database must share the scope (their config's owners and upstreams).
func (db *DB) SetProductSoldScope(ctx context.Context, indexed []IndexedNetwork) (changed bool, err error) {
	type row struct {
		network  string
		chainID  uint64
		contract string
	}
	var want []row
	for _, n := range indexed {
		if len(n.Contracts) == 0 {
			want = append(want, row{n.Network, n.ChainID, ""})
		}
		for _, c := range n.Contracts {
			want = append(want, row{n.Network, n.ChainID, c})
		}
	}
	slices.SortFunc(want, func(a, b row) int {
		return cmp.Or(strings.Compare(a.network, b.network), strings.Compare(a.contract, b.contract))
	})
	want = slices.Compact(want)
	for _, r := range want {
		if err := checkTexts("products sold scope: network", r.network, "products sold scope: contract", r.contract); err != nil {
			return false, err
		}
	}
	err = db.Write(ctx, func(dbtx *DBTx) error {
		// Replicas starting at once each compare and rewrite the scope: one after the other.
		if err := dbtx.lock(ctx, "products sold scope"); err != nil {
			return err
		}
		rows, err := dbtx.QueryContext(ctx, qProductSoldScope)
		if err != nil {
			return err
		}
		var have []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.network, &r.chainID, &r.contract); err != nil {
				rows.Close()
				return err
			}
			have = append(have, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if changed = !slices.Equal(have, want); !changed {
			return nil
		}
		if _, err := dbtx.ExecContext(ctx, `DELETE FROM products_sold_scope`); err != nil {
			return err
		}
		for _, r := range want {
			if _, err := dbtx.ExecContext(ctx, `INSERT INTO products_sold_scope (network, chain_id, contract) VALUES (?, ?, ?)`,
				r.network, r.chainID, r.contract); err != nil {
				return err
			}
		}
		_, err = dbtx.ExecContext(ctx, `UPDATE products SET chain_id = (SELECT s.chain_id FROM products_sold_scope s
				WHERE s.network = products.network AND s.contract IN ('', products.token_contract) LIMIT 1)`)
		if err != nil {
			return err
		}
		_, err = dbtx.ExecContext(ctx, `UPDATE products SET sold = CASE WHEN chain_id IS NULL THEN total_sold
				ELSE COALESCE((SELECT m.minted FROM nft_minted m
					WHERE m.chain_id = products.chain_id AND m.contract = products.token_contract), 0) END`)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("products sold scope: %w", err)
	}
	return changed, nil
}

// ProductFilter selects products for the list. Zero values select everything.
type ProductFilter struct {
	Creator   string   // lowercase username
	SaleTypes []string // any of
	// Sold true: total_available not null and the sold figure (column sold: the stored
	// total_sold or, in the scope of SetProductSoldScope, the chain's) >= total_available;
	// false: the others.
	Sold *bool
	// LiveAt is the instant "live" is judged at: live_at <= LiveAt and (sales_end_at null or
	// after it). With IncludeUpcoming, products whose live_at is after it are included too.
	LiveAt          time.Time
	IncludeUpcoming bool
	Limit, Offset   int
}

// ListedProduct is one product of the list: its stored JSON, the total_sold stored with it,
// and the sold figure of the rule (different from it when the chain says otherwise).
type ListedProduct struct {
	Body       []byte
	StoredSold int64
	Sold       int64
}

// Products returns the products f selects, live_at descending, then id, in one read (a
// lone SELECT reads one snapshot). Each shape of the query is prepared once (lazyStmts):
// parsing and planning it cost as much as running it.
//
// The plans (EXPLAIN QUERY PLAN, checked by TestProductsQueryPlans) walk an index in the
// list's order and stop after Offset+Limit matches, never sorting: with a creator,
// products_creator_live; with one sale type, products_sale_live; sold=true under the stored
// rule, products_sold_live (the sold-out products only); else products_live. Each carries
// every filtered column, so that rows skipped by a filter or by the offset are never read
// from the table (only the bodies returned are).
func (db *DB) Products(ctx context.Context, f ProductFilter) ([]ListedProduct, error) {
	if !validText(f.Creator) || slices.ContainsFunc(f.SaleTypes, func(s string) bool { return !validText(s) }) {
		return []ListedProduct{}, nil // no stored product has such text
	}
	q, args := productsQuery(db.d, f)
	q = db.d.rebind(q)
	began := time.Now()
	if db.txTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, db.txTimeout)
		defer cancel()
	}
	out, err := db.products(ctx, q, args, f.Limit)
	if err != nil {
		return nil, db.failed(err)
	}
	db.served(began)
	return out, nil
}

// products runs the product list's query q.
func (db *DB) products(ctx context.Context, q string, args []any, limit int) ([]ListedProduct, error) {
	var st *sql.Stmt
	if db.d.prepare {
		var err error
		if st, err = db.listStmts.get(ctx, db.read, q); err != nil {
			return nil, fmt.Errorf("list products: prepare: %w", err)
		}
	}
	var (
		rows *sql.Rows
		err  error
	)
	if st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = db.read.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("list products: %w", err)
	}
	defer rows.Close()
	out := make([]ListedProduct, 0, limit)
	for rows.Next() {
		var p ListedProduct
		if err := rows.Scan(&p.Body, &p.StoredSold, &p.Sold); err != nil {
			return nil, fmt.Errorf("list products: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list products: %w", err)
	}
	return out, nil
}

// productsQuery is the SQL of Products and its arguments.
func productsQuery(d *dialect, f ProductFilter) (string, []any) {
	var (
		where []string
		args  []any
	)
	at := formatTime(f.LiveAt)
	if f.IncludeUpcoming {
		where = append(where, "live_at IS NOT NULL", "(sales_end_at IS NULL OR sales_end_at > ?)")
		args = append(args, at)
	} else {
		where = append(where, "live_at <= ?", "(sales_end_at IS NULL OR sales_end_at > ?)")
		args = append(args, at, at)
	}
	if f.Creator != "" {
		where = append(where, "creator = ?")
		args = append(args, f.Creator)
	}
	switch len(f.SaleTypes) {
	case 0:
	case 1:
		// One type: its index walks in the list's order. With a creator, the creator's
		// index is the narrower one, and the unary + keeps SQLite on it.
		if f.Creator != "" {
			where = append(where, d.noIndex+"sale_type = ?")
		} else {
			where = append(where, "sale_type = ?")
		}
		args = append(args, f.SaleTypes[0])
	default:
		// Several types: no index gives them in the list's order (SQLite would read them all
		// and sort), so the unary + keeps this a filter on the walk of products_live.
		where = append(where, d.noIndex+"sale_type IN (?"+strings.Repeat(", ?", len(f.SaleTypes)-1)+")")
		for _, s := range f.SaleTypes {
			args = append(args, s)
		}
	}
	if f.Sold != nil {
		// sold=true is the WHERE of the partial index products_sold_live, term for term, so
		// that SQLite can walk it.
		cond := "total_available IS NOT NULL AND sold >= total_available"
		if !*f.Sold {
			cond = "NOT (" + cond + ")"
		}
		where = append(where, cond)
	}
	q := "SELECT body, total_sold, sold FROM products WHERE " + strings.Join(where, " AND ") +
		" ORDER BY live_at DESC, id LIMIT ? OFFSET ?"
	args = append(args, f.Limit, f.Offset)
	return q, args
}

func nullInt(v *int64) sql.NullInt64 {
	if v == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: *v, Valid: true}
}

func nullTime(v *time.Time) sql.NullString {
	if v == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: formatTime(*v), Valid: true}
}
