package metadata

import (
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testDoc = `{"name":"Token #1","image":"ipfs://bafy/1.png"}`

// newTestFetcher builds a Fetcher whose idle connections are closed at the end of the test.
func newTestFetcher(t *testing.T, cfg FetcherConfig) *Fetcher {
	t.Helper()
	f, err := NewFetcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.CloseIdleConnections)
	return f
}

// documentServer is a real HTTP server on 127.0.0.1 with a route per behavior.
func documentServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/doc", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, testDoc)
	})
	mux.HandleFunc("/doc-as-text", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html") // Content-Type is not trusted either way
		fmt.Fprint(w, "\xef\xbb\xbf\n  "+testDoc+"\n")
	})
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			http.Error(w, "gzip expected", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		fmt.Fprint(zw, testDoc)
		zw.Close()
	})
	mux.HandleFunc("/gzip-bomb", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		fmt.Fprint(zw, `{"a":"`+strings.Repeat("a", 1<<20)+`"}`)
		zw.Close()
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"a":"`+strings.Repeat("a", 4096)+`"}`)
	})
	mux.HandleFunc("/big-chunked", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"a":"`)
		w.(http.Flusher).Flush() // no Content-Length
		fmt.Fprint(w, strings.Repeat("a", 4096)+`"}`)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		fmt.Fprint(w, testDoc)
	})
	mux.HandleFunc("/slow-body", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"a":`)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	mux.HandleFunc("/html", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json") // lies
		fmt.Fprint(w, "<!doctype html><html><body>Not here</body></html>")
	})
	mux.HandleFunc("/array", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `[{"name":"x"}]`) })
	mux.HandleFunc("/text", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello") })
	mux.HandleFunc("/empty", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/truncated", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "100")
		fmt.Fprint(w, `{"a":1}`)
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/error", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"internal 10.0.0.7"}`, http.StatusInternalServerError)
	})
	mux.HandleFunc("/redirect/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		to := "/doc"
		if n > 1 {
			to = "/redirect/" + strconv.Itoa(n-1)
		}
		http.Redirect(w, r, to, http.StatusFound)
	})
	for _, to := range []string{"ftp://example.com/doc", "file:///etc/passwd", "gopher://example.com/", "javascript:alert(1)"} {
		scheme, _, _ := strings.Cut(to, ":")
		mux.HandleFunc("/to-"+scheme, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", to)
			w.WriteHeader(http.StatusFound)
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestFetch(t *testing.T) {
	srv := documentServer(t)
	f := newTestFetcher(t, FetcherConfig{AllowNetworks: []string{"127.0.0.0/8"}})
	for _, path := range []string{"/doc", "/doc-as-text", "/gzip", "/redirect/1", "/redirect/3"} {
		t.Run(path, func(t *testing.T) {
			got, err := f.Fetch(context.Background(), srv.URL+path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != testDoc {
				t.Errorf("got %q, want %q", got, testDoc)
			}
		})
	}
}

func TestFetchFailures(t *testing.T) {
	srv := documentServer(t)
	f := newTestFetcher(t, FetcherConfig{
		AllowNetworks: []string{"127.0.0.0/8"},
		MaxBytes:      2048,
		Timeout:       500 * time.Millisecond,
		DNSServer:     dnsServer(t),
	})
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, testDoc) }))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake error is expected
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	for _, tc := range []struct {
		url  string
		want string
	}{
		{srv.URL + "/big", "document too large"},
		{srv.URL + "/big-chunked", "document too large"},
		{srv.URL + "/gzip-bomb", "document too large"},
		{srv.URL + "/slow", "gateway timeout"},
		{srv.URL + "/slow-body", "gateway timeout"},
		{srv.URL + "/html", "not a JSON document"},
		{srv.URL + "/array", "not a JSON document"},
		{srv.URL + "/text", "not a JSON document"},
		{srv.URL + "/empty", "not a JSON document"},
		{srv.URL + "/truncated", "document server sent a broken response"},
		{srv.URL + "/missing", "document server answered HTTP 404"},
		{srv.URL + "/error", "document server answered HTTP 500"},
		{srv.URL + "/redirect/4", "too many redirects"},
		{srv.URL + "/to-ftp", "redirect to an unsupported URI scheme"},
		{srv.URL + "/to-file", "redirect to an unsupported URI scheme"},
		{srv.URL + "/to-gopher", "redirect to an unsupported URI scheme"},
		{srv.URL + "/to-javascript", "redirect to an unsupported URI scheme"},
		{"ftp://127.0.0.1/doc", "unsupported URI scheme"},
		{"file:///etc/passwd", "unsupported URI scheme"},
		{"127.0.0.1/doc", "unsupported URI scheme"},
		{"http://", "invalid URI"},
		{"http://[::1", "invalid URI"},
		{"http:///doc", "invalid URI"},
		{"http://nx.web3gate.test/doc", "host not found"},
		{"http://" + closedAddr(t) + "/doc", "connection failed"},
		{tlsSrv.URL + "/doc", "TLS handshake failed"}, // self-signed
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := f.Fetch(context.Background(), tc.url)
			var fe *FetchError
			if !errors.As(err, &fe) || fe.Reason != tc.want || err.Error() != tc.want {
				t.Fatalf("Fetch() = %v, want FetchError %q", err, tc.want)
			}
			if errors.Is(err, ErrAddressNotAllowed) {
				t.Error("error Is ErrAddressNotAllowed")
			}
		})
	}
}

func TestFetchTimeoutIsDeadline(t *testing.T) {
	srv := documentServer(t)
	f := newTestFetcher(t, FetcherConfig{AllowNetworks: []string{"127.0.0.0/8"}, Timeout: 200 * time.Millisecond})
	_, err := f.Fetch(context.Background(), srv.URL+"/slow")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Fetch() = %v, want Is context.DeadlineExceeded", err)
	}
}

func TestFetchCanceled(t *testing.T) {
	srv := documentServer(t)
	f := newTestFetcher(t, FetcherConfig{AllowNetworks: []string{"127.0.0.0/8"}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := f.Fetch(ctx, srv.URL+"/slow")
	if !errors.Is(err, context.Canceled) || err.Error() != "fetch canceled" {
		t.Errorf("Fetch() = %v, want fetch canceled", err)
	}
}

func TestFetchNoRedirects(t *testing.T) {
	srv := documentServer(t)
	f := newTestFetcher(t, FetcherConfig{AllowNetworks: []string{"127.0.0.0/8"}, MaxRedirects: -1})
	if _, err := f.Fetch(context.Background(), srv.URL+"/redirect/1"); err == nil || err.Error() != "too many redirects" {
		t.Errorf("Fetch() = %v, want too many redirects", err)
	}
}

func TestFetchHeaders(t *testing.T) {
	var ua, accept atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua.Store(r.Header.Get("User-Agent"))
		accept.Store(r.Header.Get("Accept"))
		fmt.Fprint(w, testDoc)
	}))
	t.Cleanup(srv.Close)
	f := newTestFetcher(t, FetcherConfig{AllowNetworks: []string{"127.0.0.0/8"}})
	if _, err := f.Fetch(context.Background(), srv.URL+"/#fragment"); err != nil {
		t.Fatal(err)
	}
	if ua.Load() != "web3gate-metadata/1" || !strings.Contains(accept.Load().(string), "application/json") {
		t.Errorf("User-Agent %q, Accept %q", ua.Load(), accept.Load())
	}
}

// TestFetchIgnoresProxyEnv: a proxy in the environment is never used (it would be a way
// around the address policy, and a way to leak documents).
func TestFetchIgnoresProxyEnv(t *testing.T) {
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		proxied.Add(1)
		fmt.Fprint(w, `{"proxied":true}`)
	}))
	t.Cleanup(proxy.Close)
	srv := documentServer(t)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	f := newTestFetcher(t, FetcherConfig{AllowNetworks: []string{"127.0.0.0/8"}})
	got, err := f.Fetch(context.Background(), srv.URL+"/doc")
	if err != nil || string(got) != testDoc || proxied.Load() != 0 {
		t.Errorf("Fetch() = %q, %v; proxy saw %d requests", got, err, proxied.Load())
	}
}

// recordingServer counts the requests that reach it, on 127.0.0.1 and on [::1].
type recordingServer struct {
	hits  atomic.Int64
	port4 string
	addr6 string // [::1]:port
}

func newRecordingServer(t *testing.T) *recordingServer {
	t.Helper()
	rs := &recordingServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rs.hits.Add(1)
		fmt.Fprint(w, `{"secret":"instance credentials"}`)
	})
	v4 := httptest.NewServer(h)
	t.Cleanup(v4.Close)
	_, rs.port4, _ = net.SplitHostPort(v4.Listener.Addr().String())

	l6, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatalf("listen on [::1]: %v", err)
	}
	v6 := &httptest.Server{Listener: l6, Config: &http.Server{Handler: h}}
	v6.Start()
	t.Cleanup(v6.Close)
	rs.addr6 = l6.Addr().String()
	return rs
}

// redirector serves on 127.0.0.2 and redirects every request to ?to=.
func redirector(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2: %v", err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// dnsServer is a tiny DNS server on UDP 127.0.0.1: it answers every A query with 127.0.0.1,
// names starting with "nx." with NXDOMAIN and other queries with no answer. Built by hand:
// golang.org/x/net/dns/dnsmessage would need go.mod to list golang.org/x/net.
func dnsServer(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := dnsAnswer(buf[:n]); resp != nil {
				pc.WriteTo(resp, from)
			}
		}
	})
	t.Cleanup(func() {
		pc.Close()
		wg.Wait()
	})
	return pc.LocalAddr().String()
}

// dnsAnswer builds the response to one query (RFC 1035 4.1), or nil for a malformed one.
func dnsAnswer(q []byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	end := 12
	var labels []string
	for end < len(q) && q[end] != 0 {
		l := int(q[end])
		if l > 63 || end+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[end+1:end+1+l]))
		end += 1 + l
	}
	end += 1 + 4 // root label, QTYPE, QCLASS
	if end > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[end-4 : end-2])
	nx := len(labels) > 0 && strings.EqualFold(labels[0], "nx")
	answers := 0
	if qtype == 1 && !nx {
		answers = 1
	}
	resp := make([]byte, 0, end+16)
	resp = append(resp, q[0], q[1]) // ID
	flags := uint16(0x8180)         // QR, RD, RA
	flags |= uint16(q[2]&0x01) << 8 // echo RD
	if nx {
		flags |= 3 // NXDOMAIN
	}
	resp = binary.BigEndian.AppendUint16(resp, flags)
	resp = append(resp, 0, 1, 0, byte(answers), 0, 0, 0, 0) // QD, AN, NS, AR
	resp = append(resp, q[12:end]...)
	if answers == 1 {
		resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 127, 0, 0, 1)
	}
	return resp
}

func TestFetchRefusesInternalAddresses(t *testing.T) {
	rs := newRecordingServer(t)
	dns := dnsServer(t)
	p := rs.port4
	common := []string{
		"http://127.0.0.1:" + p + "/",
		"http://127.0.0.1:" + p + "/latest/meta-data/",
		"https://127.0.0.1:" + p + "/",
		"http://10.0.0.1/",
		"http://169.254.169.254/latest/meta-data/iam/security-credentials/",
		"http://[fd00:ec2::254]/latest/meta-data/",
		"http://100.100.100.200/latest/meta-data/",
		"http://168.63.129.16/machine?comp=goalstate",
		"http://[fe80::1%25lo]:" + p + "/",
		"http://" + rs.addr6 + "/",
		"http://localhost:" + p + "/",
		"http://LOCALHOST:" + p + "/",
		"http://0.0.0.0:" + p + "/",
		"http://[::]:" + p + "/",
		"http://[::ffff:127.0.0.1]:" + p + "/",
		"http://[::ffff:7f00:1]:" + p + "/",
	}
	system := newTestFetcher(t, FetcherConfig{Timeout: 2 * time.Second})
	viaDNS := newTestFetcher(t, FetcherConfig{Timeout: 2 * time.Second, DNSServer: dns})
	for _, run := range []struct {
		name string
		f    *Fetcher
		urls []string
	}{
		{"system", system, common},
		{"dns", viaDNS, append(common,
			"http://rebind.web3gate.test:"+p+"/",
			"http://metadata.google.internal:"+p+"/computeMetadata/v1/",
		)},
	} {
		for _, u := range run.urls {
			t.Run(run.name+"/"+u, func(t *testing.T) {
				_, err := run.f.Fetch(context.Background(), u)
				if !errors.Is(err, ErrAddressNotAllowed) || err.Error() != "destination address not allowed" {
					t.Fatalf("Fetch() = %v, want ErrAddressNotAllowed", err)
				}
			})
		}
	}
	t.Run("redirect", func(t *testing.T) {
		redir := redirector(t)
		f := newTestFetcher(t, FetcherConfig{Timeout: 2 * time.Second, DNSServer: dns, AllowNetworks: []string{"127.0.0.2/32"}})
		for _, to := range []string{
			"http://127.0.0.1:" + p + "/",
			"http://localhost:" + p + "/",
			"http://rebind.web3gate.test:" + p + "/",
			"http://" + rs.addr6 + "/",
			"http://169.254.169.254/latest/meta-data/",
		} {
			t.Run(to, func(t *testing.T) {
				_, err := f.Fetch(context.Background(), redir+"/?to="+to)
				if !errors.Is(err, ErrAddressNotAllowed) {
					t.Fatalf("Fetch() = %v, want ErrAddressNotAllowed", err)
				}
			})
		}
	})
	if n := rs.hits.Load(); n != 0 {
		t.Errorf("the recording server saw %d requests, want 0", n)
	}
}

// TestFetchOddHostsNeverReach: numeric host spellings a resolver may or may not read as
// 127.0.0.1; whichever way, the request must not arrive.
func TestFetchOddHostsNeverReach(t *testing.T) {
	rs := newRecordingServer(t)
	f := newTestFetcher(t, FetcherConfig{Timeout: 2 * time.Second})
	for _, host := range []string{"2130706433", "0x7f000001", "0x7f.0.0.1", "0177.0.0.1", "127.1", "127.0.1", "017700000001"} {
		u := "http://" + host + ":" + rs.port4 + "/"
		t.Run(u, func(t *testing.T) {
			if _, err := f.Fetch(context.Background(), u); err == nil {
				t.Fatal("Fetch() succeeded")
			}
		})
	}
	if n := rs.hits.Load(); n != 0 {
		t.Errorf("the recording server saw %d requests, want 0", n)
	}
}

// TestFetchErrorsHideDetails: reasons never carry the host, an address or the body.
func TestFetchErrorsHideDetails(t *testing.T) {
	srv := documentServer(t)
	dns := dnsServer(t)
	f := newTestFetcher(t, FetcherConfig{Timeout: time.Second, DNSServer: dns, AllowNetworks: []string{"127.0.0.0/8"}})
	for _, u := range []string{
		srv.URL + "/error",
		"http://secret-host.web3gate.test:1/",
		"http://nx.secret-host.web3gate.test/",
		"http://10.1.2.3/",
	} {
		t.Run(u, func(t *testing.T) {
			_, err := f.Fetch(context.Background(), u)
			if err == nil {
				t.Fatal("Fetch() succeeded")
			}
			for _, leak := range []string{"secret", "127.0.0.1", "10.", "internal", "web3gate.test", ":1"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error %q contains %q", err, leak)
				}
			}
		})
	}
}

// closedAddr is a 127.0.0.1 address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
