package webhooks

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// AdminPath is the collection of the webhook admin API; register the handler for AdminPath
// and AdminPath + "/".
const AdminPath = "/v1/admin/webhooks"

// Limits of the admin API.
const (
	maxAdminBody     = 64 << 10
	defaultLogLimit  = 50
	maxLogLimit      = 500
	adminRequestName = "admin-webhooks-"
)

// webhookJSON is an endpoint as the API shows it: the secret only in the answer that
// created it.
type webhookJSON struct {
	ID        string    `json:"id"`
	Principal string    `json:"principal"`
	URL       string    `json:"url"`
	Secret    string    `json:"secret,omitempty"`
	Source    string    `json:"source"`
	Enabled   bool      `json:"enabled"`
	CreatedAt time.Time `json:"createdAt"`
}

func toJSON(w store.Webhook) webhookJSON {
	return webhookJSON{ID: w.ID, Principal: w.Principal, URL: w.URL, Source: w.Source, Enabled: w.Enabled, CreatedAt: w.CreatedAt.UTC()}
}

// deliveryJSON is one entry of an endpoint's delivery log.
type deliveryJSON struct {
	ID            int64      `json:"id"`
	EventID       string     `json:"eventId"`
	Type          string     `json:"type"`
	TransactionID string     `json:"transactionId"`
	Hash          *string    `json:"hash"`
	State         string     `json:"state"` // pending, delivered, dead
	Attempts      int        `json:"attempts"`
	NextAttemptAt *time.Time `json:"nextAttemptAt"` // pending only
	LastStatus    *int       `json:"lastStatus"`
	LastError     *string    `json:"lastError"`
	DeliveredAt   *time.Time `json:"deliveredAt"`
	CreatedAt     time.Time  `json:"createdAt"`
}

// AdminHandler serves the webhook admin API, for the admin listener:
//
//	POST   /v1/admin/webhooks                      {principal, url} → 201 {webhook} with its secret, shown only here
//	GET    /v1/admin/webhooks?principal=           the endpoints (of one principal), without secrets
//	DELETE /v1/admin/webhooks/{id}                 204; 409 for an endpoint of webhooks.endpoints
//	GET    /v1/admin/webhooks/{id}/deliveries?limit=  the delivery log, newest first (limit 1..500, default 50)
//
// Every request needs Authorization: Bearer <token> with a token of webhooks.admin.tokens
// (401 otherwise); with none configured the API is off (403). Errors are the REST error
// object: 400 invalid input, 404 unknown endpoint or route, 405 (with Allow), 409 a
// duplicate endpoint, 413 a body over 64 KiB, 415 a Content-Type other than JSON.
func (s *Service) AdminHandler() http.Handler {
	var seq atomic.Uint64
	var rnd [4]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read does not fail (Go 1.24+)
	prefix := adminRequestName + hex.EncodeToString(rnd[:]) + "-"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqID := proxy.HTTPRequestID(r, func() string { return prefix + strconv.FormatUint(seq.Add(1), 36) })
		w.Header().Set("X-Request-Id", reqID)
		status, body, err := s.serveAdmin(w, r, reqID)
		if err != nil {
			var he *proxy.HTTPError
			if !errors.As(err, &he) {
				s.log.Error("webhook admin API: internal error", zap.String("req_id", reqID), zap.Error(err))
				he = proxy.Errorf(http.StatusInternalServerError, "internal error")
			}
			proxy.WriteHTTPError(w, reqID, he)
			return
		}
		if body == nil {
			w.WriteHeader(status)
			return
		}
		raw, err := json.Marshal(body)
		if err != nil {
			proxy.WriteHTTPError(w, reqID, proxy.Errorf(http.StatusInternalServerError, "internal error"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(raw)
	})
}

func notAllowed(w http.ResponseWriter, r *http.Request, methods ...string) error {
	w.Header().Set("Allow", strings.Join(methods, ", "))
	return proxy.Errorf(http.StatusMethodNotAllowed, "method %s is not allowed here (allowed: %s)", clip(r.Method), strings.Join(methods, ", "))
}

func (s *Service) serveAdmin(w http.ResponseWriter, r *http.Request, reqID string) (int, any, error) {
	if s.tokens.Empty() {
		return 0, nil, proxy.Errorf(http.StatusForbidden, "the webhook admin API is off: no webhooks.admin.tokens are configured")
	}
	token, err := s.tokens.Authenticate(w, r)
	if err != nil {
		return 0, nil, err
	}
	if r.URL.Path == AdminPath {
		switch r.Method {
		case http.MethodPost:
			return s.create(w, r, reqID, token)
		case http.MethodGet:
			return s.list(r)
		}
		return 0, nil, notAllowed(w, r, http.MethodGet, http.MethodPost)
	}
	rest, _ := strings.CutPrefix(r.URL.Path, AdminPath+"/")
	id, sub, _ := strings.Cut(rest, "/")
	switch {
	case id == "":
	case sub == "":
		if r.Method != http.MethodDelete {
			return 0, nil, notAllowed(w, r, http.MethodDelete)
		}
		return s.delete(r, reqID, token, id)
	case sub == "deliveries":
		if r.Method != http.MethodGet {
			return 0, nil, notAllowed(w, r, http.MethodGet)
		}
		return s.deliveries(r, id)
	}
	return 0, nil, proxy.Errorf(http.StatusNotFound, "no such route")
}

func (s *Service) create(w http.ResponseWriter, r *http.Request, reqID, token string) (int, any, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return 0, nil, proxy.Errorf(http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		}
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return 0, nil, proxy.Errorf(http.StatusRequestEntityTooLarge, "the body exceeds %d bytes", maxAdminBody)
		}
		return 0, nil, proxy.Errorf(http.StatusBadRequest, "reading the body: %v", err)
	}
	var in struct {
		Principal string `json:"principal"`
		URL       string `json:"url"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || dec.More() {
		return 0, nil, proxy.Errorf(http.StatusBadRequest, `the body must be one JSON object {"principal": ..., "url": ...} (%s)`, jsonProblem(err))
	}
	if err := checkPrincipal(in.Principal); err != nil {
		return 0, nil, proxy.Errorf(http.StatusBadRequest, "principal: %v", err)
	}
	if err := checkURL(in.URL, s.policy); err != nil {
		return 0, nil, proxy.Errorf(http.StatusBadRequest, "url: %v", err)
	}
	id, err := newID()
	if err != nil {
		return 0, nil, err
	}
	secret, err := newSecret()
	if err != nil {
		return 0, nil, err
	}
	wh := store.Webhook{ID: id, Principal: in.Principal, URL: in.URL, Secret: secret, Source: store.WebhookSourceAdmin, Enabled: true, CreatedAt: s.now()}
	ctx := r.Context()
	err = s.db.Write(ctx, func(tx *store.DBTx) error { return tx.InsertWebhook(ctx, wh) })
	if errors.Is(err, store.ErrExists) {
		return 0, nil, proxy.Errorf(http.StatusConflict, "the principal has an endpoint with this url already")
	}
	if err != nil {
		return 0, nil, err
	}
	s.log.Info("webhook endpoint created", zap.String("req_id", reqID), zap.String("webhook", id),
		zap.String("principal", in.Principal), zap.String("admin_token", token))
	out := toJSON(wh)
	out.Secret = secret
	w.Header().Set("Location", AdminPath+"/"+id)
	return http.StatusCreated, struct {
		Webhook webhookJSON `json:"webhook"`
		Error   any         `json:"error"`
	}{Webhook: out}, nil
}

func jsonProblem(err error) string {
	if err == nil {
		return "more than one value"
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return "invalid JSON at byte " + strconv.FormatInt(se.Offset, 10)
	case errors.As(err, &te):
		return te.Field + " must be a string"
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return "unknown field " + clip(strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return "invalid JSON"
}

func (s *Service) list(r *http.Request) (int, any, error) {
	principal := r.URL.Query().Get("principal")
	var ws []store.Webhook
	ctx := r.Context()
	if err := s.db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		ws, err = tx.Webhooks(ctx, principal)
		return err
	}); err != nil {
		return 0, nil, err
	}
	out := make([]webhookJSON, 0, len(ws))
	for _, w := range ws {
		out = append(out, toJSON(w))
	}
	return http.StatusOK, struct {
		Webhooks []webhookJSON `json:"webhooks"`
		Error    any           `json:"error"`
	}{Webhooks: out}, nil
}

func (s *Service) delete(r *http.Request, reqID, token, id string) (int, any, error) {
	ctx := r.Context()
	err := s.db.Write(ctx, func(tx *store.DBTx) error {
		w, err := tx.Webhook(ctx, id)
		if err != nil {
			return err
		}
		if w.Source == store.WebhookSourceConfig {
			return proxy.Errorf(http.StatusConflict, "the endpoint is configured in webhooks.endpoints: remove it there (it is disabled at the next start)")
		}
		return tx.DeleteWebhook(ctx, id)
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, proxy.Errorf(http.StatusNotFound, "no such webhook")
	}
	if err != nil {
		return 0, nil, err
	}
	s.log.Info("webhook endpoint deleted", zap.String("req_id", reqID), zap.String("webhook", id), zap.String("admin_token", token))
	return http.StatusNoContent, nil, nil
}

func (s *Service) deliveries(r *http.Request, id string) (int, any, error) {
	limit := defaultLogLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLogLimit {
			return 0, nil, proxy.Errorf(http.StatusBadRequest, "limit: must be an integer between 1 and %d", maxLogLimit)
		}
		limit = n
	}
	ctx := r.Context()
	var ds []store.WebhookDelivery
	err := s.db.Read(ctx, func(tx *store.DBTx) error {
		if _, err := tx.Webhook(ctx, id); err != nil {
			return err
		}
		var err error
		ds, err = tx.WebhookDeliveries(ctx, id, limit)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, proxy.Errorf(http.StatusNotFound, "no such webhook")
	}
	if err != nil {
		return 0, nil, err
	}
	out := make([]deliveryJSON, 0, len(ds))
	for _, d := range ds {
		ev := newEvent(d.Event)
		j := deliveryJSON{ID: d.ID, EventID: ev.ID, Type: ev.Type, TransactionID: ev.Transaction.ID, Hash: ev.Transaction.Hash,
			State: d.State, Attempts: d.Attempts, CreatedAt: d.CreatedAt.UTC()}
		if d.State == store.DeliveryPending {
			next := d.NextAttemptAt.UTC()
			j.NextAttemptAt = &next
		}
		if d.LastStatus != 0 {
			st := d.LastStatus
			j.LastStatus = &st
		}
		if d.LastError != "" {
			e := d.LastError
			j.LastError = &e
		}
		if d.DeliveredAt != nil {
			at := d.DeliveredAt.UTC()
			j.DeliveredAt = &at
		}
		out = append(out, j)
	}
	return http.StatusOK, struct {
		Deliveries []deliveryJSON `json:"deliveries"`
		Error      any            `json:"error"`
	}{Deliveries: out}, nil
}
