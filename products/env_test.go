package products

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// testNow is the clock of the tests' services.
var testNow = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// env is a catalog on a real SQLite file, its list route served by a real proxy server on
// loopback and its admin API by a real net/http server.
type env struct {
	t     *testing.T
	ctx   context.Context
	path  string // the SQLite file
	db    *store.DB
	svc   *Service
	api   string // base URL of the public server
	admin string // base URL of the admin server
	logs  *observer.ObservedLogs
}

func newEnv(t *testing.T, cfg Config, deps Deps) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, path: filepath.Join(t.TempDir(), "web3gate.db")}
	sc := store.Config{Path: e.path}
	sc.SetDefaults()
	db, err := store.Open(ctx, sc, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	e.db = db

	core, logs := observer.New(zap.DebugLevel)
	e.logs = logs
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	deps.DB, deps.Logger = db, zap.New(core)
	if deps.Now == nil {
		deps.Now = func() time.Time { return testNow }
	}
	if e.svc, err = New(context.Background(), cfg, deps); err != nil {
		t.Fatal(err)
	}

	var sc2 proxy.Config
	sc2.SetDefaults()
	srv, err := proxy.New(sc2, proxy.Deps{Logger: zap.NewNop(), Registry: prometheus.NewRegistry(), Routes: []*proxy.Route{
		{Name: "products", Method: http.MethodGet, Pattern: "/v1/products", REST: e.svc.ListHandler()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	e.api = "http://" + ln.Addr().String()

	mux := http.NewServeMux()
	mux.Handle(AdminPath, e.svc.AdminHandler())
	mux.Handle(AdminPath+"/", e.svc.AdminHandler())
	as := httptest.NewServer(mux)
	t.Cleanup(as.Close)
	e.admin = as.URL
	return e
}

// importDocs parses the product documents and imports them.
func (e *env) importDocs(docs ...[]byte) {
	e.t.Helper()
	raw := "[" + string(joinDocs(docs)) + "]"
	ps, err := ParseFile("seed.json", []byte(raw))
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := Import(e.ctx, e.db, ps); err != nil {
		e.t.Fatal(err)
	}
}

func joinDocs(docs [][]byte) []byte {
	var parts []string
	for _, d := range docs {
		parts = append(parts, string(d))
	}
	return []byte(strings.Join(parts, ","))
}

// rows reads the products table straight from the file, through a connection of its own:
// "id body" lines in id order.
func (e *env) rows() string {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.path+"?mode=ro")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.QueryContext(e.ctx, `SELECT id, body FROM products ORDER BY id`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rs.Close()
	var b strings.Builder
	for rs.Next() {
		var id, body string
		if err := rs.Scan(&id, &body); err != nil {
			e.t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s\n", id, body)
	}
	if err := rs.Err(); err != nil {
		e.t.Fatal(err)
	}
	return b.String()
}

// exec runs a statement on the file through a connection of its own (nft_minted rows, as
// the owners indexer writes them).
func (e *env) exec(query string, args ...any) {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(e.ctx, query, args...); err != nil {
		e.t.Fatal(err)
	}
}

// get GETs url and returns the status, headers and body.
func (e *env) get(url string) (int, http.Header, []byte) {
	e.t.Helper()
	return e.do(http.MethodGet, url, nil, nil)
}

func (e *env) do(method, url string, body io.Reader, header map[string]string) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, method, url, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// restError decodes a REST error body.
func restError(t *testing.T, body []byte) proxy.RESTError {
	t.Helper()
	var v struct {
		Error *proxy.RESTError `json:"error"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Error == nil {
		t.Fatalf("not a REST error body: %s", body)
	}
	return *v.Error
}

// doc is goodProduct with the fields of set replaced (a nil value deletes the field).
func doc(t *testing.T, set map[string]any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(goodProduct), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
