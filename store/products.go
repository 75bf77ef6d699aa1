package store

import (
	"context"
	"database/sql"
	"fmt"
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

var (
	qUpsertProduct = prepared(`INSERT INTO products (id, network, token_contract, creator, sale_type, total_sold,
		total_available, live_at, sales_end_at, created_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET network = excluded.network, token_contract = excluded.token_contract,
			creator = excluded.creator, sale_type = excluded.sale_type, total_sold = excluded.total_sold,
			total_available = excluded.total_available, live_at = excluded.live_at,
			sales_end_at = excluded.sales_end_at, created_at = excluded.created_at, body = excluded.body`)
	qDeleteProduct = prepared(`DELETE FROM products WHERE id = ?`)
)

// UpsertProduct inserts p or replaces the product with its id.
func (t *Tx) UpsertProduct(ctx context.Context, p *ProductRow) error {
	_, err := t.ExecContext(ctx, qUpsertProduct, p.ID, p.Network, p.TokenContract, nullString(p.Creator), p.SaleType,
		p.TotalSold, nullInt(p.TotalAvailable), nullTime(p.LiveAt), nullTime(p.SalesEndAt), formatTime(p.CreatedAt), p.Body)
	if err != nil {
		return fmt.Errorf("put product %s: %w", p.ID, err)
	}
	return nil
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

// ProductFilter selects products for the list. Zero values select everything.
type ProductFilter struct {
	Creator   string   // lowercase username
	SaleTypes []string // any of
	Sold      *bool    // true: total_available not null and total_sold >= total_available
	// LiveAt is the instant "live" is judged at: live_at <= LiveAt and (sales_end_at null or
	// after it). With IncludeUpcoming, products whose live_at is after it are included too.
	LiveAt          time.Time
	IncludeUpcoming bool
	Limit, Offset   int
}

// Products returns the JSON of the products f selects, live_at descending, then id.
func (t *Tx) Products(ctx context.Context, f ProductFilter) ([][]byte, error) {
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
	if len(f.SaleTypes) > 0 {
		where = append(where, "sale_type IN (?"+strings.Repeat(", ?", len(f.SaleTypes)-1)+")")
		for _, s := range f.SaleTypes {
			args = append(args, s)
		}
	}
	if f.Sold != nil {
		sold := "total_available IS NOT NULL AND total_sold >= total_available"
		if !*f.Sold {
			sold = "NOT (" + sold + ")"
		}
		where = append(where, sold)
	}
	q := "SELECT body FROM products WHERE " + strings.Join(where, " AND ") + " ORDER BY live_at DESC, id LIMIT ? OFFSET ?"
	args = append(args, f.Limit, f.Offset)
	rows, err := t.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list products: %w", err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("list products: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
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
