package webhooks

import (
	"context"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/store"
)

// The tests run the deliverer against a real store (a SQLite file, or a PostgreSQL database
// of their own) and a real receiver on loopback.

func openStore(t *testing.T, driver string) *store.DB {
	t.Helper()
	cfg := store.Config{Driver: driver}
	if driver == store.DriverPostgres {
		cfg.DSN = testengine.Postgres(t)
	} else {
		cfg.Path = filepath.Join(t.TempDir(), "web3gate.db")
	}
	cfg.SetDefaults()
	db, err := store.Open(context.Background(), cfg, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// testConfig delivers fast, to loopback.
func testConfig() Config {
	c := Config{Enabled: true, Timeout: 2 * time.Second, MaxAttempts: 50, Backoff: 20 * time.Millisecond,
		MaxBackoff: 100 * time.Millisecond, Concurrency: 4, PollInterval: 20 * time.Millisecond,
		AllowNetworks: []string{"127.0.0.0/8"}}
	c.SetDefaults()
	return c
}

type testService struct {
	*Service
	reg  *prometheus.Registry
	stop func()
}

// startService runs a service on db until stopped (or the test ends).
func startService(t *testing.T, db *store.DB, cfg Config, deps Deps) *testService {
	t.Helper()
	return startTuned(t, db, cfg, deps, func(*Service) {})
}

// startTuned is startService with tune applied to the service before it runs.
func startTuned(t *testing.T, db *store.DB, cfg Config, deps Deps, tune func(*Service)) *testService {
	t.Helper()
	reg := prometheus.NewRegistry()
	deps.DB, deps.Registry, deps.Logger = db, reg, zaptest.NewLogger(t)
	s, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	tune(s)
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	var once sync.Once
	ts := &testService{Service: s, reg: reg, stop: func() { once.Do(func() { cancel(); <-done }) }}
	t.Cleanup(ts.stop)
	return ts
}

func (s *testService) count(outcome string) int {
	return int(testutil.ToFloat64(s.m.deliveries.WithLabelValues(outcome)))
}

// received is one delivery as a receiver saw it.
type received struct {
	Event    Event
	Verified error
	At       time.Time
}

// receiver is an endpoint on loopback: it verifies each delivery's signature with secret and
// answers with status(event) (nil: 204).
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	secret string
	status func(ev Event) int
	// location, when set, is sent as the Location header of every answer.
	location string

	mu  sync.Mutex
	got []received
}

func newReceiver(t *testing.T, secret string, status func(ev Event) int) *receiver {
	return newRedirector(t, secret, status, "")
}

// newRedirector is newReceiver answering with Location: location.
func newRedirector(t *testing.T, secret string, status func(ev Event) int, location string) *receiver {
	r := &receiver{t: t, secret: secret, status: status, location: location}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		r.t.Errorf("undecodable delivery %q: %v", body, err)
	}
	if id := req.Header.Get(EventIDHeader); id != ev.ID || req.Header.Get("Content-Type") != "application/json" {
		r.t.Errorf("headers %v for event %s", req.Header, ev.ID)
	}
	rec := received{Event: ev, At: time.Now(),
		Verified: Verify(r.secret, req.Header.Get(SignatureHeader), body, 5*time.Minute, time.Now())}
	status := http.StatusNoContent
	if r.status != nil {
		status = r.status(ev)
	}
	r.mu.Lock()
	r.got = append(r.got, rec)
	r.mu.Unlock()
	if r.location != "" {
		w.Header().Set("Location", r.location)
	}
	w.WriteHeader(status)
}

func (r *receiver) deliveries() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// addWebhook registers url for principal, with secret.
func addWebhook(t *testing.T, db *store.DB, id, principal, url, secret string) {
	t.Helper()
	ctx := context.Background()
	if err := db.Write(ctx, func(tx *store.DBTx) error {
		return tx.InsertWebhook(ctx, store.Webhook{ID: id, Principal: principal, URL: url, Secret: secret,
			Source: store.WebhookSourceAdmin, CreatedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
}

// newTx records a signed transaction of principal at nonce (no event yet) and returns its id.
func newTx(t *testing.T, db *store.DB, principal string, nonce uint64) int64 {
	t.Helper()
	ctx := context.Background()
	r := &store.TxRecord{ChainID: 1337, Address: common.HexToAddress("0x00000000000000000000000000000000000000a1"), Nonce: nonce,
		Principal: principal, Kind: store.KindSend, State: store.StateReserved, Fields: []byte(`{}`), MaxCost: big.NewInt(1)}
	if err := db.Write(ctx, func(tx *store.DBTx) error {
		if err := tx.InsertTx(ctx, r); err != nil {
			return err
		}
		return tx.SetSigned(ctx, r.ID, []byte{byte(nonce)}, common.BigToHash(big.NewInt(int64(nonce)+1)), store.StateSigned)
	}); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// advance moves transaction id through states, one store transaction each.
func advance(t *testing.T, db *store.DB, id int64, states ...string) {
	t.Helper()
	ctx := context.Background()
	from := store.StateSigned
	for _, st := range states {
		if err := db.Write(ctx, func(tx *store.DBTx) error { return tx.SetState(ctx, id, []string{from}, st, "") }); err != nil {
			t.Fatalf("%s → %s: %v", from, st, err)
		}
		from = st
	}
}

func deliveryLog(t *testing.T, db *store.DB, webhookID string) []store.WebhookDelivery {
	t.Helper()
	ctx := context.Background()
	var ds []store.WebhookDelivery
	if err := db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		ds, err = tx.WebhookDeliveries(ctx, webhookID, 500)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ds
}
