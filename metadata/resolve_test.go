package metadata

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testCID  = "bafybeigdyrztlpmrqvbv4a5eqwxa3vtn3ujjs2fkk5yq7mf7vvnsu2wmcq"
	testCID0 = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"
	testTxID = "bNbA3TEQVL60xlgCcqdz4ZPHFZ711cZ3hmkpGttDt_U"
)

// contentServer stands in for an IPFS or Arweave gateway: it serves docs by path and records
// the paths asked for.
type contentServer struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
}

func newContentServer(t *testing.T, docs map[string]string) *contentServer {
	t.Helper()
	cs := &contentServer{}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.mu.Lock()
		cs.paths = append(cs.paths, r.URL.Path)
		cs.mu.Unlock()
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, doc)
	}))
	t.Cleanup(cs.Close)
	return cs
}

func (cs *contentServer) seen() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]string(nil), cs.paths...)
}

type resolverFixture struct {
	r          *Resolver
	empty      *contentServer // a gateway that has nothing (404)
	gateway    *contentServer // the gateway that serves
	thirdParty *contentServer // some other gateway, named in on-chain URLs
	arweave    *contentServer
}

func newResolverFixture(t *testing.T) *resolverFixture {
	t.Helper()
	docs := map[string]string{
		"/ipfs/" + testCID:                      `{"doc":"root"}`,
		"/ipfs/" + testCID + "/1.json":          `{"doc":"one"}`,
		"/ipfs/" + testCID + "/My Token 1.json": `{"doc":"spaces"}`,
		"/ipfs/" + testCID0 + "/2":              `{"doc":"v0"}`,
		"/ipfs/" + testCID + "/array.json":      `[1,2]`,
		"/ipns/k51qzi5uqu5dlvj2baxnqndepeb86cbk3ng7n3i46uzyxzyqj2xjonzllnv0v8/1": `{"doc":"ipns key"}`,
		"/ipns/collection.example.eth/7":                                         `{"doc":"dnslink"}`,
	}
	fx := &resolverFixture{
		empty:   newContentServer(t, nil),
		gateway: newContentServer(t, docs),
		thirdParty: newContentServer(t, map[string]string{
			"/ipfs/" + testCID + "/1.json":    `{"doc":"third party"}`,
			"/ipfs/" + testCID + "/only.json": `{"doc":"only third party"}`,
		}),
		arweave: newContentServer(t, map[string]string{
			"/" + testTxID:          `{"doc":"arweave"}`,
			"/" + testTxID + "/3":   `{"doc":"arweave path"}`,
			"/" + testTxID + "/arr": `[]`,
		}),
	}
	f := newTestFetcher(t, FetcherConfig{AllowNetworks: []string{"127.0.0.0/8"}, Timeout: 2 * time.Second})
	fx.r = NewResolver(f, []string{
		"http://" + closedAddr(t) + "/ipfs/", // down
		fx.empty.URL + "/ipfs/",
		fx.gateway.URL + "/ipfs", // without the trailing slash
	}, fx.arweave.URL+"/", 1024)
	return fx
}

func TestResolve(t *testing.T) {
	fx := newResolverFixture(t)
	third := fx.thirdParty.URL
	for _, tc := range []struct {
		name, uri, want string
	}{
		{"ipfs", "ipfs://" + testCID, `{"doc":"root"}`},
		{"ipfs path", "ipfs://" + testCID + "/1.json", `{"doc":"one"}`},
		{"ipfs fragment", "ipfs://" + testCID + "/1.json#x", `{"doc":"one"}`},
		{"ipfs upper scheme", "IPFS://" + testCID + "/1.json", `{"doc":"one"}`},
		{"ipfs white space", "  \n ipfs://" + testCID + "/1.json\t", `{"doc":"one"}`},
		{"ipfs://ipfs/", "ipfs://ipfs/" + testCID + "/1.json", `{"doc":"one"}`},
		{"ipfs spaces", "ipfs://" + testCID + "/My Token 1.json", `{"doc":"spaces"}`},
		{"ipfs escaped spaces", "ipfs://" + testCID + "/My%20Token%201.json", `{"doc":"spaces"}`},
		{"ipfs cidv0", "ipfs://" + testCID0 + "/2", `{"doc":"v0"}`},
		{"ipns key", "ipns://k51qzi5uqu5dlvj2baxnqndepeb86cbk3ng7n3i46uzyxzyqj2xjonzllnv0v8/1", `{"doc":"ipns key"}`},
		{"ipns dnslink", "ipns://collection.example.eth/7", `{"doc":"dnslink"}`},
		{"/ipfs/ path", "/ipfs/" + testCID + "/1.json", `{"doc":"one"}`},
		{"/ipns/ path", "/ipns/collection.example.eth/7", `{"doc":"dnslink"}`},
		{"gateway URL goes to our gateways first", third + "/ipfs/" + testCID + "/1.json", `{"doc":"one"}`},
		{"gateway URL with a token", third + "/ipfs/" + testCID + "/1.json?token=abc", `{"doc":"one"}`},
		{"gateway URL as last resort", third + "/ipfs/" + testCID + "/only.json", `{"doc":"only third party"}`},
		{"subdomain gateway URL", "https://" + testCID + ".ipfs.gateway.invalid/1.json", `{"doc":"one"}`},
		{"ar", "ar://" + testTxID, `{"doc":"arweave"}`},
		{"ar path", "ar://" + testTxID + "/3", `{"doc":"arweave path"}`},
		{"http", third + "/ipfs/" + testCID + "/only.json", `{"doc":"only third party"}`},
		{"raw JSON", ` {"name":"on chain"} `, `{"name":"on chain"}`},
		{"data base64", "data:application/json;base64," + base64.StdEncoding.EncodeToString([]byte(`{"name":"b64 ✓"}`)), `{"name":"b64 ✓"}`},
		{"data base64 unpadded", "data:application/json;base64," + base64.RawStdEncoding.EncodeToString([]byte(`{"n":1}`)), `{"n":1}`},
		{"data base64 URL alphabet", "data:application/json;base64," + base64.URLEncoding.EncodeToString([]byte(`{"n":"???>>>"}`)), `{"n":"???>>>"}`},
		{"data base64 URL alphabet unpadded", "data:application/json;base64," + base64.RawURLEncoding.EncodeToString([]byte(`{"n":"???>>>"}`)), `{"n":"???>>>"}`},
		{"data base64 line breaks", "data:application/json;base64,eyJuIjox\nfQ==", `{"n":1}`},
		{"data base64 escaped padding", "data:application/json;base64,eyJuIjoxfQ%3D%3D", `{"n":1}`},
		{"data base64 charset", "data:application/json;charset=utf-8;base64,eyJuIjoxfQ==", `{"n":1}`},
		{"data base64 upper", "DATA:Application/JSON;BASE64,eyJuIjoxfQ==", `{"n":1}`},
		{"data base64 before charset", "data:application/json;base64;charset=utf-8,eyJuIjoxfQ==", `{"n":1}`},
		{"data base64 no media type", "data:;base64,eyJuIjoxfQ==", `{"n":1}`},
		{"data percent", "data:application/json," + url.PathEscape(`{"name":"a b/c","d":"ü"}`), `{"name":"a b/c","d":"ü"}`},
		{"data percent utf8 param", "data:application/json;utf8," + url.PathEscape(`{"n":"%"}`), `{"n":"%"}`},
		{"data raw", `data:application/json,{"name":"100% raw","image":"data:image/svg+xml;utf8,<svg/>"}`, `{"name":"100% raw","image":"data:image/svg+xml;utf8,<svg/>"}`},
		{"data raw with an escape-like sequence", `data:application/json;utf8,{"name":"%22quoted%22"}`, `{"name":"%22quoted%22"}`},
		{"data raw unicode", `data:application/json;charset=utf-8,{"name":"Ñandú 🦤 #1","description":"日本語"}`, `{"name":"Ñandú 🦤 #1","description":"日本語"}`},
		{"data text/plain", `data:text/plain,{"n":2}`, `{"n":2}`},
		{"data no media type", `data:,{"n":3}`, `{"n":3}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fx.r.Resolve(context.Background(), tc.uri)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestResolveTriesGatewaysInOrder(t *testing.T) {
	fx := newResolverFixture(t)
	if _, err := fx.r.Resolve(context.Background(), "ipfs://"+testCID+"/1.json"); err != nil {
		t.Fatal(err)
	}
	want := "/ipfs/" + testCID + "/1.json"
	if got := fx.empty.seen(); len(got) != 1 || got[0] != want {
		t.Errorf("the empty gateway saw %q, want [%q]", got, want)
	}
	if got := fx.gateway.seen(); len(got) != 1 || got[0] != want {
		t.Errorf("the serving gateway saw %q, want [%q]", got, want)
	}
	if got := fx.thirdParty.seen(); len(got) != 0 {
		t.Errorf("the third-party gateway saw %q", got)
	}
}

func TestResolveFailures(t *testing.T) {
	fx := newResolverFixture(t)
	big := `{"a":"` + strings.Repeat("x", 2000) + `"}`
	for _, tc := range []struct {
		name, uri, want string
	}{
		{"empty", "", "no metadata URI"},
		{"blank", " \t\n", "no metadata URI"},
		{"file", "file:///etc/passwd", "unsupported URI scheme"},
		{"ftp", "ftp://example.com/1.json", "unsupported URI scheme"},
		{"javascript", "javascript:alert(1)", "unsupported URI scheme"},
		{"gopher", "gopher://127.0.0.1:6379/_FLUSHALL", "unsupported URI scheme"},
		{"dict", "dict://127.0.0.1:11211/stats", "unsupported URI scheme"},
		{"no scheme", "example.com/1.json", "unsupported URI scheme"},
		{"bare CID", testCID, "unsupported URI scheme"},
		{"ipfs without slashes", "ipfs:" + testCID, "invalid URI"},
		{"ipfs bad CID", "ipfs://not_a_cid!/1.json", "invalid URI"},
		{"ipfs empty", "ipfs://", "invalid URI"},
		{"ipfs dot-dot", "ipfs://" + testCID + "/../../admin", "invalid URI"},
		{"ipfs escaped dot-dot", "ipfs://" + testCID + "/%2e%2e/admin", "invalid URI"},
		{"ipfs escaped slash dot-dot", "ipfs://" + testCID + "/a%2f..%2fb", "invalid URI"},
		{"ipns bad name", "ipns://../x", "invalid URI"},
		{"ar bad id", "ar://a/../b", "invalid URI"},
		{"ipfs nowhere", "ipfs://" + testCID + "/nowhere.json", "document server answered HTTP 404"},
		{"ipfs array", "ipfs://" + testCID + "/array.json", "not a JSON document"},
		{"gateway URL nowhere", fx.thirdParty.URL + "/ipfs/" + testCID + "/nowhere.json", "document server answered HTTP 404"},
		{"ar nowhere", "ar://" + testTxID + "/nowhere", "document server answered HTTP 404"},
		{"ar array", "ar://" + testTxID + "/arr", "not a JSON document"},
		{"http array", fx.gateway.URL + "/ipfs/" + testCID + "/array.json", "not a JSON document"},
		{"raw not JSON", "{not json", "not a JSON document"},
		{"raw too large", big, "document too large"},
		{"data array", "data:application/json,[1,2]", "not a JSON document"},
		{"data base64 array", "data:application/json;base64,WzEsMl0=", "not a JSON document"},
		{"data string", `data:application/json,"x"`, "not a JSON document"},
		{"data html", "data:text/html,<h1>hi</h1>", "unsupported data URI media type"},
		{"data svg", "data:image/svg+xml;base64,PHN2Zy8+", "unsupported data URI media type"},
		{"data bad base64", "data:application/json;base64,!!!!", "invalid data URI"},
		{"data no comma", "data:application/json;base64", "invalid data URI"},
		{"data base64 too large", "data:application/json;base64," + base64.StdEncoding.EncodeToString([]byte(big)), "document too large"},
		{"data percent too large", "data:application/json," + url.PathEscape(big), "document too large"},
		{"data raw too large", "data:application/json," + big, "document too large"},
		{"data empty", "data:,", "not a JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fx.r.Resolve(context.Background(), tc.uri)
			var fe *FetchError
			if !errors.As(err, &fe) || fe.Reason != tc.want {
				t.Fatalf("Resolve() = %v, want FetchError %q", err, tc.want)
			}
		})
	}
}

func TestResolveWithoutGateways(t *testing.T) {
	f := newTestFetcher(t, FetcherConfig{})
	r := NewResolver(f, nil, "", 1024)
	for _, uri := range []string{"ipfs://" + testCID, "ipns://name.eth", "ar://" + testTxID} {
		t.Run(uri, func(t *testing.T) {
			_, err := r.Resolve(context.Background(), uri)
			if err == nil || err.Error() != "no gateway configured for this URI" {
				t.Fatalf("Resolve() = %v", err)
			}
		})
	}
}

// TestResolveGatewayAddressPolicy: a gateway URL in a token URI whose host is internal does
// not get fetched as the last resort either.
func TestResolveGatewayAddressPolicy(t *testing.T) {
	gw := newContentServer(t, nil)
	f := newTestFetcher(t, FetcherConfig{})
	r := NewResolver(f, []string{"http://" + closedAddr(t) + "/ipfs/"}, "", 1024)
	_, err := r.Resolve(context.Background(), gw.URL+"/ipfs/"+testCID+"/1.json")
	if !errors.Is(err, ErrAddressNotAllowed) {
		t.Fatalf("Resolve() = %v, want ErrAddressNotAllowed", err)
	}
	if got := gw.seen(); len(got) != 0 {
		t.Errorf("the internal gateway saw %q", got)
	}
}

func TestResolveStopsWhenCanceled(t *testing.T) {
	fx := newResolverFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := fx.r.Resolve(ctx, "ipfs://"+testCID+"/1.json")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Resolve() = %v, want canceled", err)
	}
	if got := fx.gateway.seen(); len(got) != 0 {
		t.Errorf("the gateway saw %q after cancellation", got)
	}
}

func FuzzDecodeDataURI(f *testing.F) {
	for _, s := range []string{
		"application/json;base64,eyJuIjoxfQ==",
		`application/json,{"n":1}`,
		"application/json,%7B%22n%22%3A1%7D",
		",",
		";base64,",
		"text/plain;charset=utf-8;base64,eyJuIjoxfQ",
		"application/json;base64,eyJuIjoxfQ%3D%3D",
		`,{"a":"%zz"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		doc, err := decodeDataURI(s, 1024)
		if err == nil && len(doc) > 1024 {
			t.Fatalf("decoded %d bytes, over the cap", len(doc))
		}
	})
}

func TestIsSubdomainCID(t *testing.T) {
	for _, tc := range []struct {
		label string
		want  bool
	}{
		{testCID, true},
		{"k51qzi5uqu5dlvj2baxnqndepeb86cbk3ng7n3i46uzyxzyqj2xjonzllnv0v8", true},
		{"metadata", false},
		{"collection", false},
		{strings.ToLower(testCID0), false},
		{testCID[:20], false},
		{testCID + "-x", false},
	} {
		t.Run(tc.label, func(t *testing.T) {
			if got := isSubdomainCID(tc.label); got != tc.want {
				t.Errorf("isSubdomainCID(%q) = %v, want %v", tc.label, got, tc.want)
			}
		})
	}
}
