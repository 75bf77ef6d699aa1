package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/lease"
	"github.com/web3gate/web3gate/middleware/auth"
	"github.com/web3gate/web3gate/products"
	"github.com/web3gate/web3gate/quotas"
	"github.com/web3gate/web3gate/webhooks"
)

// adminMux is the route table of the admin listener: /metrics, /healthz (the process is
// up), /readyz (every chain has a healthy upstream and the store answers), /leases (the
// leases this replica holds), the admin product API, the OAuth client admin API, the quota
// usage of a client id and the webhook admin API.
func (a *App) adminMux(clients http.Handler) http.Handler {
	catalog, hooks := a.catalog.AdminHandler(), a.hooks.AdminHandler()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /leases", a.serveLeases)
	mux.Handle(products.AdminPath, catalog)
	mux.Handle(products.AdminPath+"/", catalog)
	mux.Handle(auth.ClientsAdminPath+"/", clients)
	mux.Handle(quotas.AdminPath, a.quotas.AdminHandler())
	mux.Handle(webhooks.AdminPath, hooks)
	mux.Handle(webhooks.AdminPath+"/", hooks)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{Registry: a.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	mux.HandleFunc("GET /readyz", a.serveReady)
	return mux
}

func (a *App) serveLeases(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Replica string       `json:"replica"`
		Leases  []lease.Held `json:"leases"`
	}{a.leases.Replica(), a.leases.HeldLeases()})
}

// serveReady answers /readyz. It also says, when Redis is configured, whether it is in
// use. A Redis outage leaves the replica ready (200): it serves from its local caches and
// the upstreams, and taking every replica out of the load balancer because their shared
// cache is down would turn a slower service into none. A store that does not answer within
// admin.readyTimeout makes it unready (503): every account, nonce and transaction lives
// there.
func (a *App) serveReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	redis := ""
	switch {
	case a.redis == nil:
	case a.redis.Up():
		redis = `,"redis":"up"`
	default:
		redis = `,"redis":"down: serving from local caches"`
	}
	err := a.ups.Ready()
	if err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), a.cfg.Admin.ReadyTimeout)
		err = a.db.Ping(ctx)
		cancel()
	}
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, `{"status":"unavailable","reason":%q%s}`, err.Error(), redis)
		return
	}
	_, _ = io.WriteString(w, `{"status":"ok"`+redis+`}`)
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
