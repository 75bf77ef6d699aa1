package integration

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/openapi"
	"github.com/web3gate/web3gate/openapi/openapitest"
)

// TestOpenAPIServed: GET /openapi.json answers the public part of the document on the public
// listener and the whole document on the admin listener, each a document kin-openapi loads
// and validates.
func TestOpenAPIServed(t *testing.T) {
	ts := startServer(t, devConfig(t))
	for _, tc := range []struct {
		base string
		want []byte
	}{{ts.API, openapi.Public()}, {ts.Admin, openapi.Full()}} {
		status, h, body := request(t, http.MethodGet, tc.base+"/openapi.json", nil)
		if status != 200 || h.Get("Content-Type") != "application/json" || !bytes.Equal(body, tc.want) {
			t.Fatalf("%s/openapi.json: %d %s, %d bytes, want the document's %d", tc.base, status, h.Get("Content-Type"), len(body), len(tc.want))
		}
		if _, err := openapitest.NewFrom(body); err != nil {
			t.Errorf("%s/openapi.json: %v", tc.base, err)
		}
	}
	_, pub := get(t, ts.API+"/openapi.json")
	_, full := get(t, ts.Admin+"/openapi.json")
	if strings.Contains(pub, `"/v1/admin/`) || strings.Contains(pub, `"/healthz"`) || !strings.Contains(full, `"/v1/admin/webhooks/{id}/deliveries"`) {
		t.Error("the public document shows admin routes, or the full one misses them")
	}
	// A browser page may read it (server.cors).
	if _, h, _ := request(t, http.MethodGet, ts.API+"/openapi.json", nil, "Origin", "https://app.example"); h.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("CORS: %v", h)
	}
}

// TestOpenAPIRoutesExist: every operation of the document is a route of the server, on the
// listener the document says: a request with made-up parameters reaches the route (whatever
// it answers), never "no such route", a 405 or net/http's 404. The admin APIs are on (an
// admin token) and the public requests carry the dev credentials, so that the requests
// reach the handlers' own answers; they go through do, so each is checked against its
// operation too.
func TestOpenAPIRoutesExist(t *testing.T) {
	cfg := strings.Replace(devConfig(t), "\n  tokens: []\n", "\n  tokens: [{name: probe, sha256: "+sha256Hex("admin-probe")+"}]\n", 1)
	if strings.Count(cfg, "name: probe") != 1 {
		t.Fatal("config.yaml changed: admin.tokens was not found")
	}
	ts := startServer(t, cfg)
	var doc struct {
		Servers []struct{ URL string } `json:"servers"`
		Paths   map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(openapi.Full(), &doc); err != nil {
		t.Fatal(err)
	}
	values := map[string]string{
		"coinType": "60", "chainId": "1337", "contractAddress": "0x00000000000000000000000000000000000000aa", "tokenId": "1",
		"hash": "0x" + strings.Repeat("ab", 32), "chain_id": "1337", "client_id": "nobody",
		"id": "0b8b4c36-6a37-4c68-9a3c-3c3b0d2d8a6e",
	}
	param := regexp.MustCompile(`\{([^}]+)\}`)
	methods := []string{"get", "put", "post", "delete"}
	n := 0
	for path, item := range doc.Paths {
		var servers []struct{ URL string }
		if raw, ok := item["servers"]; ok {
			if err := json.Unmarshal(raw, &servers); err != nil {
				t.Fatal(err)
			}
		}
		bases := []string{ts.API}
		if len(servers) > 0 {
			bases = nil
			for _, s := range servers {
				if s.URL == doc.Servers[0].URL {
					bases = append(bases, ts.API)
				} else {
					bases = append(bases, ts.Admin)
				}
			}
		}
		target := param.ReplaceAllStringFunc(path, func(p string) string {
			v, ok := values[p[1:len(p)-1]]
			if !ok {
				t.Fatalf("%s: no value for %s", path, p)
			}
			return v
		})
		for _, m := range methods {
			if _, ok := item[m]; !ok {
				continue
			}
			method := strings.ToUpper(m)
			var body []byte
			if method == http.MethodPost || method == http.MethodPut {
				body = []byte(`{}`)
			}
			for _, base := range bases {
				n++
				creds := []string{"X-API-Key", config.DevClientID, "Authorization", "Bearer " + config.DevToken}
				if base == ts.Admin {
					creds = []string{"Authorization", "Bearer admin-probe"}
				}
				status, h, got := request(t, method, base+target, body, append(creds, "Content-Type", "application/json")...)
				if status == 405 || (status == 404 && (strings.Contains(string(got), "no such route") || !strings.HasPrefix(h.Get("Content-Type"), "application/json"))) {
					t.Errorf("%s %s%s (%s): %d %s: not a route of the server", method, base, target, path, status, got)
				}
			}
		}
	}
	if n < 30 {
		t.Errorf("%d operations probed, want every one of the document", n)
	}
}

// TestOpenAPICheckCatchesDrift: the check of do fails a real answer that no longer matches
// the document. A copy of the document with one field's type changed (the usage's `used`
// as a string), with the 200 of the route gone, and without the route at all each
// refuse the same answer that the shipped document accepts.
func TestOpenAPICheckCatchesDrift(t *testing.T) {
	ts := startServer(t, strings.Replace(devConfig(t), "\n  tokens: []\n", "\n  tokens: [{name: probe, sha256: "+sha256Hex("admin-probe")+"}]\n", 1))
	req, err := http.NewRequest(http.MethodGet, ts.Admin+"/v1/admin/usage?clientId="+config.DevClientID, nil)
	if err != nil {
		t.Fatal(err)
	}
	status, h, body := request(t, req.Method, req.URL.String(), nil, "Authorization", "Bearer admin-probe") // checked by do as well
	if status != 200 || !strings.Contains(string(body), `"used":`) {
		t.Fatalf("usage: %d %s", status, body)
	}
	shipped := openapi.YAML()
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"shipped", "", "", ""},
		{"a field's type changed", "        used: {type: integer, minimum: 0}\n", "        used: {type: string}\n", "used"},
		{"the 200 documented as another status", "        '200':\n          description: The usage (zeros", "        '299':\n          description: The usage (zeros", "not among the operation's responses"},
		{"a member added to the schema, required", "      required: [clientId, enforced, day, month]\n", "      required: [clientId, enforced, day, month, window]\n", "window"},
		{"the route removed", "  /v1/admin/usage:\n", "  /v1/admin/usage-renamed:\n", "no such path"},
	} {
		doc := shipped
		if tc.old != "" {
			if bytes.Count(shipped, []byte(tc.old)) != 1 {
				t.Fatalf("%s: openapi.yaml changed: %q is not found once", tc.name, tc.old)
			}
			doc = bytes.Replace(shipped, []byte(tc.old), []byte(tc.new), 1)
		}
		c, err := openapitest.NewFrom(doc)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, err = c.Check(openapitest.Admin, req, status, h, body)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}
