package store

import (
	"context"
	"strings"
)

// Batched statements: a write or lookup of many rows runs as few multi-row statements of a
// handful of fixed sizes (prepared once), in chunks. Written for the NFT owners index
// (owners.go) and usable by any repository; tuples also serves the store copy (copy.go).

// The sizes of the multi-row statements. A chunk of n items runs the smallest statement that
// holds them, the last item repeated to fill it: a repeated key changes nothing in an upsert,
// a delete or a lookup, and the statements stay few enough to prepare once. A dialect that
// prepares nothing itself (PostgreSQL, whose driver caches statements per connection) runs a
// statement of the chunk's exact size instead: PostgreSQL refuses an upsert that names one
// key twice.
var chunkSizes = [...]int{1, 8, 32, 128}

// chunkedQuery is one statement per chunk size, built by build(rows), registered with
// prepared.
type chunkedQuery struct {
	sized map[int]string
	build func(rows int) string
}

func chunked(build func(rows int) string) chunkedQuery {
	q := chunkedQuery{sized: map[int]string{}, build: build}
	for _, n := range chunkSizes {
		q.sized[n] = prepared(build(n))
	}
	return q
}

// tuples is n parenthesized groups of k placeholders, comma separated.
func tuples(n, k int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", k), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(one+", ", n), ", ")
}

// blobTuples is tuples with each placeholder cast to BLOB: in a VALUES list compared with
// BLOB columns, PostgreSQL cannot infer a parameter's type from the comparison (it would take
// text).
func blobTuples(n, k int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("CAST(? AS BLOB), ", k), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(one+", ", n), ", ")
}

// chunks calls run for each chunk of n items with the statement for it and the arguments:
// lead, then add's arguments for each item (the last repeated to the statement's size).
func chunks(d *dialect, q chunkedQuery, lead []any, n int, add func(args []any, i int) []any, run func(query string, args []any) error) error {
	largest := chunkSizes[len(chunkSizes)-1]
	var args []any
	for start := 0; start < n; start += largest {
		m := min(n-start, largest)
		size := largest
		for _, s := range chunkSizes {
			if s >= m {
				size = s
				break
			}
		}
		query := q.sized[size]
		if !d.prepare && size != m {
			size, query = m, q.build(m)
		}
		args = append(args[:0], lead...)
		for i := range size {
			args = add(args, start+min(i, m-1))
		}
		if err := run(query, args); err != nil {
			return err
		}
	}
	return nil
}

// lastWins drops every item whose key a later item has: an upsert given one key twice keeps
// the last (as SQLite, writing row by row, does; PostgreSQL refuses such a statement).
func lastWins[T any, K comparable](items []T, key func(*T) K) []T {
	if len(items) < 2 {
		return items
	}
	last := make(map[K]int, len(items))
	for i := range items {
		last[key(&items[i])] = i
	}
	if len(last) == len(items) {
		return items
	}
	out := make([]T, 0, len(last))
	for i := range items {
		if last[key(&items[i])] == i {
			out = append(out, items[i])
		}
	}
	return out
}

func (t *DBTx) execChunks(ctx context.Context, q chunkedQuery, lead []any, n int, add func(args []any, i int) []any) error {
	return chunks(t.d, q, lead, n, add, func(query string, args []any) error {
		_, err := t.ExecContext(ctx, query, args...)
		return err
	})
}
