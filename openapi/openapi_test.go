package openapi

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

type doc struct {
	OpenAPI string                     `json:"openapi"`
	Servers []struct{ URL string }     `json:"servers"`
	Paths   map[string]json.RawMessage `json:"paths"`
	Tags    []struct{ Name string }    `json:"tags"`
	// Components by section, then name.
	Components map[string]map[string]json.RawMessage `json:"components"`
	Webhooks   map[string]json.RawMessage            `json:"webhooks"`
}

func decode(t *testing.T, b []byte) doc {
	t.Helper()
	var d doc
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if d.OpenAPI != "3.1.0" || len(d.Paths) == 0 {
		t.Fatalf("openapi %q, %d paths", d.OpenAPI, len(d.Paths))
	}
	return d
}

// adminPaths are the admin listener's routes (internal/app/admin.go).
var adminPaths = []string{"/leases", "/healthz", "/readyz", "/metrics", "/v1/admin/products", "/v1/admin/products/{id}",
	"/v1/admin/clients/{id}", "/v1/admin/clients/{id}/disable", "/v1/admin/clients/{id}/enable", "/v1/admin/usage",
	"/v1/admin/webhooks", "/v1/admin/webhooks/{id}", "/v1/admin/webhooks/{id}/deliveries"}

// TestPublicIsThePublicPart: the public document has every path of the full one but the
// admin listener's, the webhooks, and no component, tag or security scheme that only the
// admin routes use.
func TestPublicIsThePublicPart(t *testing.T) {
	full, pub := decode(t, Full()), decode(t, Public())
	for p := range full.Paths {
		_, inPublic := pub.Paths[p]
		if admin := slices.Contains(adminPaths, p); inPublic == admin {
			t.Errorf("%s: in the public document %v, an admin route %v", p, inPublic, admin)
		}
	}
	for _, p := range adminPaths {
		if _, ok := full.Paths[p]; !ok {
			t.Errorf("the full document misses %s", p)
		}
	}
	if _, ok := pub.Paths["/openapi.json"]; !ok || bytes.Contains(pub.Paths["/openapi.json"], []byte(`"servers"`)) {
		t.Errorf("public /openapi.json: %s", pub.Paths["/openapi.json"])
	}
	if len(pub.Webhooks) != 1 || len(pub.Servers) != 1 || pub.Servers[0].URL != full.Servers[0].URL {
		t.Errorf("public webhooks %d, servers %v", len(pub.Webhooks), pub.Servers)
	}
	for _, scheme := range []string{"adminToken"} {
		if _, ok := pub.Components["securitySchemes"][scheme]; ok {
			t.Errorf("public document has the admin scheme %s", scheme)
		}
		if _, ok := full.Components["securitySchemes"][scheme]; !ok {
			t.Errorf("full document misses the admin scheme %s", scheme)
		}
	}
	for _, name := range []string{"ClientUsage", "Webhook", "ProductAnswer"} {
		if _, ok := pub.Components["schemas"][name]; ok {
			t.Errorf("public document keeps the admin schema %s", name)
		}
	}
	for _, name := range []string{"Token", "Contract", "Balance", "Product", "Transaction", "ErrorResponse", "Event"} {
		if _, ok := pub.Components["schemas"][name]; !ok {
			t.Errorf("public document misses the schema %s", name)
		}
	}
	// Every $ref of the public document resolves within it.
	for _, ref := range refs(Public()) {
		section, name, _ := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
		if _, ok := pub.Components[section][name]; !ok {
			t.Errorf("public document: %s does not resolve", ref)
		}
	}
	for _, tag := range pub.Tags {
		if strings.HasPrefix(tag.Name, "Admin") {
			t.Errorf("public document has the tag %s", tag.Name)
		}
	}
}

func refs(b []byte) []string {
	var out []string
	for _, part := range strings.Split(string(b), `"$ref":"`)[1:] {
		ref, _, _ := strings.Cut(part, `"`)
		out = append(out, ref)
	}
	return out
}

// TestOrderKept: the JSON lists the paths in the YAML's order, and the answers are copies.
func TestOrderKept(t *testing.T) {
	b := Full()
	i, j := bytes.Index(b, []byte(`"/v1/tokens/{coinType}`)), bytes.Index(b, []byte(`"/v1/owners"`))
	if i < 0 || j < 0 || i > j {
		t.Errorf("tokens at %d, owners at %d", i, j)
	}
	b[0] = 'x'
	if Full()[0] != '{' || Public()[0] != '{' || !bytes.HasPrefix(YAML(), []byte("openapi: 3.1.0")) {
		t.Error("the documents are shared, not copies")
	}
}

func TestParseRefuses(t *testing.T) {
	for _, src := range []string{"a: 1\na: 2\n", "- 1\n", "a: .inf\n", "? [1]\n: 2\n", "<<: {a: 1}\n"} {
		o, err := parse([]byte(src))
		if err == nil {
			if _, err = o.MarshalJSON(); err == nil {
				t.Errorf("%q: no error", src)
			}
		}
	}
	o, err := parse([]byte("x: &a {k: [1, true, null, '2', 2.5]}\ny: *a\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := o.MarshalJSON(); string(b) != `{"x":{"k":[1,true,null,"2",2.5]},"y":{"k":[1,true,null,"2",2.5]}}` {
		t.Errorf("got %s", b)
	}
}
