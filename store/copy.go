package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Copying a SQLite installation into PostgreSQL (`web3gate store copy`): every table, in one
// PostgreSQL transaction, so that the target ends with all of it or nothing.

// copyOrder is every table Copy copies, in the order it copies them: products_sold_scope and
// nft_minted before products, whose chain_id and sold the triggers derive from them; the
// webhook endpoints before the outbox's events and deliveries that refer to them (a pending
// delivery is delivered by the target); txs last.
var copyOrder = []string{
	"accounts", "oauth_clients", "account_keys", "nonce_heads", "chain_genesis", "metadata_records",
	"products_sold_scope", "nft_minted", "nft_index_progress", "nft_index_blocks", "nft_balances", "nft_undo",
	"products", "quota_usage", "webhooks", "webhook_events", "webhook_deliveries", "txs", "tx_versions",
}

// derivedTables are kept by triggers from the copied tables and not copied: Copy checks that
// the target's equal the source's.
var derivedTables = []string{"inflight"}

// transientTables hold the coordination of running processes (SQLite's lease rows) and
// short-lived client state (HTTP filters, which expire within minutes), which mean nothing to
// another database: not copied.
var transientTables = []string{"leases", "filters"}

// TableCount is the number of rows Copy copied into a table.
type TableCount struct {
	Table string
	Rows  int64
}

// Copy copies every row of src, a SQLite store at the newest schema version this binary
// knows, into dst, an empty PostgreSQL store (migrated by its Open), in one transaction of
// dst: the row counts of every table and the derived in-flight sums and products' sold
// figures are compared with the source before it commits, and on any failure nothing is
// left in dst. txs keep their ids; the id sequence continues after the highest. src is read
// in one snapshot.
func Copy(ctx context.Context, src, dst *DB) ([]TableCount, error) {
	if src.d != sqliteDialect || dst.d != postgresDialect {
		return nil, errors.New("store copy: the source must be a SQLite store and the target a PostgreSQL one")
	}
	migs, err := loadMigrations(sqliteDialect.migrations())
	if err != nil {
		return nil, err
	}
	if want := migs[len(migs)-1].version; src.schema != want {
		return nil, fmt.Errorf("store copy: the source is at schema version %d, this binary's is %d: copy with the web3gate that wrote it, or migrate it first",
			src.schema, want)
	}
	var counts []TableCount
	// One transaction for the whole copy, however long it takes: not bounded by the
	// target's transactionTimeout.
	err = dst.runFor(ctx, 0, dst.write, dst.writeStmts, dst.writeOpts(), func(dtx *DBTx) error {
		return src.Read(ctx, func(stx *DBTx) error {
			if err := checkTables(ctx, stx); err != nil {
				return fmt.Errorf("source: %w", err)
			}
			if err := checkTables(ctx, dtx); err != nil {
				return fmt.Errorf("target: %w", err)
			}
			for _, table := range append(slices.Clone(copyOrder), derivedTables...) {
				var any bool
				if err := dtx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+`)`).Scan(&any); err != nil {
					return err
				}
				if any {
					return fmt.Errorf("the target is not empty (table %s has rows): copy only into a new database", table)
				}
			}
			counts = counts[:0]
			for _, table := range copyOrder {
				n, err := copyTable(ctx, stx, dtx, table)
				if err != nil {
					return fmt.Errorf("table %s: %w", table, err)
				}
				counts = append(counts, TableCount{table, n})
			}
			if _, err := dtx.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence('txs', 'id'),
				(SELECT COALESCE(MAX(id), 0) + 1 FROM txs), false)`); err != nil {
				return fmt.Errorf("txs id sequence: %w", err)
			}
			for _, seq := range [][2]string{{"webhook_events", "seq"}, {"webhook_deliveries", "id"}} {
				if _, err := dtx.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence('`+seq[0]+`', '`+seq[1]+`'),
					(SELECT COALESCE(MAX(`+seq[1]+`), 0) + 1 FROM `+seq[0]+`), false)`); err != nil {
					return fmt.Errorf("%s sequence: %w", seq[0], err)
				}
			}
			var endpoints bool
			if err := dtx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM webhooks WHERE enabled = 1)`).Scan(&endpoints); err != nil {
				return err
			}
			if endpoints {
				if err := dtx.armWebhookEvents(ctx); err != nil {
					return err
				}
			}
			return verifyCopy(ctx, stx, dtx)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store copy: nothing copied: %w", err)
	}
	return counts, nil
}

// checkTables: the database has exactly the tables Copy knows, so that a table added by a
// later migration cannot be left behind.
func checkTables(ctx context.Context, dbtx *DBTx) error {
	q := `SELECT name FROM sqlite_schema WHERE type = 'table' AND name <> 'schema_migrations' AND name NOT LIKE 'sqlite_%'`
	if dbtx.d == postgresDialect {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()
			AND table_type = 'BASE TABLE' AND table_name <> 'schema_migrations'`
	}
	have, err := dbtx.strings(ctx, q)
	if err != nil {
		return err
	}
	want := slices.Concat(copyOrder, derivedTables, transientTables)
	slices.Sort(have)
	slices.Sort(want)
	if !slices.Equal(have, want) {
		return fmt.Errorf("tables %q, the copy knows %q", have, want)
	}
	return nil
}

func (t *DBTx) strings(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := t.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// copyTable copies every row of table from stx to dtx, in multi-row inserts, and returns how
// many it copied.
func copyTable(ctx context.Context, stx, dtx *DBTx, table string) (int64, error) {
	cols, err := dtx.strings(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`, table)
	if err != nil {
		return 0, err
	}
	list := strings.Join(cols, ", ")
	rows, err := stx.QueryContext(ctx, `SELECT `+list+` FROM `+table)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	perInsert := min(500, 60000/len(cols)) // PostgreSQL takes at most 65535 parameters
	var (
		args []any
		n    int64
		held int
	)
	flush := func() error {
		if held == 0 {
			return nil
		}
		_, err := dtx.ExecContext(ctx, `INSERT INTO `+table+` (`+list+`) VALUES `+tuples(held, len(cols)), args...)
		args, held = args[:0], 0
		return err
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		args = append(args, vals...)
		held++
		n++
		if held == perInsert {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	return n, flush()
}

// verifyCopy compares the row counts of every table, the in-flight sums (rows whose counts
// are all zero aside: SQLite keeps an account's row after its last transaction left flight)
// and the products' derived chain_id and sold.
func verifyCopy(ctx context.Context, stx, dtx *DBTx) error {
	for _, table := range copyOrder {
		var a, b int64
		if err := stx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&a); err != nil {
			return err
		}
		if err := dtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&b); err != nil {
			return err
		}
		if a != b {
			return fmt.Errorf("table %s: %d rows in the source, %d in the target", table, a, b)
		}
	}
	for _, q := range []struct{ what, query string }{
		{"in-flight sums", `SELECT chain_id || ' ' || address || ' ' || n || ' ' || c0 || ' ' || c1 || ' ' || c2 || ' ' ||
			c3 || ' ' || c4 || ' ' || c5 || ' ' || c6 || ' ' || c7 FROM inflight
			WHERE n <> 0 OR c0 <> 0 OR c1 <> 0 OR c2 <> 0 OR c3 <> 0 OR c4 <> 0 OR c5 <> 0 OR c6 <> 0 OR c7 <> 0`},
		{"products' sold figures", `SELECT id || ' ' || COALESCE(CAST(chain_id AS TEXT), '-') || ' ' || sold FROM products`},
	} {
		a, err := stx.strings(ctx, q.query)
		if err != nil {
			return err
		}
		b, err := dtx.strings(ctx, q.query)
		if err != nil {
			return err
		}
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			return fmt.Errorf("the %s derived in the target differ from the source's", q.what)
		}
	}
	return nil
}
