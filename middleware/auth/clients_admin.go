package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// ClientsAdminPath is the collection of the OAuth client admin API; register the handler for
// ClientsAdminPath + "/".
const ClientsAdminPath = "/v1/admin/clients"

// ClientsAdminStore reads and changes the state of OAuth clients; *store.DB is one.
type ClientsAdminStore interface {
	Client(ctx context.Context, id string) (store.Client, error)
	DisableClient(ctx context.Context, id string, now time.Time) (store.Client, error)
	EnableClient(ctx context.Context, id string) (store.Client, error)
}

// ClientsAdminDeps are the client admin API's collaborators.
type ClientsAdminDeps struct {
	Clients ClientsAdminStore
	// Logger receives one line per change, naming the admin token used (never the token).
	Logger *zap.Logger
	// Now is the clock of DisabledAt; nil is time.Now.
	Now func() time.Time
}

// ClientsAdmin is the OAuth client admin API, for the admin listener:
//
//	GET  /v1/admin/clients/{id}          the client (200; 404)
//	POST /v1/admin/clients/{id}/disable  disable it (200; a disabled client keeps its disabledAt)
//	POST /v1/admin/clients/{id}/enable   enable it (200)
//
// Every request needs Authorization: Bearer <token> with a token of auth.oauth.admin.tokens
// (401 otherwise); with none configured the API is off (403). Answers are {"client": ...,
// "error": null}, the client without its secret hash; errors the REST error object: 404 an
// unknown client or route, 405 another method (with Allow).
type ClientsAdmin struct {
	clients  ClientsAdminStore
	log      *zap.Logger
	now      func() time.Time
	tokens   proxy.AdminTokens
	idPrefix string
	idSeq    atomic.Uint64
}

var _ http.Handler = (*ClientsAdmin)(nil)

// NewClientsAdmin builds the API of a validated, defaulted config.
func NewClientsAdmin(cfg ClientsAdminConfig, deps ClientsAdminDeps) (*ClientsAdmin, error) {
	if deps.Clients == nil {
		return nil, errors.New("clients admin: a client store is required")
	}
	a := &ClientsAdmin{clients: deps.Clients, log: deps.Logger, now: deps.Now}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	if a.now == nil {
		a.now = time.Now
	}
	var err error
	if a.tokens, err = proxy.NewAdminTokens("auth.oauth.admin.tokens", cfg.Tokens); err != nil {
		return nil, err
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("clients admin: %w", err)
	}
	a.idPrefix = "admin-clients-" + hex.EncodeToString(rnd[:]) + "-"
	return a, nil
}

// clientJSON is a client as the API shows it: never its secret hash.
type clientJSON struct {
	ID         string     `json:"id"`
	Principal  string     `json:"principal"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"createdAt"`
	DisabledAt *time.Time `json:"disabledAt"`
}

// ServeHTTP implements http.Handler.
func (a *ClientsAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := proxy.HTTPRequestID(r, func() string { return a.idPrefix + strconv.FormatUint(a.idSeq.Add(1), 36) })
	w.Header().Set("X-Request-Id", reqID)
	c, err := a.serve(w, r, reqID)
	if err != nil {
		a.fail(w, r, reqID, err)
		return
	}
	if c.Scopes == nil {
		c.Scopes = []string{}
	}
	body, err := json.Marshal(struct {
		Client clientJSON `json:"client"`
		Error  any        `json:"error"`
	}{Client: clientJSON{ID: c.ID, Principal: c.Principal, Scopes: c.Scopes, CreatedAt: c.CreatedAt.UTC(), DisabledAt: utc(c.DisabledAt)}})
	if err != nil {
		a.fail(w, r, reqID, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func (a *ClientsAdmin) serve(w http.ResponseWriter, r *http.Request, reqID string) (store.Client, error) {
	if a.tokens.Empty() {
		return store.Client{}, proxy.Errorf(http.StatusForbidden, "the client admin API is off: no auth.oauth.admin.tokens are configured")
	}
	token, err := a.tokens.Authenticate(w, r)
	if err != nil {
		return store.Client{}, err
	}
	rest, ok := strings.CutPrefix(r.URL.Path, ClientsAdminPath+"/")
	id, action, _ := strings.Cut(rest, "/")
	if !ok || id == "" || strings.Contains(action, "/") {
		return store.Client{}, proxy.Errorf(http.StatusNotFound, "no such route")
	}
	ctx := r.Context()
	switch action {
	case "":
		if r.Method != http.MethodGet {
			return store.Client{}, notAllowed(w, r, http.MethodGet)
		}
		return a.found(a.clients.Client(ctx, id))
	case "disable", "enable":
		if r.Method != http.MethodPost {
			return store.Client{}, notAllowed(w, r, http.MethodPost)
		}
		var c store.Client
		if action == "disable" {
			c, err = a.found(a.clients.DisableClient(ctx, id, a.now()))
		} else {
			c, err = a.found(a.clients.EnableClient(ctx, id))
		}
		if err != nil {
			return store.Client{}, err
		}
		a.log.Info("oauth client "+action+"d", zap.String("req_id", reqID), zap.String("client_id", c.ID),
			zap.Bool("disabled", c.DisabledAt != nil), zap.String("admin_token", token))
		return c, nil
	}
	return store.Client{}, proxy.Errorf(http.StatusNotFound, "no such route")
}

// found maps the store's ErrNotFound to a 404.
func (a *ClientsAdmin) found(c store.Client, err error) (store.Client, error) {
	if errors.Is(err, store.ErrNotFound) {
		return store.Client{}, proxy.Errorf(http.StatusNotFound, "no such client")
	}
	return c, err
}

func notAllowed(w http.ResponseWriter, r *http.Request, method string) error {
	w.Header().Set("Allow", method)
	return proxy.Errorf(http.StatusMethodNotAllowed, "method %s is not allowed here (allowed: %s)", clipMethod(r.Method), method)
}

func clipMethod(m string) string {
	if len(m) > 16 {
		return m[:16] + "…"
	}
	return m
}

// fail writes the REST error object of err: its status and message for a *proxy.HTTPError,
// else 500 with the cause logged.
func (a *ClientsAdmin) fail(w http.ResponseWriter, r *http.Request, reqID string, err error) {
	var he *proxy.HTTPError
	if !errors.As(err, &he) {
		a.log.Error("client admin API: internal error", zap.String("req_id", reqID), zap.String("method", clipMethod(r.Method)), zap.Error(err))
		he = proxy.Errorf(http.StatusInternalServerError, "internal error")
	}
	proxy.WriteHTTPError(w, reqID, he)
}
