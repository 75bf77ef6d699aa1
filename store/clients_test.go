package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestClientRoundTrip(t *testing.T) { forEachBackend(t, testClientRoundTrip) }

func testClientRoundTrip(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	created := time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)
	disabled := created.Add(time.Hour)
	for _, want := range []Client{
		{ID: "enabled", SecretHash: "$argon2id$v=19$m=65536,t=3,p=2$c2FsdA$aGFzaA", Principal: "alice",
			Scopes: []string{"eth_sign", "products:write"}, CreatedAt: created},
		{ID: "disabled", SecretHash: "$2a$10$abcdefghijklmnopqrstuv", Principal: "bob",
			Scopes: []string{"eth_sign"}, CreatedAt: created, DisabledAt: &disabled},
		{ID: "no scopes", SecretHash: "h", Principal: "carol", CreatedAt: created},
	} {
		t.Run(want.ID, func(t *testing.T) {
			if err := db.AddClient(ctx, want); err != nil {
				t.Fatalf("AddClient: %v", err)
			}
			got, err := db.Client(ctx, want.ID)
			if err != nil {
				t.Fatalf("Client: %v", err)
			}
			if got.ID != want.ID || got.SecretHash != want.SecretHash || got.Principal != want.Principal ||
				!slices.Equal(got.Scopes, want.Scopes) || !got.CreatedAt.Equal(want.CreatedAt) ||
				(got.DisabledAt == nil) != (want.DisabledAt == nil) ||
				(got.DisabledAt != nil && !got.DisabledAt.Equal(*want.DisabledAt)) {
				t.Fatalf("Client = %#v, want %#v", got, want)
			}
		})
	}
}

func TestClientErrors(t *testing.T) { forEachBackend(t, testClientErrors) }

func testClientErrors(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	if err := db.AddClient(ctx, Client{ID: "c1", SecretHash: "h1", Principal: "alice"}); err != nil {
		t.Fatal(err)
	}
	t.Run("exists", func(t *testing.T) {
		err := db.AddClient(ctx, Client{ID: "c1", SecretHash: "h2", Principal: "bob"})
		if !errors.Is(err, ErrExists) {
			t.Fatalf("AddClient duplicate = %v, want ErrExists", err)
		}
		if strings.Contains(err.Error(), "h2") {
			t.Fatalf("error %q carries the secret hash", err)
		}
	})
	t.Run("not found", func(t *testing.T) {
		if _, err := db.Client(ctx, "c2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Client unknown = %v, want ErrNotFound", err)
		}
	})
}

func TestAddClientRejects(t *testing.T) { forEachBackend(t, testAddClientRejects) }

func testAddClientRejects(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	for _, tc := range []struct {
		name string
		c    Client
		want string
	}{
		{"no id", Client{SecretHash: "h", Principal: "p"}, "add client: id is empty"},
		{"no hash", Client{ID: "c", Principal: "p"}, "add client c: secret hash is empty"},
		{"no principal", Client{ID: "c", SecretHash: "h"}, "add client c: principal is empty"},
		{"empty scope", Client{ID: "c", SecretHash: "h", Principal: "p", Scopes: []string{""}},
			`add client c: scope "" is empty or contains a space or control character`},
		{"scope with space", Client{ID: "c", SecretHash: "h", Principal: "p", Scopes: []string{"a b"}},
			`add client c: scope "a b" is empty or contains a space or control character`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := db.AddClient(ctx, tc.c)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("AddClient = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestClientStringHidesSecretHash(t *testing.T) {
	c := Client{ID: "c1", SecretHash: "SECRETHASH", Principal: "alice", Scopes: []string{"eth_sign"}}
	for _, s := range []string{c.String(), fmt.Sprint(c), fmt.Sprintf("%v", c), fmt.Sprintf("%s", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c)} {
		if strings.Contains(s, "SECRETHASH") || !strings.Contains(s, "c1") {
			t.Fatalf("formatted client %q: want the id without the secret hash", s)
		}
	}
}

// TestDisableEnableClient: disabling sets DisabledAt (a second disable keeps the first time),
// enabling clears it; the rest of the row is untouched, and an unknown id is ErrNotFound.
func TestDisableEnableClient(t *testing.T) { forEachBackend(t, testDisableEnableClient) }

func testDisableEnableClient(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	created := time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)
	want := Client{ID: "c1", SecretHash: "h1", Principal: "alice", Scopes: []string{"eth_sign"}, CreatedAt: created}
	if err := db.AddClient(ctx, want); err != nil {
		t.Fatal(err)
	}
	first := created.Add(time.Hour)
	check := func(step string, got Client, err error, disabledAt *time.Time) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		stored, err := db.Client(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []Client{got, stored} {
			if c.ID != want.ID || c.SecretHash != want.SecretHash || c.Principal != want.Principal ||
				!slices.Equal(c.Scopes, want.Scopes) || !c.CreatedAt.Equal(created) ||
				(c.DisabledAt == nil) != (disabledAt == nil) || (c.DisabledAt != nil && !c.DisabledAt.Equal(*disabledAt)) {
				t.Fatalf("%s: client = %#v disabled at %v, want disabled at %v", step, c, c.DisabledAt, disabledAt)
			}
		}
	}
	c, err := db.DisableClient(ctx, "c1", first)
	check("disable", c, err, &first)
	c, err = db.DisableClient(ctx, "c1", first.Add(time.Hour))
	check("disable again", c, err, &first)
	c, err = db.EnableClient(ctx, "c1")
	check("enable", c, err, nil)
	c, err = db.EnableClient(ctx, "c1")
	check("enable again", c, err, nil)
	second := first.Add(2 * time.Hour)
	c, err = db.DisableClient(ctx, "c1", second)
	check("disable after enable", c, err, &second)

	for name, f := range map[string]func() (Client, error){
		"disable": func() (Client, error) { return db.DisableClient(ctx, "nobody", first) },
		"enable":  func() (Client, error) { return db.EnableClient(ctx, "nobody") },
	} {
		if _, err := f(); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s an unknown client = %v, want ErrNotFound", name, err)
		}
	}
}

func TestClientsList(t *testing.T) { forEachBackend(t, testClientsList) }

// testClientsList: Clients lists every client oldest first, disabled ones with DisabledAt,
// and never a secret hash.
func testClientsList(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	if got, err := db.Clients(ctx); err != nil || len(got) != 0 {
		t.Fatalf("no clients: %v %v", got, err)
	}
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	for i, id := range []string{"b", "a", "c"} {
		if err := db.AddClient(ctx, Client{ID: id, SecretHash: "hash-" + id, Principal: "p" + id, Scopes: []string{"eth_sign"}, CreatedAt: t0.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.DisableClient(ctx, "a", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := db.Clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range got {
		ids = append(ids, c.ID)
		if c.SecretHash != "" {
			t.Fatalf("client %s listed with its secret hash", c.ID)
		}
		if (c.DisabledAt != nil) != (c.ID == "a") || c.Principal != "p"+c.ID || !slices.Equal(c.Scopes, []string{"eth_sign"}) {
			t.Fatalf("client %#v", c)
		}
	}
	if !slices.Equal(ids, []string{"b", "a", "c"}) {
		t.Fatalf("order %v", ids)
	}
}
