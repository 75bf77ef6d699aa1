package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestStaticTokens(t *testing.T) {
	v, err := NewStaticTokens([]TokenConfig{{SHA256: hash("alpha"), Principal: "a"}, {SHA256: hash("beta"), Principal: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ token, principal string }{{"alpha", "a"}, {"beta", "b"}} {
		if p, err := v.Verify(tc.token); err != nil || p != tc.principal {
			t.Errorf("Verify(%q) = %q, %v", tc.token, p, err)
		}
	}
	for _, bad := range []string{"", "alph", "alphaa", "ALPHA", "alphb", hash("alpha")} {
		if _, err := v.Verify(bad); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("Verify(%q) = %v, want ErrInvalidToken", bad, err)
		}
	}
	// Again, with both tokens remembered.
	for _, tc := range []struct{ token, principal string }{{"alpha", "a"}, {"beta", "b"}, {"alpha", "a"}} {
		if p, err := v.Verify(tc.token); err != nil || p != tc.principal {
			t.Errorf("Verify(%q) again = %q, %v", tc.token, p, err)
		}
	}
}

// slotOf is the slot of the remembered tokens token takes.
func (s *StaticTokens) slotOf(token string) *atomic.Pointer[recentToken] {
	return &s.recent[maphash.String(s.seed, token)%recentSlots]
}

// Tokens that share a slot: a remembered token never answers for another, valid or not,
// and two valid tokens take turns.
func TestStaticTokensSharedSlot(t *testing.T) {
	v, err := NewStaticTokens([]TokenConfig{{SHA256: hash("tok-0000"), Principal: "p0"}})
	if err != nil {
		t.Fatal(err)
	}
	slot := v.slotOf("tok-0000")
	var other, stranger string // a valid and an unknown token in tok-0000's slot
	for i := 1; other == "" || stranger == ""; i++ {
		tok := fmt.Sprintf("tok-%04d", i)
		switch {
		case v.slotOf(tok) != slot:
		case other == "":
			other = tok
		default:
			stranger = tok
		}
	}
	v.byHash[sha256.Sum256([]byte(other))] = "p1" // as if configured
	want := func(token, principal string) {
		t.Helper()
		p, err := v.Verify(token)
		if principal == "" {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("Verify(%q) = %q, %v, want ErrInvalidToken", token, p, err)
			}
			return
		}
		if err != nil || p != principal {
			t.Fatalf("Verify(%q) = %q, %v, want %q", token, p, err, principal)
		}
	}
	want("tok-0000", "p0")
	if r := slot.Load(); r == nil || r.token != "tok-0000" {
		t.Fatalf("slot holds %+v after tok-0000", r)
	}
	want(stranger, "")
	want("tok-0000", "p0")
	want(other, "p1")
	if r := slot.Load(); r == nil || r.token != other {
		t.Fatalf("slot holds %+v after %s", r, other)
	}
	want("tok-0000", "p0")
	want(other, "p1")
	want(stranger, "")
}

// Without static tokens every token is refused, remembered or not.
func TestStaticTokensNone(t *testing.T) {
	v, err := NewStaticTokens(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"", "a", hash("a")} {
		if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("Verify(%q) = %v", tok, err)
		}
	}
}

// Concurrent verifications of valid and invalid tokens, for the race detector: each gets
// its own answer.
func TestStaticTokensConcurrent(t *testing.T) {
	var cfg []TokenConfig
	for i := range 8 {
		cfg = append(cfg, TokenConfig{SHA256: hash(fmt.Sprintf("valid-%d", i)), Principal: fmt.Sprintf("p%d", i)})
	}
	v, err := NewStaticTokens(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for n := range 2000 {
				i := (g + n) % 8
				if p, err := v.Verify(fmt.Sprintf("valid-%d", i)); err != nil || p != fmt.Sprintf("p%d", i) {
					errs <- fmt.Errorf("valid-%d: %q, %v", i, p, err)
					return
				}
				if _, err := v.Verify(fmt.Sprintf("invalid-%d", i)); !errors.Is(err, ErrInvalidToken) {
					errs <- fmt.Errorf("invalid-%d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// okHandler answers with the principal it was given.
type okHandler struct{ got *proxy.Principal }

func (h *okHandler) Serve(c *proxy.Call) (*proxy.Response, error) {
	h.got = c.Principal
	return &proxy.Response{Result: []byte(`"ok"`)}, nil
}

func TestStageOutcomes(t *testing.T) {
	cfg := Config{Clients: []ClientConfig{{ID: "app"}}, Tokens: []TokenConfig{{SHA256: hash("tok"), Principal: "alice"}}}
	for _, tc := range []struct {
		name      string
		allowRead bool
		clientID  string
		bearer    string
		badHeader bool
		method    string
		principal string // "" when refused
		fatal     bool
	}{
		{"token", false, "app", "tok", false, "eth_blockNumber", "alice", false},
		{"no client id", false, "", "tok", false, "eth_blockNumber", "", true},
		{"unknown client id", false, "other", "tok", false, "eth_blockNumber", "", true},
		{"bad header", false, "app", "", true, "eth_blockNumber", "", true},
		{"wrong token", true, "app", "nope", false, "eth_blockNumber", "", true},
		{"no token", false, "app", "", false, "eth_blockNumber", "", true},
		{"no token, reads allowed", true, "app", "", false, "eth_blockNumber", "-", false},
		{"no token, reads allowed, signing", true, "app", "", false, "eth_sendTransaction", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.AllowReadsWithClientID = tc.allowRead
			v, err := NewStaticTokens(c.Tokens)
			if err != nil {
				t.Fatal(err)
			}
			s, err := New(c, Deps{Verifier: v})
			if err != nil {
				t.Fatal(err)
			}
			h := &okHandler{}
			ex := &proxy.Exchange{ClientID: tc.clientID, Bearer: tc.bearer, BadAuthHeader: tc.badHeader}
			call := &proxy.Call{Exchange: ex, Request: jsonrpc.Request{Method: tc.method}}
			_, err = s.Serve(call, h)
			if (ex.Fatal() != nil) != tc.fatal {
				t.Fatalf("fatal %v, want %v", ex.Fatal(), tc.fatal)
			}
			switch tc.principal {
			case "":
				if !errors.Is(err, jsonrpc.ErrUnauthorized) || h.got != nil {
					t.Fatalf("err %v, served %v", err, h.got)
				}
			case "-":
				if err != nil || h.got == nil || h.got.Authenticated() || h.got.ClientID != "app" {
					t.Fatalf("err %v, principal %+v", err, h.got)
				}
			default:
				if err != nil || h.got == nil || h.got.ID != tc.principal || h.got.ClientID != "app" {
					t.Fatalf("err %v, principal %+v", err, h.got)
				}
			}
		})
	}
}
