package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
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
		WHERE id = ? AND body IS NOT ?`)
	qDeleteProduct = prepared(`DELETE FROM products WHERE id = ?`)
	qProduct       = prepared(`SELECT body FROM products WHERE id = ?`)
)

func (p *ProductRow) args() []any {
	return []any{p.ID, p.Network, p.TokenContract, nullString(p.Creator), p.SaleType, p.TotalSold,
		nullInt(p.TotalAvailable), nullTime(p.LiveAt), nullTime(p.SalesEndAt), formatTime(p.CreatedAt), p.Body}
}

// InsertProduct inserts p; ErrExists when a product has its id.
func (t *Tx) InsertProduct(ctx context.Context, p *ProductRow) error {
	if _, err := t.ExecContext(ctx, qInsertProduct, p.args()...); err != nil {
		return fmt.Errorf("insert product %s: %w", p.ID, err)
	}
	return nil
}

// PutProduct inserts p or replaces the product with its id, and says which it did.
func (t *Tx) PutProduct(ctx context.Context, p *ProductRow) (PutResult, error) {
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
func (t *Tx) DeleteProduct(ctx context.Context, id string) error {
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
func (t *Tx) Product(ctx context.Context, id string) ([]byte, error) {
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

// ChainSold is the "sold from the chain" rule compiled to SQL once: the number of tokens a
// product has sold is COALESCE(nft_minted.minted, 0) of its (chain, contract) when its
// network and contract are indexed, else its stored total_sold. The list selects it and
// filters on it in SQL, so that pagination stays exact.
type ChainSold struct {
	expr string // a SQL expression over the products row
	args []any  // the arguments of expr's placeholders, in order
}

// NewChainSold compiles the rule for the indexed networks; nil or empty: the stored figures.
func NewChainSold(indexed []IndexedNetwork) *ChainSold {
	if len(indexed) == 0 {
		return nil
	}
	var (
		b    strings.Builder
		args []any
	)
	b.WriteString("CASE")
	for _, n := range indexed {
		b.WriteString(" WHEN network = ?")
		args = append(args, n.Network)
		if len(n.Contracts) > 0 {
			b.WriteString(" AND token_contract IN (?" + strings.Repeat(", ?", len(n.Contracts)-1) + ")")
			for _, c := range n.Contracts {
				args = append(args, c)
			}
		}
		// The chain id is a literal: it is a number, and SQLite plans the subquery on the
		// nft_minted primary key either way.
		b.WriteString(" THEN COALESCE((SELECT minted FROM nft_minted WHERE chain_id = " +
			strconv.FormatUint(n.ChainID, 10) + " AND contract = products.token_contract), 0)")
	}
	b.WriteString(" ELSE total_sold END")
	return &ChainSold{expr: b.String(), args: args}
}

// ProductFilter selects products for the list. Zero values select everything.
type ProductFilter struct {
	Creator   string   // lowercase username
	SaleTypes []string // any of
	// Sold true: total_available not null and the sold figure >= total_available; false:
	// the others.
	Sold *bool
	// LiveAt is the instant "live" is judged at: live_at <= LiveAt and (sales_end_at null or
	// after it). With IncludeUpcoming, products whose live_at is after it are included too.
	LiveAt          time.Time
	IncludeUpcoming bool
	Limit, Offset   int
	// ChainSold is the sold rule; nil: the stored total_sold.
	ChainSold *ChainSold
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
	q, args := productsQuery(f)
	q = db.d.rebind(q)
	st, err := db.listStmts.get(ctx, db.read, q)
	if err != nil {
		return nil, fmt.Errorf("list products: prepare: %w", err)
	}
	var rows *sql.Rows
	if st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = db.read.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("list products: %w", err)
	}
	defer rows.Close()
	out := make([]ListedProduct, 0, f.Limit)
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
func productsQuery(f ProductFilter) (string, []any) {
	var (
		where []string
		args  []any
	)
	sold, soldArgs := "total_sold", []any(nil)
	if f.ChainSold != nil {
		sold, soldArgs = f.ChainSold.expr, f.ChainSold.args
	}
	args = append(args, soldArgs...)
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
			where = append(where, "+sale_type = ?")
		} else {
			where = append(where, "sale_type = ?")
		}
		args = append(args, f.SaleTypes[0])
	default:
		// Several types: no index gives them in the list's order (SQLite would read them all
		// and sort), so the unary + keeps this a filter on the walk of products_live.
		where = append(where, "+sale_type IN (?"+strings.Repeat(", ?", len(f.SaleTypes)-1)+")")
		for _, s := range f.SaleTypes {
			args = append(args, s)
		}
	}
	if f.Sold != nil {
		// Under the stored rule, sold=true is the WHERE of the partial index
		// products_sold_live, term for term, so that SQLite can walk it.
		cond := "total_available IS NOT NULL AND total_sold >= total_available"
		if f.ChainSold != nil {
			cond = "total_available IS NOT NULL AND (" + sold + ") >= total_available"
		}
		if !*f.Sold {
			cond = "NOT (" + cond + ")"
		}
		where = append(where, cond)
		args = append(args, soldArgs...)
	}
	q := "SELECT body, total_sold, " + sold + " FROM products WHERE " + strings.Join(where, " AND ") +
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
