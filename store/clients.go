package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
)

// Client is an OAuth2 client of the client-credentials grant. SecretHash is the encoded hash
// of the secret (hashing is the caller's job); String, GoString and MarshalLogObject leave it out, and
// so must every log line.
type Client struct {
	ID         string
	SecretHash string
	Principal  string // the principal its tokens act for
	Scopes     []string
	CreatedAt  time.Time
	DisabledAt *time.Time // nil while the client is enabled
}

// String describes c without its secret hash.
func (c Client) String() string {
	return fmt.Sprintf("client %s (principal %s, scopes %q)", c.ID, c.Principal, c.Scopes)
}

// GoString is String, so %#v does not print the secret hash either.
func (c Client) GoString() string { return c.String() }

// MarshalLogObject lets zap.Object(c) log c without its secret hash.
func (c Client) MarshalLogObject(e zapcore.ObjectEncoder) error {
	e.AddString("id", c.ID)
	e.AddString("principal", c.Principal)
	e.AddString("scopes", strings.Join(c.Scopes, " "))
	e.AddBool("disabled", c.DisabledAt != nil)
	return nil
}

// AddClient records c. A zero CreatedAt is set to now. An id in use is ErrExists.
func (db *DB) AddClient(ctx context.Context, c Client) error {
	switch {
	case c.ID == "":
		return errors.New("add client: id is empty")
	case c.SecretHash == "":
		return fmt.Errorf("add client %s: secret hash is empty", c.ID)
	case c.Principal == "":
		return fmt.Errorf("add client %s: principal is empty", c.ID)
	}
	if err := checkTexts("add client: id", c.ID, "add client: secret hash", c.SecretHash, "add client: principal", c.Principal); err != nil {
		return err
	}
	for _, s := range c.Scopes {
		if err := CheckText("add client: scope", s); err != nil {
			return err
		}
		if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return fmt.Errorf("add client %s: scope %q is empty or contains a space or control character", c.ID, s)
		}
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = time.Now()
	}
	var disabled sql.NullString
	if c.DisabledAt != nil {
		disabled = sql.NullString{String: formatTime(*c.DisabledAt), Valid: true}
	}
	err := db.Write(ctx, func(dbtx *DBTx) error {
		_, err := dbtx.ExecContext(ctx,
			`INSERT INTO oauth_clients (id, secret_hash, principal, scopes, created_at, disabled_at) VALUES (?, ?, ?, ?, ?, ?)`,
			c.ID, c.SecretHash, c.Principal, strings.Join(c.Scopes, " "), formatTime(c.CreatedAt), disabled)
		return err
	})
	if err != nil {
		return fmt.Errorf("add client %s: %w", c.ID, err)
	}
	return nil
}

// Client is the client with id, or ErrNotFound. A disabled client is returned too, with
// DisabledAt set: refusing it is the caller's decision.
func (db *DB) Client(ctx context.Context, id string) (Client, error) {
	var c Client
	err := db.Read(ctx, func(dbtx *DBTx) error {
		var err error
		c, err = dbtx.client(ctx, id)
		return err
	})
	if err != nil {
		return Client{}, fmt.Errorf("client %s: %w", id, err)
	}
	return c, nil
}

// DisableClient marks the client with id disabled at now: the token endpoint refuses it, and
// the tokens it already holds are refused once the verifiers next read its state. A client
// disabled already keeps its first DisabledAt. It returns the client as stored, or
// ErrNotFound.
func (db *DB) DisableClient(ctx context.Context, id string, now time.Time) (Client, error) {
	return db.setClientDisabled(ctx, id, sql.NullString{String: formatTime(now), Valid: true})
}

// EnableClient clears the client's DisabledAt (a client enabled already is left as it is).
// It returns the client as stored, or ErrNotFound.
func (db *DB) EnableClient(ctx context.Context, id string) (Client, error) {
	return db.setClientDisabled(ctx, id, sql.NullString{})
}

// setClientDisabled sets disabled_at to at, or clears it when at is NULL; a time already set
// is kept.
func (db *DB) setClientDisabled(ctx context.Context, id string, at sql.NullString) (Client, error) {
	if !validText(id) {
		return Client{}, fmt.Errorf("client %s: %w", id, ErrNotFound)
	}
	var c Client
	err := db.Write(ctx, func(dbtx *DBTx) error {
		q := `UPDATE oauth_clients SET disabled_at = NULL WHERE id = ?`
		args := []any{id}
		if at.Valid {
			q = `UPDATE oauth_clients SET disabled_at = COALESCE(disabled_at, ?) WHERE id = ?`
			args = []any{at, id}
		}
		res, err := dbtx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrNotFound
		}
		c, err = dbtx.client(ctx, id)
		return err
	})
	if err != nil {
		return Client{}, fmt.Errorf("client %s: %w", id, err)
	}
	return c, nil
}

// client reads the client with id, or ErrNotFound.
func (t *DBTx) client(ctx context.Context, id string) (Client, error) {
	if !validText(id) {
		return Client{}, ErrNotFound // no stored id is such text
	}
	c := Client{ID: id}
	var scopes, created string
	var disabled sql.NullString
	err := t.QueryRowContext(ctx,
		`SELECT secret_hash, principal, scopes, created_at, disabled_at FROM oauth_clients WHERE id = ?`, id).
		Scan(&c.SecretHash, &c.Principal, &scopes, &created, &disabled)
	if errors.Is(err, sql.ErrNoRows) {
		return Client{}, ErrNotFound
	}
	if err != nil {
		return Client{}, err
	}
	c.Scopes = strings.Fields(scopes)
	if c.CreatedAt, err = parseTime(created); err != nil {
		return Client{}, fmt.Errorf("created_at: %w", err)
	}
	if disabled.Valid {
		t, err := parseTime(disabled.String)
		if err != nil {
			return Client{}, fmt.Errorf("disabled_at: %w", err)
		}
		c.DisabledAt = &t
	}
	return c, nil
}

// Clients are every client, oldest first, without their secret hashes (for listing).
func (db *DB) Clients(ctx context.Context) ([]Client, error) {
	var out []Client
	err := db.Read(ctx, func(dbtx *DBTx) error {
		rows, err := dbtx.QueryContext(ctx,
			`SELECT id, principal, scopes, created_at, disabled_at FROM oauth_clients ORDER BY created_at, id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c Client
			var scopes, created string
			var disabled sql.NullString
			if err := rows.Scan(&c.ID, &c.Principal, &scopes, &created, &disabled); err != nil {
				return err
			}
			c.Scopes = strings.Fields(scopes)
			if c.CreatedAt, err = parseTime(created); err != nil {
				return fmt.Errorf("client %s: created_at: %w", c.ID, err)
			}
			if disabled.Valid {
				t, err := parseTime(disabled.String)
				if err != nil {
					return fmt.Errorf("client %s: disabled_at: %w", c.ID, err)
				}
				c.DisabledAt = &t
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("clients: %w", err)
	}
	return out, nil
}
