package openapitest

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/web3gate/web3gate/openapi"
)

// TestDocumentsLoad: both documents load and validate in kin-openapi (OpenAPI 3.1).
func TestDocumentsLoad(t *testing.T) {
	if _, err := New(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewFrom(openapi.Public()); err != nil {
		t.Fatal(err)
	}
	if _, err := NewFrom(openapi.YAML()); err != nil {
		t.Fatal(err)
	}
}

func TestRules(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	jsonH := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r-1"}}
	restErr := func(code int) []byte {
		return []byte(`{"error":{"code":` + strconv.Itoa(code) + `,"status":"` + http.StatusText(code) + `","request":"r-1","message":"m"}}`)
	}
	for _, tc := range []struct {
		l              Listener
		method, target string
		status         int
		header         http.Header
		body           string
		rule, fail     string // fail: a part of the error; "" none
	}{
		{Admin, "GET", "/healthz", 200, jsonH, `{"status":"ok"}`, RuleValidated, ""},
		{Admin, "GET", "/healthz", 200, jsonH, `{"status":"ok","x":1}`, RuleValidated, "doesn't match"},
		{Admin, "GET", "/healthz", 500, jsonH, `{"status":"ok"}`, RuleValidated, "not among the operation's responses"},
		{Admin, "GET", "/healthz", 200, http.Header{"Content-Type": {"text/plain"}}, `ok`, RuleValidated, "Content-Type"},
		{Public, "GET", "/healthz", 404, jsonH, string(restErr(404)), RuleNoPath, ""},
		{Public, "GET", "/healthz", 200, jsonH, `{"status":"ok"}`, RuleNoPath, "no such path"},
		{Public, "GET", "/v1/owners/x", 404, jsonH, `{"error":"no"}`, RuleNoPath, "ErrorResponse"},
		{Admin, "GET", "/v1/owners", 404, http.Header{"Content-Type": {"text/plain"}}, "404 page not found", RuleNoPath, ""},
		{Public, "POST", "/v1/owners", 405, jsonH, string(restErr(405)), RuleOtherMethod, ""},
		{Public, "POST", "/v1/owners", 200, jsonH, `{}`, RuleOtherMethod, "no POST operation"},
		{Public, "OPTIONS", "/v1/owners", 204, http.Header{}, ``, RuleOtherMethod, ""},
		{Admin, "HEAD", "/v1/admin/usage", 200, jsonH, ``, RuleOtherMethod, ""},
		{Public, "POST", "/v1/web3/chains/1/abc", 200, jsonH, `{"jsonrpc":"2.0","id":1,"result":"0x1"}`, RuleJSONRPC, ""},
		{Admin, "DELETE", "/v1/admin/products/0b8b4c36-6a37-4c68-9a3c-3c3b0d2d8a6e", 204, http.Header{"X-Request-Id": {"r"}}, ``, RuleValidated, ""},
		{Admin, "DELETE", "/v1/admin/products/0b8b4c36-6a37-4c68-9a3c-3c3b0d2d8a6e", 204, http.Header{"X-Request-Id": {"r"}}, `x`, RuleValidated, "declares none"},
		{Admin, "DELETE", "/v1/admin/products/0b8b4c36-6a37-4c68-9a3c-3c3b0d2d8a6e", 204, http.Header{}, ``, RuleValidated, "X-Request-Id"},
		{Public, "GET", "/v1/oauth2/jwks", 200, jsonH, `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"k","use":"sig","alg":"EdDSA"}]}`, RuleValidated, ""},
		{Public, "GET", "/v1/oauth2/jwks", 200, http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"not an id"}}, `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"k","use":"sig","alg":"EdDSA"}]}`, RuleValidated, "header X-Request-Id"},
		{Public, "GET", "/v1/oauth2/jwks", 200, jsonH, `{"keys":[{"kty":"RSA","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"k","use":"sig","alg":"EdDSA"}]}`, RuleValidated, "doesn't match"},
	} {
		req := httptest.NewRequest(tc.method, "http://127.0.0.1:1"+tc.target, nil)
		res, err := c.Check(tc.l, req, tc.status, tc.header, []byte(tc.body))
		name := tc.l.String() + " " + tc.method + " " + tc.target + " " + strconv.Itoa(tc.status) + " " + tc.body
		if res.Rule != tc.rule {
			t.Errorf("%s: rule %q, want %q", name, res.Rule, tc.rule)
		}
		switch {
		case tc.fail == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.fail != "" && (err == nil || !strings.Contains(err.Error(), tc.fail)):
			t.Errorf("%s: error %v, want one with %q", name, err, tc.fail)
		}
	}
}
