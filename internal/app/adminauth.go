package app

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy"
)

// adminAuth is the one credential of the admin listener's APIs: every admin API route
// (products, OAuth clients, usage, webhooks, leases) takes a bearer token of admin.tokens.
// /healthz, /readyz and /metrics take none: probes and scrapers ask them without
// credentials, they reveal no account, key or client, and the admin listener is on loopback
// or a private network (admin.listen).
//
// The per-API lists of earlier releases (products.admin.tokens, auth.oauth.admin.tokens,
// webhooks.admin.tokens) are still read, for one release: their tokens join admin.tokens,
// and so are accepted by every admin route, with a warning at start.
type adminAuth struct {
	list   []proxy.AdminToken // admin.tokens and the deprecated lists, each hash once
	tokens proxy.AdminTokens
	seq    atomic.Uint64
}

// deprecatedAdminKeys are the admin token lists that admin.tokens replaces.
var deprecatedAdminKeys = []string{"products.admin.tokens", "auth.oauth.admin.tokens", "webhooks.admin.tokens"}

var defaultTokenName = regexp.MustCompile(`^tokens\[[0-9]+\]$`)

// startAdminAuth builds the one list of admin tokens, before any admin API is built.
func (a *App) startAdminAuth(context.Context) error {
	lists := map[string][]proxy.AdminToken{
		"admin.tokens":            a.cfg.Admin.Tokens,
		"products.admin.tokens":   a.cfg.Products.Admin.Tokens,
		"auth.oauth.admin.tokens": a.cfg.Auth.OAuth.Admin.Tokens,
		"webhooks.admin.tokens":   a.cfg.Webhooks.Admin.Tokens,
	}
	var list []proxy.AdminToken
	seen := map[string]bool{}
	for _, key := range append([]string{"admin.tokens"}, deprecatedAdminKeys...) {
		if key != "admin.tokens" && len(lists[key]) > 0 {
			a.log.Warn(key+" is deprecated: its tokens are accepted by every admin route, as those of admin.tokens; "+
				"move them to admin.tokens (the key will be removed in the next release)", zap.Int("tokens", len(lists[key])))
		}
		for _, t := range lists[key] {
			h := strings.ToLower(t.SHA256)
			if seen[h] {
				continue
			}
			seen[h] = true
			if key != "admin.tokens" && defaultTokenName.MatchString(t.Name) {
				t.Name = strings.TrimSuffix(key, "tokens") + t.Name // "products.admin.tokens[0]"
			}
			list = append(list, t)
		}
	}
	tokens, err := proxy.NewAdminTokens("admin.tokens", list)
	if err != nil {
		return err
	}
	a.adminAuth = &adminAuth{list: list, tokens: tokens}
	return nil
}

// require serves next only for a request with a token of the list: 403 when there is none
// (the admin APIs are off), 401 without a token or with another. Errors are the REST error
// object.
func (aa *adminAuth) require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var he *proxy.HTTPError
		if aa.tokens.Empty() {
			he = proxy.Errorf(http.StatusForbidden, "the admin API is off: no admin.tokens are configured")
		} else if _, err := aa.tokens.Authenticate(w, r); err != nil && !errors.As(err, &he) {
			he = proxy.Errorf(http.StatusUnauthorized, "Not Authorized")
		}
		if he != nil {
			id := proxy.HTTPRequestID(r, func() string { return "admin-auth-" + strconv.FormatUint(aa.seq.Add(1), 36) })
			w.Header().Set("X-Request-Id", id)
			proxy.WriteHTTPError(w, id, he)
			return
		}
		next.ServeHTTP(w, r)
	})
}
