package openapitest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Errorf reports.
type recorder struct {
	*testing.T
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// A Transport fails the registering test on an answer that breaks the document, hands the
// client the whole body either way, and leaves other servers' answers alone.
func TestTransportChecksRegisteredListeners(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "r1")
		if r.URL.Path == "/v1/owners" {
			io.WriteString(w, `{"owners":"not the document's shape"}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"code":404,"status":"Not Found","message":"no route","request":"r1"}}`)
	}))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `anything`)
	}))
	defer other.Close()

	tr := &Transport{Base: http.DefaultTransport}
	client := &http.Client{Transport: tr.Wrap(http.DefaultTransport)}
	rec := &recorder{T: t}
	host := strings.TrimPrefix(srv.URL, "http://")
	tr.Register(rec, host, "127.0.0.1:1")

	get := func(url string) string {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if b := get(srv.URL + "/no/such/route"); !strings.Contains(b, "no route") || len(rec.errs) != 0 {
		t.Fatalf("a documented 404: body %q, errors %q", b, rec.errs)
	}
	if b := get(other.URL + "/v1/owners"); b != "anything" || len(rec.errs) != 0 {
		t.Fatalf("another server's answer: body %q, errors %q", b, rec.errs)
	}
	if b := get(srv.URL + "/v1/owners?chainId=1"); !strings.Contains(b, "not the document's shape") {
		t.Fatalf("the client got %q", b)
	}
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "/v1/owners") {
		t.Fatalf("an answer that breaks the document: errors %q, want one naming /v1/owners", rec.errs)
	}
}
