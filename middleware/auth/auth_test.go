package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
	for _, bad := range []string{"", "alph", "alphaa", "ALPHA", hash("alpha")} {
		if _, err := v.Verify(bad); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("Verify(%q) = %v, want ErrInvalidToken", bad, err)
		}
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
