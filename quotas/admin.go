package quotas

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// AdminPath is the admin listener's usage route.
const AdminPath = "/v1/admin/usage"

// adminHandler serves AdminPath; seq numbers its requests (X-Request-Id "usage-<n>").
type adminHandler struct {
	b   *Book
	seq atomic.Uint64
}

// AdminHandler serves GET /v1/admin/usage?clientId=<id> for the admin listener (register it
// for AdminPath): the client id's usage of the current UTC day and month, as
//
//	{"usage": {"clientId": "abc", "enforced": true,
//	  "day":   {"start": "2026-11-27T00:00:00Z", "used": 1200, "quota": 1000000, "remaining": 998800, "resetsAt": "2026-11-28T00:00:00Z"},
//	  "month": {"start": "2026-11-01T00:00:00Z", "used": 5400, "quota": null, "remaining": null, "resetsAt": "2026-12-01T00:00:00Z"}},
//	 "error": null}
//
// used is every replica's flushed usage (the store) and this replica's unflushed charges; a
// client id with no usage has zeros; quota and remaining are null in a period without a quota.
// Errors are the REST error object: 400 for a missing or invalid clientId, 405 for another
// method, 503 when the store cannot be read.
func (b *Book) AdminHandler() http.Handler { return &adminHandler{b: b} }

func (h *adminHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := proxy.HTTPRequestID(r, func() string { return "usage-" + strconv.FormatUint(h.seq.Add(1), 36) })
	w.Header().Set("X-Request-Id", reqID)
	u, err := h.serve(w, r)
	if err != nil {
		var he *proxy.HTTPError
		if !errors.As(err, &he) {
			if errors.Is(err, store.ErrUnavailable) {
				he = proxy.Errorf(http.StatusServiceUnavailable, "store unavailable: the usage cannot be read now")
			} else {
				if !errors.Is(err, context.Canceled) {
					h.b.log.Error("usage admin route: internal error", zap.String("req_id", reqID), zap.Error(err))
				}
				he = proxy.Errorf(http.StatusInternalServerError, "internal error")
			}
		}
		proxy.WriteHTTPError(w, reqID, he)
		return
	}
	body, _ := json.Marshal(struct {
		Usage *ClientUsage `json:"usage"`
		Error any          `json:"error"`
	}{Usage: u})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func (h *adminHandler) serve(w http.ResponseWriter, r *http.Request) (*ClientUsage, error) {
	if r.URL.Path != AdminPath {
		return nil, proxy.Errorf(http.StatusNotFound, "no such route")
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return nil, proxy.Errorf(http.StatusMethodNotAllowed, "method not allowed here (allowed: GET, HEAD)")
	}
	// Strictly: url.URL.Query drops malformed pairs silently.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, proxy.Errorf(http.StatusBadRequest, "the query string is malformed")
	}
	ids := q["clientId"]
	switch {
	case len(ids) == 0 || ids[0] == "":
		return nil, proxy.Errorf(http.StatusBadRequest, "clientId: required (GET %s?clientId=<client id>)", AdminPath)
	case len(ids) > 1:
		return nil, proxy.Errorf(http.StatusBadRequest, "clientId: give it once")
	case len(ids[0]) > maxClientIDLen:
		return nil, proxy.Errorf(http.StatusBadRequest, "clientId: must be at most %d bytes", maxClientIDLen)
	case !recordable(ids[0]):
		return nil, proxy.Errorf(http.StatusBadRequest, "clientId: must be valid UTF-8 without NUL characters")
	}
	return h.b.Usage(r.Context(), ids[0])
}
