package auth

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/proxy"
)

// urlKey and wrongKey are client ids sent in URLs; neither may appear in the logs.
const (
	urlKey   = "w3g_urlKeyQ7x9Lm2Pz"
	wrongKey = "w3g_wrongKeyR4t8Kd1"
)

// urlServer serves the stage on the JSON-RPC routes the binary has, with and without the
// client id in the path, in front of a terminal that answers with the principal it got.
func urlServer(t *testing.T, allowRead bool) (string, *observer.ObservedLogs) {
	t.Helper()
	cfg := Config{Clients: []ClientConfig{{ID: urlKey}}, Tokens: []TokenConfig{{SHA256: hash("tok"), Principal: "alice"}}, AllowReadsWithClientID: allowRead}
	v, err := NewStaticTokens(cfg.Tokens)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, Deps{Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	h := proxy.Compile(proxy.HandlerFunc(func(c *proxy.Call) (*proxy.Response, error) {
		return &proxy.Response{Result: []byte(`"` + c.Principal.ID + "@" + c.Principal.ClientID + `"`)}, nil
	}), s)
	log, logs := observedLogger()
	base := startServer(t, log,
		&proxy.Route{Name: "mainnet", Method: http.MethodPost, Pattern: "/v1/web3/mainnet", ChainID: 1, Handler: h},
		&proxy.Route{Name: "chains", Method: http.MethodPost, Pattern: "/v1/web3/chains/{chain_id}", Handler: h},
		&proxy.Route{Name: "mainnet", Method: http.MethodPost, Pattern: "/v1/web3/mainnet/{" + proxy.ClientIDParam + "}", ChainID: 1, Handler: h},
		&proxy.Route{Name: "chains", Method: http.MethodPost, Pattern: "/v1/web3/chains/{chain_id}/{" + proxy.ClientIDParam + "}", Handler: h})
	return base, logs
}

type urlCase struct {
	name, path string
	headers    map[string]string
	body       string
	status     int
	want       string // a part of the answer
}

func runURLCases(t *testing.T, base string, cases []urlCase) {
	t.Helper()
	client := testClient(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, base+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(got), tc.want) {
				t.Fatalf("%d %s, want %d with %s", resp.StatusCode, got, tc.status, tc.want)
			}
		})
	}
}

const (
	readBody = `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000001","latest"]}`
	rawBody  = `{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x02"]}`
	sendBody = `{"jsonrpc":"2.0","id":1,"method":"eth_sendTransaction","params":[{}]}`
)

// With reads allowed on a client id alone, a URL that carries it is all a wallet needs for
// reads and raw transactions; signing still needs the bearer token; a missing, wrong or
// contradicted client id is refused. The client ids never reach the logs.
func TestClientIDInURL(t *testing.T) {
	base, logs := urlServer(t, true)
	bearer := map[string]string{"Authorization": "Bearer tok"}
	runURLCases(t, base, []urlCase{
		{"mainnet path, read", "/v1/web3/mainnet/" + urlKey, nil, readBody, 200, `"result":"@` + urlKey + `"`},
		{"chains path, read", "/v1/web3/chains/1/" + urlKey, nil, readBody, 200, `"result":"@` + urlKey + `"`},
		{"mainnet query, read", "/v1/web3/mainnet?apiKey=" + urlKey, nil, readBody, 200, `"result":"@` + urlKey + `"`},
		{"chains query, read", "/v1/web3/chains/1?apiKey=" + urlKey, nil, readBody, 200, `"result":"@` + urlKey + `"`},
		{"path, raw transaction", "/v1/web3/mainnet/" + urlKey, nil, rawBody, 200, `"result":"@` + urlKey + `"`},
		{"path, batch", "/v1/web3/mainnet/" + urlKey, nil, "[" + readBody + "," + rawBody + "]", 200, `"result":"@` + urlKey + `"}]`},
		{"path, signing without token", "/v1/web3/mainnet/" + urlKey, nil, sendBody, 401, `"code":4100,"message":"Not Authorized: a bearer access token is required"`},
		{"query, signing without token", "/v1/web3/chains/1?apiKey=" + urlKey, nil, sendBody, 401, `"code":4100`},
		{"path, signing with token", "/v1/web3/mainnet/" + urlKey, bearer, sendBody, 200, `"result":"alice@` + urlKey + `"`},
		{"path and same header", "/v1/web3/mainnet/" + urlKey, map[string]string{"X-API-Key": urlKey}, readBody, 200, `"result":"@` + urlKey + `"`},
		{"no client id", "/v1/web3/mainnet", nil, readBody, 401, `"code":4100,"message":"Not Authorized: a client id is required`},
		{"no client id, chains", "/v1/web3/chains/1", nil, readBody, 401, `"code":4100`},
		{"wrong path key", "/v1/web3/mainnet/" + wrongKey, nil, readBody, 401, `"message":"Not Authorized: unknown client id"`},
		{"wrong query key", "/v1/web3/chains/1?apiKey=" + wrongKey, nil, readBody, 401, `"message":"Not Authorized: unknown client id"`},
		{"header and path differ", "/v1/web3/mainnet/" + wrongKey, map[string]string{"X-API-Key": urlKey}, readBody, 401, `"message":"Not Authorized: the request carries different client ids`},
		{"path and query differ", "/v1/web3/mainnet/" + urlKey + "?apiKey=" + wrongKey, nil, readBody, 401, `"message":"Not Authorized: the request carries different client ids`},
		{"query key repeated, different", "/v1/web3/mainnet?apiKey=" + urlKey + "&apiKey=" + wrongKey, nil, readBody, 401, `"message":"Not Authorized: the request carries different client ids`},
		{"query key repeated, different, on chains", "/v1/web3/chains/1?apiKey=" + urlKey + "&apiKey=" + wrongKey, nil, readBody, 401, `"message":"Not Authorized: the request carries different client ids`},
		{"query key repeated, same", "/v1/web3/mainnet?apiKey=" + urlKey + "&apiKey=" + urlKey, nil, readBody, 200, `"result":"@` + urlKey + `"`},
		{"path and query key repeated, one different", "/v1/web3/mainnet/" + urlKey + "?apiKey=" + urlKey + "&apiKey=" + wrongKey, nil, readBody, 401, `"message":"Not Authorized: the request carries different client ids`},
		{"key in the wrong place", "/v1/web3/mainnet/x/" + urlKey, nil, readBody, 404, `"no such route"`},
	})
	assertNoSecretsLogged(t, logs, urlKey, wrongKey)
}

// Two X-API-Key headers with different client ids are refused as a header and a URL that
// differ are, whichever comes first; the same id twice is served.
func TestClientIDRepeatedHeader(t *testing.T) {
	base, logs := urlServer(t, true)
	client := testClient(t)
	for _, tc := range []struct {
		name   string
		keys   []string
		status int
		want   string
	}{
		{"different", []string{urlKey, wrongKey}, 401, `"code":4100,"message":"Not Authorized: the request carries different client ids`},
		{"different, unknown first", []string{wrongKey, urlKey}, 401, `"code":4100,"message":"Not Authorized: the request carries different client ids`},
		{"same", []string{urlKey, urlKey}, 200, `"result":"@` + urlKey + `"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, base+"/v1/web3/mainnet", strings.NewReader(readBody))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header["X-Api-Key"] = tc.keys
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(got), tc.want) {
				t.Fatalf("%d %s, want %d with %s", resp.StatusCode, got, tc.status, tc.want)
			}
		})
	}
	assertNoSecretsLogged(t, logs, urlKey, wrongKey)
}

// Without allowReadsWithClientId, a client id in the URL is not enough for anything.
func TestClientIDInURLNeedsTokenByDefault(t *testing.T) {
	base, _ := urlServer(t, false)
	runURLCases(t, base, []urlCase{
		{"path, read", "/v1/web3/mainnet/" + urlKey, nil, readBody, 401, `"message":"Not Authorized: a bearer access token is required"`},
		{"query, raw transaction", "/v1/web3/mainnet?apiKey=" + urlKey, nil, rawBody, 401, `"message":"Not Authorized: a bearer access token is required"`},
		{"path, read with token", "/v1/web3/chains/1/" + urlKey, map[string]string{"Authorization": "Bearer tok"}, readBody, 200, `"result":"alice@` + urlKey + `"`},
	})
}
