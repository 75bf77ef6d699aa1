package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/lease"
	"github.com/web3gate/web3gate/middleware/auth"
	"github.com/web3gate/web3gate/openapi"
	"github.com/web3gate/web3gate/products"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/quotas"
	"github.com/web3gate/web3gate/webhooks"
)

// adminMux is the route table of the admin listener: /metrics, /healthz (the process is
// up), /readyz (the replica can serve: see serveReady), /leases (the leases this replica
// holds), /openapi.json (the OpenAPI document of both listeners), the admin product API, the
// OAuth client admin API, the quota usage of a client id and the webhook admin API. Every
// route but /metrics, /healthz, /readyz and /openapi.json takes a token of admin.tokens
// (adminauth.go).
func (a *App) adminMux(clients http.Handler) http.Handler {
	authed := a.adminAuth.require
	catalog, hooks := authed(a.catalog.AdminHandler()), authed(a.hooks.AdminHandler())
	mux := http.NewServeMux()
	mux.Handle("GET /leases", authed(http.HandlerFunc(a.serveLeases)))
	mux.Handle(products.AdminPath, catalog)
	mux.Handle(products.AdminPath+"/", catalog)
	// No list route: a 404 as for any unknown path, rather than net/http's redirect to the
	// subtree's path and a 404 there.
	mux.HandleFunc(auth.ClientsAdminPath, func(w http.ResponseWriter, r *http.Request) {
		proxy.WriteHTTPError(w, proxy.RequestID(r.Context()), proxy.Errorf(http.StatusNotFound, "no such route"))
	})
	mux.Handle(auth.ClientsAdminPath+"/", authed(clients))
	mux.Handle(quotas.AdminPath, authed(a.quotas.AdminHandler()))
	mux.Handle(webhooks.AdminPath, hooks)
	mux.Handle(webhooks.AdminPath+"/", hooks)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{Registry: a.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	mux.HandleFunc("GET /readyz", a.serveReady)
	full := sync.OnceValue(openapi.Full) // built at the first request: idle processes never need it
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(full())
	})
	return adminRequests(mux)
}

// adminRequests gives every request of the admin listener its request id before mux routes
// it: the caller's X-Request-Id when it is a valid one (as on the public listener), else a
// new one. The id is on the answer and in the request's context (proxy.RequestID), where the
// admin APIs take it for their answers and log lines. A request no route takes, or no
// method of its route, gets the REST error object (404; 405 with Allow) rather than
// net/http's plain text.
func adminRequests(mux *http.ServeMux) http.Handler {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read does not fail (Go 1.24+)
	prefix := "admin-" + hex.EncodeToString(rnd[:]) + "-"
	var seq atomic.Uint64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !proxy.ValidRequestID(id) {
			id = prefix + strconv.FormatUint(seq.Add(1), 36)
		}
		w.Header().Set("X-Request-Id", id)
		r = r.WithContext(proxy.WithRequestID(r.Context(), id))
		h, pattern := mux.Handler(r)
		if pattern != "" {
			h.ServeHTTP(w, r)
			return
		}
		// mux's own answer: not found, or 405 with the methods the path has in Allow.
		rec := &statusOnly{header: http.Header{}, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		he := proxy.Errorf(http.StatusNotFound, "no such route")
		if allow := rec.header.Get("Allow"); allow != "" && rec.code == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", allow)
			he = proxy.Errorf(http.StatusMethodNotAllowed, "method not allowed here (allowed: %s)", allow)
		}
		proxy.WriteHTTPError(w, id, he)
	})
}

// statusOnly keeps the status and headers of an answer and drops its body.
type statusOnly struct {
	header http.Header
	code   int
}

func (s *statusOnly) Header() http.Header         { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusOnly) WriteHeader(code int)        { s.code = code }

func (a *App) serveLeases(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Replica string       `json:"replica"`
		Leases  []lease.Held `json:"leases"`
	}{a.leases.Replica(), a.leases.HeldLeases()})
}

// readyChain is one chain in /readyz's answer.
type readyChain struct {
	ChainID uint64 `json:"chainId"`
	Name    string `json:"name"`
	// Healthy of Nodes nodes are in rotation; OK: at least one.
	Healthy int  `json:"healthyNodes"`
	Nodes   int  `json:"nodes"`
	OK      bool `json:"ok"`
}

// readyAnswer is /readyz's JSON body.
type readyAnswer struct {
	Status string `json:"status"` // ok, unavailable, draining
	// Reason says why the replica (or the chain asked for) cannot serve.
	Reason string       `json:"reason,omitempty"`
	Chains []readyChain `json:"chains"`
	Redis  string       `json:"redis,omitempty"`
}

// serveReady answers /readyz: 200 when this replica can serve, else 503 (docs/health.md).
// It cannot when it is draining (shutting down, see App.drain), when the store does not
// answer within admin.readyTimeout (every account, nonce and transaction lives there), or
// when no chain has a healthy upstream node. A chain without one is reported in the body,
// and the replica stays ready for the others; ?chain=ID asks for that chain alone (503 when
// it has no healthy node, 404 when it is not served here). A Redis outage leaves the
// replica ready: it serves from its local caches and the upstreams, and taking every
// replica out of the load balancer because their shared cache is down would turn a slower
// service into none.
func (a *App) serveReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	ans := readyAnswer{Status: "ok", Chains: []readyChain{}}
	switch {
	case a.redis == nil:
	case a.redis.Up():
		ans.Redis = "up"
	default:
		ans.Redis = "down: serving from local caches"
	}
	var only *readyChain
	var want uint64
	if q := r.URL.Query().Get("chain"); q != "" {
		id, err := strconv.ParseUint(q, 10, 64)
		if err != nil || id == 0 {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(readyAnswer{Status: "unavailable", Reason: "chain: must be a chain id (a positive integer)", Chains: []readyChain{}})
			return
		}
		want = id
	}
	var ok, down []string
	for _, p := range a.ups.Pools() {
		c := readyChain{ChainID: p.ChainID(), Name: p.Name()}
		for _, n := range p.Nodes() {
			c.Nodes++
			if n.Healthy {
				c.Healthy++
			}
		}
		c.OK = c.Healthy > 0
		name := p.Name() + " (" + strconv.FormatUint(p.ChainID(), 10) + ")"
		if c.OK {
			ok = append(ok, name)
		} else {
			down = append(down, name)
		}
		if want != 0 && c.ChainID == want {
			only = &c
			ans.Chains = append(ans.Chains, c)
		} else if want == 0 {
			ans.Chains = append(ans.Chains, c)
		}
	}
	if want != 0 && only == nil {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(readyAnswer{Status: "unavailable", Reason: fmt.Sprintf("chain %d is not served here", want), Chains: []readyChain{}})
		return
	}
	switch {
	case a.draining.Load():
		ans.Status, ans.Reason = "draining", "shutting down"
	case only != nil && !only.OK:
		ans.Status, ans.Reason = "unavailable", fmt.Sprintf("no healthy upstream node for chain %s", only.Name+" ("+strconv.FormatUint(only.ChainID, 10)+")")
	case len(ok) == 0 && len(down) > 0:
		ans.Status, ans.Reason = "unavailable", "no healthy upstream node for chain "+strings.Join(down, ", ")
	default:
		ctx, cancel := context.WithTimeout(r.Context(), a.cfg.Admin.ReadyTimeout)
		err := a.db.Ping(ctx)
		cancel()
		if err != nil {
			ans.Status, ans.Reason = "unavailable", err.Error()
		} else if len(down) > 0 && only == nil {
			ans.Reason = "serving without chain " + strings.Join(down, ", ") + ": no healthy upstream node"
		}
	}
	if ans.Status != "ok" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(ans)
}

// sharedChains reports whether a chain's cached answers and metadata records may go to
// Redis, which the replicas share: not those of a chain served by the embedded dev chain,
// which is this process's own (another replica's dev chain has the same id and other blocks,
// and it starts over at every start).
func sharedChains(cfg *config.Config) func(uint64) bool {
	private := map[uint64]bool{}
	for _, ch := range cfg.Upstreams.Chains {
		if slices.Contains(ch.URLs, "embedded") {
			private[ch.ChainID] = true
		}
	}
	return func(id uint64) bool { return !private[id] }
}
