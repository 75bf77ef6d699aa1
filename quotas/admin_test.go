package quotas

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAdminUsage: GET /v1/admin/usage over HTTP reports a client's day and month (the store's
// flushed total plus this replica's unflushed charges, the quota and what remains, the
// period's start and reset); a client id with no usage gets zeros, one without a quota nulls
// for quota and remaining; a missing, repeated or invalid clientId is a 400, another method a
// 405, all with the REST error object.
func TestAdminUsage(t *testing.T) { forEachBackend(t, testAdminUsage) }

func testAdminUsage(t *testing.T, driver string) {
	db := openStore(t, storeConfig(t, driver))
	clk := &clock{t: lateNov}
	b := newBook(t, db, Config{Clients: []ClientQuota{{ClientID: "abc", Daily: 1000, Monthly: 50_000}}}, clk.Now, nil)
	srv := httptest.NewServer(b.AdminHandler())
	t.Cleanup(srv.Close)

	charge(t, b.Book, "abc", 300)
	flush(t, b.Book)
	charge(t, b.Book, "abc", 20) // not flushed: counted from memory
	charge(t, b.Book, "free", 7)

	get := func(query string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + AdminPath + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
		return resp.StatusCode, string(body)
	}
	type usage struct {
		Start     time.Time `json:"start"`
		Used      uint64    `json:"used"`
		Quota     *uint64   `json:"quota"`
		Remaining *uint64   `json:"remaining"`
		ResetsAt  time.Time `json:"resetsAt"`
	}
	type answer struct {
		Usage struct {
			ClientID string `json:"clientId"`
			Enforced bool   `json:"enforced"`
			Day      usage  `json:"day"`
			Month    usage  `json:"month"`
		} `json:"usage"`
		Error any `json:"error"`
	}
	read := func(query string) answer {
		t.Helper()
		status, body := get(query)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", query, status, body)
		}
		var a answer
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			t.Fatalf("%s: %v in %s", query, err, body)
		}
		if a.Error != nil || !strings.Contains(body, `"error":null`) {
			t.Fatalf("%s: error member %v", query, a.Error)
		}
		return a
	}
	ptr := func(n uint64) *uint64 { return &n }
	same := func(what string, got, want usage) {
		t.Helper()
		eq := func(a, b *uint64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
		if !got.Start.Equal(want.Start) || got.Used != want.Used || !eq(got.Quota, want.Quota) || !eq(got.Remaining, want.Remaining) || !got.ResetsAt.Equal(want.ResetsAt) {
			t.Errorf("%s: %+v, want %+v", what, got, want)
		}
	}

	a := read("?clientId=abc")
	if a.Usage.ClientID != "abc" || !a.Usage.Enforced {
		t.Fatalf("abc: %+v", a.Usage)
	}
	same("abc day", a.Usage.Day, usage{Start: nov27, Used: 320, Quota: ptr(1000), Remaining: ptr(680), ResetsAt: nov27.AddDate(0, 0, 1)})
	same("abc month", a.Usage.Month, usage{Start: nov1, Used: 320, Quota: ptr(50_000), Remaining: ptr(49_680), ResetsAt: dec1})

	f := read("?clientId=free")
	if f.Usage.Enforced {
		t.Fatal("free: enforced without a quota")
	}
	same("free day", f.Usage.Day, usage{Start: nov27, Used: 7, ResetsAt: nov27.AddDate(0, 0, 1)})

	n := read("?clientId=" + "never%20seen")
	if n.Usage.ClientID != "never seen" {
		t.Fatalf("client id %q", n.Usage.ClientID)
	}
	same("unknown month", n.Usage.Month, usage{Start: nov1, Used: 0, ResetsAt: dec1})

	// A spent quota: remaining 0, never negative.
	charge(t, b.Book, "abc", 900)
	same("spent", read("?clientId=abc").Usage.Day, usage{Start: nov27, Used: 1220, Quota: ptr(1000), Remaining: ptr(0), ResetsAt: nov27.AddDate(0, 0, 1)})

	for _, c := range []struct{ query, want string }{
		{"", "clientId: required"},
		{"?clientId=", "clientId: required"},
		{"?client=abc", "clientId: required"},
		{"?clientId=a&clientId=b", "clientId: give it once"},
		{"?clientId=a%00b", "clientId: must be valid UTF-8"},
		{"?clientId=%ff", "clientId: must be valid UTF-8"},
		{"?clientId=" + strings.Repeat("x", 257), "clientId: must be at most 256 bytes"},
		{"?clientId=%zz", "the query string is malformed"},
	} {
		status, body := get(c.query)
		if status != http.StatusBadRequest || !strings.Contains(body, c.want) || !strings.Contains(body, `"code":400`) {
			t.Errorf("%q: %d %s, want 400 with %q", c.query, status, body, c.want)
		}
	}
	resp, err := http.Post(srv.URL+AdminPath+"?clientId=abc", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}
