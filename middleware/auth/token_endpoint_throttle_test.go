package auth

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
)

// from is a copy of f whose requests come from the loopback address ip (127.0.0.0/8 is all
// loopback on Linux), so that a test can play several source addresses.
func (f *tokenFixture) from(t *testing.T, ip string) *tokenFixture {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	g := *f
	g.client = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	return &g
}

// token asks for a token with client_id and client_secret in the form.
func (f *tokenFixture) token(t testing.TB, id, secret string) reply {
	t.Helper()
	r, err := f.tryToken(id, secret)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryToken is token for a goroutine other than the test's.
func (f *tokenFixture) tryToken(id, secret string) (reply, error) {
	return f.do(formType, form("grant_type", "client_credentials", "client_id", id, "client_secret", secret), nil)
}

// oauthErr decodes an RFC 6749 §5.2 error body.
func oauthErr(t testing.TB, r reply) map[string]string {
	t.Helper()
	var e map[string]string
	if err := json.Unmarshal(r.body, &e); err != nil || len(e) != 2 || e["error"] == "" || e["error_description"] == "" {
		t.Fatalf("status %d, body %s: not an OAuth error (%v)", r.status, r.body, err)
	}
	return e
}

func (f *tokenFixture) failures(reason string) int {
	var m dto.Metric
	if err := f.oauth.token.failures.WithLabelValues(reason).Write(&m); err != nil {
		panic(err)
	}
	return int(m.GetCounter().GetValue())
}

// wantStatus fails unless r has status and, for an error, the OAuth error code.
func wantStatus(t *testing.T, step string, r reply, status int, code string) map[string]string {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d: %s", step, r.status, status, r.body)
	}
	if code == "" {
		return nil
	}
	e := oauthErr(t, r)
	if e["error"] != code {
		t.Fatalf("%s: error %q, want %q: %s", step, e["error"], code, r.body)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%s: Cache-Control %q", step, r.header.Get("Cache-Control"))
	}
	return e
}

// TestTokenEndpointThrottlesClientID: five wrong secrets for a client id lock it out for 30 s
// (429 slow_down with Retry-After, before any store read or hash: it is answered while every
// verification slot is taken), from any address and even with the right secret; other
// clients are served meanwhile; the lock ends, and the next doubles. Each failure is logged
// at warn with the client id and the address, never the secret, and counted.
func TestTokenEndpointThrottlesClientID(t *testing.T) {
	clock := newTestClock()
	f := newTokenFixtureWith(t, nil, clock.Now)
	f.addClient(t, "w3g_other", "other-secret", "bob", []string{ScopeSign}, false)
	attacker, elsewhere := f.from(t, "127.0.0.2"), f.from(t, "127.0.0.3")

	for i := range 5 {
		wantStatus(t, fmt.Sprintf("wrong secret %d", i+1), attacker.token(t, f.id, fmt.Sprintf("guess-%d", i)), 401, errInvalidClient)
	}
	// Locked: answered without a hash even though every verification slot is taken.
	gate := f.oauth.token.gate
	for range cap(gate.slots) {
		gate.slots <- struct{}{}
	}
	for _, tc := range []struct {
		name string
		f    *tokenFixture
	}{{"the attacker, right secret", attacker}, {"another address, right secret", elsewhere}} {
		r := tc.f.token(t, f.id, f.secret)
		e := wantStatus(t, tc.name, r, http.StatusTooManyRequests, errSlowDown)
		if got := r.header.Get("Retry-After"); got != "30" {
			t.Fatalf("%s: Retry-After %q, want 30", tc.name, got)
		}
		if !strings.Contains(e["error_description"], "client id") {
			t.Fatalf("%s: the description does not say the client id is throttled: %q", tc.name, e["error_description"])
		}
	}
	for range cap(gate.slots) {
		gate.release()
	}
	wantStatus(t, "another client meanwhile", elsewhere.token(t, "w3g_other", "other-secret"), 200, "")

	// The lock ends after 30 s; five more failures lock for twice as long.
	clock.Advance(30 * time.Second)
	wantStatus(t, "after the lock", elsewhere.token(t, f.id, f.secret), 200, "")
	for i := range 5 {
		wantStatus(t, fmt.Sprintf("wrong secret %d after the lock", i+1), attacker.token(t, f.id, "again"), 401, errInvalidClient)
	}
	r := elsewhere.token(t, f.id, f.secret)
	wantStatus(t, "second lock", r, http.StatusTooManyRequests, errSlowDown)
	if got := r.header.Get("Retry-After"); got != "60" {
		t.Fatalf("second lock: Retry-After %q, want 60", got)
	}

	if got, want := f.failures(failWrongSecret), 10; got != want {
		t.Fatalf("wrong_secret failures counted: %d, want %d", got, want)
	}
	if got, want := f.failures(failThrottled), 3; got != want {
		t.Fatalf("throttled refusals counted: %d, want %d", got, want)
	}
	warned := f.logs.FilterMessage("token request refused: client authentication failed").
		FilterField(zap.String("client_id", f.id)).FilterField(zap.String("address", "127.0.0.2")).
		FilterField(zap.String("reason", failWrongSecret))
	if warned.Len() != 10 || warned.All()[0].Level != zap.WarnLevel {
		t.Fatalf("%d warnings with the client id and the address, want 10:\n%s", warned.Len(), logText(f.logs))
	}
	if n := f.logs.FilterMessage("token endpoint: client id locked out after repeated failures").Len(); n != 2 {
		t.Fatalf("%d lockouts logged, want 2", n)
	}
	assertNoSecretsLogged(t, f.logs, f.secret, "guess-0", "guess-4", "again", "other-secret")
}

// TestTokenEndpointThrottlesAddress: twenty failures from one address (unknown client ids,
// each tried once) lock the address out, for every client id; another address is served.
func TestTokenEndpointThrottlesAddress(t *testing.T) {
	clock := newTestClock()
	f := newTokenFixtureWith(t, nil, clock.Now)
	scanner, elsewhere := f.from(t, "127.0.0.4"), f.from(t, "127.0.0.5")
	for i := range 20 {
		wantStatus(t, fmt.Sprintf("unknown client %d", i+1), scanner.token(t, fmt.Sprintf("w3g_guess%d", i), "x"), 401, errInvalidClient)
	}
	r := scanner.token(t, f.id, f.secret)
	e := wantStatus(t, "a real client from the address", r, http.StatusTooManyRequests, errSlowDown)
	if !strings.Contains(e["error_description"], "address") || r.header.Get("Retry-After") != "30" {
		t.Fatalf("address lock: %s, Retry-After %q", r.body, r.header.Get("Retry-After"))
	}
	wantStatus(t, "the same client from another address", elsewhere.token(t, f.id, f.secret), 200, "")
	if got := f.failures(failUnknownClient); got != 20 {
		t.Fatalf("unknown_client failures counted: %d, want 20", got)
	}
	// An unknown id is not logged (it may be a secret typed in the wrong field); the address is.
	warned := f.logs.FilterMessage("token request refused: client authentication failed").FilterField(zap.String("address", "127.0.0.4"))
	if warned.Len() != 20 || strings.Contains(logText(f.logs), "w3g_guess") {
		t.Fatalf("%d warnings for the address, want 20, without the unknown ids:\n%s", warned.Len(), logText(f.logs))
	}
	if n := f.logs.FilterMessage("token endpoint: address locked out after repeated failures").Len(); n != 1 {
		t.Fatalf("%d address lockouts logged, want 1", n)
	}
}

// trustedProxyIP is the loopback address the tests' server takes for a trusted proxy
// (server.trustedProxies).
const trustedProxyIP = "127.0.0.9"

// TestTokenEndpointThrottlesForwardedAddress: behind a trusted proxy the address throttled is
// the client's that the proxy names in X-Forwarded-For: twenty failures of one client lock it
// out and not the proxy's other clients; from an untrusted peer the header counts for nothing.
func TestTokenEndpointThrottlesForwardedAddress(t *testing.T) {
	clock := newTestClock()
	f := newTokenFixtureWith(t, nil, clock.Now)
	lb := f.from(t, trustedProxyIP)
	via := func(client string) map[string]string { return map[string]string{"X-Forwarded-For": client} }
	for i := range 20 {
		r, err := lb.do(formType, form("grant_type", "client_credentials", "client_id", fmt.Sprintf("w3g_guess%d", i), "client_secret", "x"), via("198.51.100.7"))
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, fmt.Sprintf("unknown client %d", i+1), r, 401, errInvalidClient)
	}
	good := form("grant_type", "client_credentials", "client_id", f.id, "client_secret", f.secret)
	r, err := lb.do(formType, good, via("198.51.100.7"))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "a real client from the locked address", r, http.StatusTooManyRequests, errSlowDown)
	if r, err = lb.do(formType, good, via("198.51.100.8")); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "another client of the proxy", r, 200, "")
	locked := f.logs.FilterMessage("token endpoint: address locked out after repeated failures").FilterField(zap.String("address", "198.51.100.7"))
	if locked.Len() != 1 || f.logs.FilterField(zap.String("address", trustedProxyIP)).Len() != 0 {
		t.Fatalf("the lockout is not logged for the forwarded address alone:\n%s", logText(f.logs))
	}
	// An untrusted peer's header is ignored: its failures count against the peer.
	other := f.from(t, "127.0.0.10")
	for i := range 20 {
		r, err := other.do(formType, form("grant_type", "client_credentials", "client_id", fmt.Sprintf("w3g_more%d", i), "client_secret", "x"), via(fmt.Sprintf("203.0.113.%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, fmt.Sprintf("untrusted %d", i+1), r, 401, errInvalidClient)
	}
	if r, err = other.do(formType, good, via("203.0.113.200")); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "the untrusted peer, whatever it forwards", r, http.StatusTooManyRequests, errSlowDown)
}

// TestTokenEndpointNotStarved: a burst of concurrent wrong secrets for one client does not
// queue a legitimate request of another client behind its hashing: at most the throttle's
// five are checked, the rest refused at once, and the other client gets its token.
func TestTokenEndpointNotStarved(t *testing.T) {
	// One slot, so the burst's checks do run one after the other; a queue timeout long
	// enough for the five a slow machine (or -race) hashes in front of the legitimate one.
	f := newTokenFixtureWith(t, func(c *OAuthConfig) { c.MaxConcurrentHashes, c.HashQueueTimeout = 1, 30*time.Second }, nil)
	f.addClient(t, "w3g_other", "other-secret", "bob", []string{ScopeSign}, false)
	attacker, legit := f.from(t, "127.0.0.2"), f.from(t, "127.0.0.3")
	const n = 64
	statuses := make(chan int, n)
	var started, wg sync.WaitGroup
	started.Add(n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			r, err := attacker.tryToken(f.id, fmt.Sprintf("guess-%d", i))
			if err != nil {
				t.Error(err)
			}
			statuses <- r.status
		}()
	}
	started.Wait()
	r := legit.token(t, "w3g_other", "other-secret")
	wg.Wait()
	close(statuses)
	wantStatus(t, "the legitimate request during the burst", r, 200, "")
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[401] > 5 || count[401]+count[429] != n {
		t.Fatalf("burst answers %v: want at most 5 × 401 (the throttle's maximum) and the rest 429", count)
	}
}

// TestTokenEndpointHashQueue: with every verification slot taken, requests wait in a bounded
// queue: one more than maxQueuedHashes is refused at once with 503 temporarily_unavailable
// (while the slot is still taken), one waiting longer than hashQueueTimeout gets 503 too, and
// the waiting ones are served when a slot frees.
func TestTokenEndpointHashQueue(t *testing.T) {
	t.Run("full", func(t *testing.T) {
		f := newTokenFixtureWith(t, func(c *OAuthConfig) {
			c.MaxConcurrentHashes, c.MaxQueuedHashes, c.HashQueueTimeout = 1, 2, 30*time.Second
		}, nil)
		f.addClient(t, "w3g_other", "other-secret", "bob", []string{ScopeSign}, false)
		gate := f.oauth.token.gate
		gate.slots <- struct{}{} // the only slot
		queued := make(chan reply, 2)
		for _, c := range []struct{ ip, id, secret string }{{"127.0.0.2", f.id, f.secret}, {"127.0.0.3", "w3g_other", "other-secret"}} {
			g := f.from(t, c.ip)
			go func() {
				r, err := g.tryToken(c.id, c.secret)
				if err != nil {
					t.Error(err)
				}
				queued <- r
			}()
		}
		deadline := time.Now().Add(10 * time.Second)
		for gate.queued.Load() != 2 {
			if time.Now().After(deadline) {
				t.Fatalf("%d requests queued, want 2", gate.queued.Load())
			}
			time.Sleep(time.Millisecond)
		}
		r := f.from(t, "127.0.0.4").token(t, f.id, f.secret)
		wantStatus(t, "a third request", r, http.StatusServiceUnavailable, errTemporarilyUnavailable)
		if r.header.Get("Retry-After") != "1" {
			t.Fatalf("Retry-After %q, want 1", r.header.Get("Retry-After"))
		}
		gate.release()
		for range 2 {
			wantStatus(t, "a queued request", <-queued, 200, "")
		}
		if got := f.failures(failOverloaded); got != 1 {
			t.Fatalf("overloaded refusals counted: %d, want 1", got)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f := newTokenFixtureWith(t, func(c *OAuthConfig) {
			c.MaxConcurrentHashes, c.HashQueueTimeout = 1, 50*time.Millisecond
		}, nil)
		gate := f.oauth.token.gate
		gate.slots <- struct{}{}
		for i := range 6 {
			wantStatus(t, fmt.Sprintf("request %d waiting too long", i+1), f.token(t, f.id, f.secret), http.StatusServiceUnavailable, errTemporarilyUnavailable)
		}
		// Not failed authentications: the client is not throttled for them.
		gate.release()
		wantStatus(t, "the same request with a slot free", f.token(t, f.id, f.secret), 200, "")
	})
}
