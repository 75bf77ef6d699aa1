package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/internal/logx"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// ClientStore finds OAuth clients; *store.DB is one.
type ClientStore interface {
	Client(ctx context.Context, id string) (store.Client, error)
}

// TokenEndpointDeps are the token endpoint's collaborators.
type TokenEndpointDeps struct {
	Clients ClientStore
	Issuer  *Issuer
	// Logger receives one line per issued token, one warning per failed client
	// authentication and per lockout, and, at debug, why any other request was refused.
	// None ever holds a secret or a token.
	Logger *zap.Logger
	// Registry receives web3gate_oauth_token_failures_total; nil registers nothing.
	Registry prometheus.Registerer
	// Now is the throttle's clock; nil is time.Now.
	Now func() time.Time
	// Flood bounds the warnings of refused requests per reason (log.flood), so that a flood
	// of bad requests does not flood the log; nil: a bound of the defaults.
	Flood *logx.Limiter
}

// TokenEndpoint is POST /v1/oauth2/token: the client-credentials grant of RFC 6749 §4.4.
// It answers with the token response of §5.1 or the error response of §5.2, never with
// web3gate's REST error object.
//
// A request goes through, in order: its form; the throttles of its source address and of its
// client id (429 slow_down, before any store read or hash, for a key locked out or with its
// maximum of attempts in flight); the store; a verification slot (503
// temporarily_unavailable when the queue is full or no slot frees in time); the argon2id
// verification.
type TokenEndpoint struct {
	clients   ClientStore
	issuer    *Issuer
	log       *zap.Logger
	flood     *logx.Limiter
	now       func() time.Time
	dummyHash string // verified against when the client id is unknown, so that takes as long
	gate      *hashGate
	byClient  *throttle // keyed by clientKey
	byAddress *throttle // keyed by addressKey
	failures  *prometheus.CounterVec
}

var _ proxy.RESTHandler = (*TokenEndpoint)(nil)

// Failure reasons, the label values of web3gate_oauth_token_failures_total.
const (
	failUnknownClient = "unknown_client" // no stored client has the id
	failWrongSecret   = "wrong_secret"
	failDisabled      = "disabled"   // the right secret of a disabled client
	failThrottled     = "throttled"  // refused by a throttle (429)
	failOverloaded    = "overloaded" // no verification slot (503)
)

// NewTokenEndpoint builds the endpoint of a validated, defaulted config.
func NewTokenEndpoint(cfg OAuthConfig, deps TokenEndpointDeps) (*TokenEndpoint, error) {
	if deps.Clients == nil || deps.Issuer == nil {
		return nil, errors.New("token endpoint: a client store and an issuer are required")
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	flood := deps.Flood
	if flood == nil {
		flood = logx.New(logx.Config{}, nil)
	}
	n := cfg.MaxConcurrentHashes
	if n <= 0 {
		n = 2 * runtime.GOMAXPROCS(0)
	}
	dummy, err := decoyHash()
	if err != nil {
		return nil, fmt.Errorf("token endpoint: %w", err)
	}
	failures := promauto.With(deps.Registry).NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_oauth_token_failures_total",
		Help: "Token requests refused at POST /v1/oauth2/token for failed client authentication, by reason: unknown_client, wrong_secret, disabled, throttled (429), overloaded (503).",
	}, []string{"reason"})
	for _, r := range []string{failUnknownClient, failWrongSecret, failDisabled, failThrottled, failOverloaded} {
		failures.WithLabelValues(r)
	}
	return &TokenEndpoint{
		clients: deps.Clients, issuer: deps.Issuer, log: log, flood: flood, now: now, dummyHash: dummy,
		gate:      newHashGate(n, cfg.MaxQueuedHashes, cfg.HashQueueTimeout),
		byClient:  newThrottle(cfg.Throttle.MaxFailuresPerClient, cfg.Throttle),
		byAddress: newThrottle(cfg.Throttle.MaxFailuresPerAddress, cfg.Throttle),
		failures:  failures,
	}, nil
}

// OAuth error codes of RFC 6749 §5.2.
const (
	errInvalidRequest       = "invalid_request"
	errInvalidClient        = "invalid_client"
	errUnsupportedGrantType = "unsupported_grant_type"
	errInvalidScope         = "invalid_scope"
	// slow_down is registered for the token endpoint by RFC 8628 §7.2: answered with 429.
	errSlowDown = "slow_down"
	// temporarily_unavailable (RFC 6749 §4.1.2.1): answered with 503.
	errTemporarilyUnavailable = "temporarily_unavailable"
)

// tokenError is an RFC 6749 §5.2 error response.
type tokenError struct {
	Code        string `json:"error"`
	Description string `json:"error_description"`
	// retryAfter, for 429 and 503, becomes the Retry-After header (whole seconds, at least 1).
	retryAfter time.Duration
}

// oauthError builds an error response. The description may quote client input; characters
// RFC 6749 §5.2 does not allow in it (outside %x20-21 / %x23-5B / %x5D-7E: '"', '\', control
// and non-ASCII characters) become '?'.
func oauthError(code, format string, args ...any) *tokenError {
	d := []byte(fmt.Sprintf(format, args...))
	for i, c := range d {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			d[i] = '?'
		}
	}
	return &tokenError{Code: code, Description: string(d)}
}

// tokenResponse is the RFC 6749 §5.1 success response.
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
}

// ServeREST implements proxy.RESTHandler. Only a failing store or signer is returned as an
// error (a 500 with its cause logged by the server); every refusal is an OAuth error body.
func (e *TokenEndpoint) ServeREST(r *proxy.RESTRequest) (*proxy.RESTResponse, error) {
	req, terr := parseTokenRequest(r)
	if terr != nil {
		return e.refuse(r, terr, "")
	}
	client, terr, err := e.authenticate(r, req.clientID, req.secret)
	if err != nil {
		return nil, err
	}
	if terr != nil {
		return e.refuse(r, terr, client.ID)
	}
	scopes := client.Scopes
	if req.scopes != nil {
		for _, s := range req.scopes {
			if !slices.Contains(client.Scopes, s) {
				return e.refuse(r, oauthError(errInvalidScope, "scope '%s' is not granted to this client", s), client.ID)
			}
		}
		scopes = req.scopes
	}
	if len(scopes) == 0 {
		return e.refuse(r, oauthError(errInvalidScope, "this client has no scopes"), client.ID)
	}
	token, jti, err := e.issuer.Issue(client.Principal, client.ID, scopes)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(tokenResponse{
		AccessToken: token,
		TokenType:   "Bearer",
		ExpiresIn:   int64(e.issuer.TTL() / time.Second),
		Scope:       strings.Join(scopes, " "),
	})
	if err != nil {
		return nil, err
	}
	e.log.Info("access token issued",
		zap.String("req_id", r.RequestID), zap.String("client_id", client.ID), zap.String("principal", client.Principal),
		zap.Strings("scopes", scopes), zap.String("jti", jti), zap.Duration("ttl", e.issuer.TTL()))
	return &proxy.RESTResponse{Body: body, Header: noStore()}, nil
}

// refuse answers with an OAuth error. knownID is the client id when it named a stored
// client: an unknown "id" is not logged, since it may be a secret pasted in the wrong field.
func (e *TokenEndpoint) refuse(r *proxy.RESTRequest, te *tokenError, knownID string) (*proxy.RESTResponse, error) {
	if ce := e.log.Check(zap.DebugLevel, "token request refused"); ce != nil {
		ce.Write(zap.String("req_id", r.RequestID), zap.String("error", te.Code),
			zap.String("reason", te.Description), zap.String("client_id", knownID))
	}
	body, err := json.Marshal(te)
	if err != nil {
		return nil, err
	}
	h := noStore()
	status := http.StatusBadRequest
	switch te.Code {
	case errInvalidClient:
		status = http.StatusUnauthorized
		h["WWW-Authenticate"] = `Basic realm="web3gate"`
	case errSlowDown:
		status = http.StatusTooManyRequests
	case errTemporarilyUnavailable:
		status = http.StatusServiceUnavailable
	}
	if te.retryAfter > 0 {
		h["Retry-After"] = strconv.FormatInt(int64(max(time.Second, te.retryAfter+time.Second-1)/time.Second), 10)
	}
	return &proxy.RESTResponse{Status: status, Body: body, Header: h}, nil
}

// noStore are the headers RFC 6749 §5.1 requires on token responses.
func noStore() map[string]string {
	return map[string]string{"Cache-Control": "no-store", "Pragma": "no-cache"}
}

// authenticate finds the client and checks its secret. An unknown id, a wrong secret and a
// disabled client are each invalid_client, and each costs one argon2id verification, so
// timing tells none of them apart; the throttles treat them alike too (an unknown id has its
// own throttle entry, as a stored one does). A store failure is returned as err.
func (e *TokenEndpoint) authenticate(r *proxy.RESTRequest, id, secret string) (store.Client, *tokenError, error) {
	now := e.now()
	addr := addressKey(r.SourceIP())
	byAddr, wait, ok := e.byAddress.admit(addr, now)
	if !ok {
		return store.Client{}, e.throttled("from this address", wait), nil
	}
	byClient, wait, ok := e.byClient.admit(clientKey(id), now)
	if !ok {
		e.byAddress.done(byAddr, false, false, now)
		return store.Client{}, e.throttled("for this client id", wait), nil
	}
	// The attempt's outcome: a failure's reason, or success; neither when it was not
	// decided (a store failure, no verification slot), which counts as no failure.
	reason, succeeded := "", false
	defer func() {
		now := e.now()
		failed := reason != ""
		lockedAddr := e.byAddress.done(byAddr, failed, false, now)
		lockedClient := e.byClient.done(byClient, failed, succeeded, now)
		if failed {
			e.failed(r, reason, id, lockedAddr, lockedClient)
		}
	}()

	ctx, cancel := context.WithTimeout(r.Ctx, 10*time.Second)
	defer cancel()
	c, err := e.clients.Client(ctx, id)
	known := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Client{}, nil, fmt.Errorf("token endpoint: %w", err)
	}
	hash := c.SecretHash
	if !known {
		hash = e.dummyHash
	}
	if err := e.gate.acquire(ctx); err != nil {
		e.failures.WithLabelValues(failOverloaded).Inc()
		if ce := e.flood.Check(e.log, zap.WarnLevel, "token request refused: no verification slot", tokenScope, failOverloaded); ce != nil {
			ce.Write(zap.String("req_id", r.RequestID), zap.String("address", sourceIP(r)), zap.Error(err))
		}
		te := oauthError(errTemporarilyUnavailable, "too many token requests at once; retry later")
		te.retryAfter = time.Second
		return store.Client{}, te, nil
	}
	ok = VerifySecret(hash, secret)
	e.gate.release()
	switch {
	case !known:
		reason = failUnknownClient
		return store.Client{}, oauthError(errInvalidClient, "client authentication failed"), nil
	case !ok:
		reason = failWrongSecret
		return store.Client{ID: c.ID}, oauthError(errInvalidClient, "client authentication failed"), nil
	case c.DisabledAt != nil:
		reason = failDisabled
		return store.Client{ID: c.ID}, oauthError(errInvalidClient, "client authentication failed: the client is disabled"), nil
	}
	succeeded = true
	return c, nil, nil
}

// throttled is the 429 of a throttled key; which reports which key.
func (e *TokenEndpoint) throttled(which string, wait time.Duration) *tokenError {
	e.failures.WithLabelValues(failThrottled).Inc()
	te := oauthError(errSlowDown, "too many failed or pending client authentications %s; retry in %d s", which, int64((wait+time.Second-1)/time.Second))
	te.retryAfter = wait
	return te
}

// failed logs and counts a failed client authentication, and the lockouts it started. The
// client id is logged when it names a stored client; an unknown one may be a secret.
func (e *TokenEndpoint) failed(r *proxy.RESTRequest, reason, id string, lockedAddr, lockedClient time.Duration) {
	e.failures.WithLabelValues(reason).Inc()
	logID := id
	if reason == failUnknownClient {
		logID = ""
	}
	addr := sourceIP(r)
	if ce := e.flood.Check(e.log, zap.WarnLevel, "token request refused: client authentication failed", tokenScope, reason); ce != nil {
		ce.Write(zap.String("req_id", r.RequestID), zap.String("reason", reason), zap.String("client_id", logID), zap.String("address", addr))
	}
	if lockedClient > 0 {
		if ce := e.flood.Check(e.log, zap.WarnLevel, "token endpoint: client id locked out after repeated failures", tokenScope, "lockout_client"); ce != nil {
			ce.Write(zap.String("client_id", logID), zap.String("address", addr), zap.Duration("for", lockedClient))
		}
	}
	if lockedAddr > 0 {
		if ce := e.flood.Check(e.log, zap.WarnLevel, "token endpoint: address locked out after repeated failures", tokenScope, "lockout_address"); ce != nil {
			ce.Write(zap.String("address", addressKey(r.SourceIP())), zap.Duration("for", lockedAddr))
		}
	}
}

// tokenScope is the token endpoint's scope in the bound of similar log lines (log.flood).
const tokenScope = "oauth2_token"

// clientKey is the throttle key of a client id: a digest, so that the table's memory does
// not depend on the length of the ids clients send.
func clientKey(id string) string {
	h := sha256.Sum256([]byte(id))
	return string(h[:16])
}

// sourceIP is the request's source address for the logs: the TCP peer, or the client that
// a trusted proxy (server.trustedProxies) names in X-Forwarded-For; "" when none.
func sourceIP(r *proxy.RESTRequest) string {
	if a := r.SourceIP(); a.IsValid() {
		return a.Unmap().String()
	}
	return ""
}

// tokenRequest is a parsed, well-formed token request.
type tokenRequest struct {
	clientID, secret string
	scopes           []string // nil when the scope parameter is absent or empty
}

// parseTokenRequest checks everything that needs no store or hash: content type, form,
// grant type, the client credentials' form and the scope's syntax.
func parseTokenRequest(r *proxy.RESTRequest) (tokenRequest, *tokenError) {
	var req tokenRequest
	mt, _, err := mime.ParseMediaType(r.Header("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return req, oauthError(errInvalidRequest, "the body must be application/x-www-form-urlencoded")
	}
	form, err := url.ParseQuery(string(r.Body))
	if err != nil {
		return req, oauthError(errInvalidRequest, "the body is not a well-formed form")
	}
	for k, v := range form {
		if len(v) > 1 {
			return req, oauthError(errInvalidRequest, "parameter '%s' is repeated", k)
		}
	}
	switch gt := form.Get("grant_type"); gt {
	case "":
		return req, oauthError(errInvalidRequest, "grant_type is required")
	case "client_credentials":
	default:
		return req, oauthError(errUnsupportedGrantType, "only grant_type client_credentials is supported")
	}
	if scope := form.Get("scope"); scope != "" {
		s, err := parseScope(scope)
		if err != nil {
			return req, oauthError(errInvalidScope, "%v", err)
		}
		req.scopes = s
	}
	authz := r.Header("Authorization")
	_, formSecret := form["client_secret"]
	if authz == "" {
		req.clientID, req.secret = form.Get("client_id"), form.Get("client_secret")
		if req.clientID == "" || req.secret == "" {
			return req, oauthError(errInvalidClient, "client authentication is required: HTTP Basic, or client_id and client_secret in the body")
		}
		return req, nil
	}
	if formSecret {
		return req, oauthError(errInvalidRequest, "use one client authentication method: HTTP Basic or client_secret in the body, not both")
	}
	id, secret, ok := parseBasic(authz)
	if !ok {
		return req, oauthError(errInvalidClient, "the Authorization header must be HTTP Basic with the form-encoded client_id and client_secret")
	}
	if formID, ok := form["client_id"]; ok && formID[0] != id {
		return req, oauthError(errInvalidRequest, "client_id in the body differs from the one in the Authorization header")
	}
	req.clientID, req.secret = id, secret
	return req, nil
}

// parseBasic decodes "Basic base64(client_id:client_secret)", each part form-urlencoded
// first (RFC 6749 §2.3.1).
func parseBasic(h string) (id, secret string, ok bool) {
	scheme, cred, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", "", false
	}
	encID, encSecret, found := strings.Cut(string(raw), ":")
	if !found {
		return "", "", false
	}
	if id, err = url.QueryUnescape(encID); err != nil {
		return "", "", false
	}
	if secret, err = url.QueryUnescape(encSecret); err != nil {
		return "", "", false
	}
	if id == "" || secret == "" {
		return "", "", false
	}
	return id, secret, true
}
