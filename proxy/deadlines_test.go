package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// bigAnswer is the size of the answer of timeoutServer's /v1/big: more than the sockets'
// buffers hold (4 to 6 MiB of it arrive before the server's write blocks).
const bigAnswer = 24 << 20

// bigBody is /v1/big's answer, built on first use.
var bigBody = sync.OnceValue(func() []byte { return []byte(`"` + strings.Repeat("x", bigAnswer) + `"`) })

// timeoutServer serves REST routes with the given timeouts and returns its address:
// /v1/echo/{what} answers what, /v1/big an answer of bigAnswer bytes.
func timeoutServer(t *testing.T, cfg Config) string {
	t.Helper()
	echo := RESTHandlerFunc(func(r *RESTRequest) (*RESTResponse, error) {
		return &RESTResponse{Member: "echo", Body: []byte(`"` + r.Params.Get("what") + `"`)}, nil
	})
	big := RESTHandlerFunc(func(*RESTRequest) (*RESTResponse, error) {
		return &RESTResponse{Member: "big", Body: bigBody()}, nil
	})
	return serveRoutes(t, cfg,
		&Route{Name: "echo", Method: http.MethodGet, Pattern: "/v1/echo/{what}", REST: echo},
		&Route{Name: "big", Method: http.MethodGet, Pattern: "/v1/big", REST: big})
}

// dial connects to addr for the length of the test.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A request whose headers do not arrive within the read timeout is answered 408 with the
// JSON error, and the connection is closed.
func TestReadTimeoutAnswers408(t *testing.T) {
	addr := timeoutServer(t, Config{ReadTimeout: 300 * time.Millisecond, WriteTimeout: time.Second, IdleTimeout: 5 * time.Second})
	c := dial(t, addr)
	start := time.Now()
	if _, err := io.WriteString(c, "GET /v1/echo/x HTTP/1.1\r\nHost: a\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a request read too slowly: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	waited := time.Since(start)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "request read timed out") {
		t.Errorf("answer %d %s, want 408 with the read timeout error", resp.StatusCode, body)
	}
	if waited < 250*time.Millisecond || waited > 300*time.Millisecond+deadlineTick+time.Second {
		t.Errorf("answered after %v, want the read timeout of 300ms (up to a tick late)", waited)
	}
	if !resp.Close {
		t.Error("the connection is kept open after a read timeout")
	}
}

// An idle keep-alive connection is closed after the idle timeout, not before.
func TestIdleTimeoutClosesConnection(t *testing.T) {
	addr := timeoutServer(t, Config{ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: 400 * time.Millisecond})
	c := dial(t, addr)
	br := bufio.NewReader(c)
	get(t, c, br, "one")
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := br.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %d bytes, %v; want EOF", n, err)
	}
	if waited := time.Since(start); waited < 350*time.Millisecond || waited > 400*time.Millisecond+deadlineTick+time.Second {
		t.Errorf("closed after %v idle, want the idle timeout of 400ms (up to a tick late)", waited)
	}
}

// A keep-alive connection outlives its read and write timeouts many times over: each request
// sets new deadlines, and the last request's read and write deadlines, which pass (and which
// the watchdog fires) while the connection waits for the next request, are undone by it.
func TestKeepAliveOutlivesTimeouts(t *testing.T) {
	addr := timeoutServer(t, Config{ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, IdleTimeout: 2 * time.Second})
	c := dial(t, addr)
	br := bufio.NewReader(c)
	for i := range 5 {
		get(t, c, br, "n"+strings.Repeat("x", i))
		time.Sleep(100*time.Millisecond + 3*deadlineTick)
	}
}

func get(t *testing.T, c net.Conn, br *bufio.Reader, what string) {
	t.Helper()
	if _, err := io.WriteString(c, "GET /v1/echo/"+what+" HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", what, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"`+what+`"`) {
		t.Fatalf("GET %s: %d %s", what, resp.StatusCode, body)
	}
}

// recorder stands for a connection's real SetReadDeadline.
type recorder struct {
	mu  sync.Mutex
	set []time.Time
}

func (r *recorder) real(t time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.set = append(r.set, t)
	return nil
}

func (r *recorder) last() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.set) == 0 {
		return time.Time{}
	}
	return r.set[len(r.set)-1]
}

func TestDeadlineFireAndSet(t *testing.T) {
	var (
		d   deadline
		rec recorder
	)
	now := time.Now()
	d.set(now.Add(time.Second), rec.real)
	if len(rec.set) != 0 {
		t.Fatalf("set touched the real deadline: %v", rec.set)
	}
	if d.due(now.UnixNano()) {
		t.Fatal("due before the deadline")
	}
	d.fire(now.UnixNano(), rec.real)
	if len(rec.set) != 0 {
		t.Fatal("fired before the deadline")
	}
	later := now.Add(2 * time.Second).UnixNano()
	if !d.due(later) {
		t.Fatal("not due after the deadline")
	}
	d.fire(later, rec.real)
	if !rec.last().Equal(aLongTimeAgo) {
		t.Fatalf("fire set %v, want a deadline in the past", rec.last())
	}
	if d.due(later) {
		t.Fatal("still due once fired")
	}
	d.set(now.Add(time.Hour), rec.real)
	if !rec.last().IsZero() {
		t.Fatalf("a new deadline after a fired one left the real deadline at %v", rec.last())
	}
	d.set(time.Time{}, rec.real)
	if d.due(now.Add(2 * time.Hour).UnixNano()) {
		t.Fatal("no deadline, yet due")
	}
}

// set racing fire: when set records a new deadline after fire read the old one, but checks
// fired before fire marks it (so set leaves the real deadline alone), fire sees the new
// deadline and undoes itself. The hook runs set's two steps at that point of fire.
func TestDeadlineSetRacesFire(t *testing.T) {
	var (
		d   deadline
		rec recorder
	)
	base := time.Now()
	d.set(base.Add(-time.Second), rec.real) // passed: fire enforces it
	later := base.Add(time.Hour)
	realDuringFire := func(t time.Time) error {
		if t.Equal(aLongTimeAgo) {
			d.at.Store(later.UnixNano()) // set's record; its check of fired came first
		}
		return rec.real(t)
	}
	d.fire(base.UnixNano(), realDuringFire)
	if !rec.last().IsZero() || d.fired.Load() {
		t.Fatalf("real deadlines %v, fired %v: the later deadline is not in force", rec.set, d.fired.Load())
	}
}

// The watchdog outlives a closed listener while connections remain, and ends after the last.
func TestWatchdogEndsWithLastConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wl := newWatchedListener(ln, 10*time.Millisecond, timeouts{}, nil)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := wl.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sc, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	_ = wl.Close()
	select {
	case <-wl.done:
		t.Fatal("the watchdog ended while a connection was open")
	case <-time.After(100 * time.Millisecond):
	}
	_ = sc.Close()
	select {
	case <-wl.done:
	case <-time.After(2 * time.Second):
		t.Fatal("the watchdog did not end after the last connection closed")
	}
}

// On a keep-alive connection, a request whose first bytes arrive after an answer gets the
// read timeout from then on, not the (longer) idle timeout: 408, then the connection closes.
func TestReadTimeoutOfSecondRequest(t *testing.T) {
	addr := timeoutServer(t, Config{ReadTimeout: 300 * time.Millisecond, WriteTimeout: time.Second, IdleTimeout: 10 * time.Second})
	c := dial(t, addr)
	br := bufio.NewReader(c)
	get(t, c, br, "one")
	time.Sleep(500 * time.Millisecond) // idle: longer than the read timeout, well within the idle one
	get(t, c, br, "two")
	start := time.Now()
	if _, err := io.WriteString(c, "GET /v1/echo/three HTTP/1.1\r\nHost: a\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a second request read too slowly: %v", err)
	}
	_, _ = io.ReadAll(resp.Body)
	if waited := time.Since(start); resp.StatusCode != http.StatusRequestTimeout || waited < 250*time.Millisecond || waited > 300*time.Millisecond+2*deadlineTick+time.Second {
		t.Errorf("answer %d after %v, want 408 after the read timeout of 300ms", resp.StatusCode, waited)
	}
}

// An answer the client does not read is abandoned after the write timeout: the connection
// closes before the whole answer is sent.
func TestWriteTimeoutClosesConnection(t *testing.T) {
	c := dial(t, timeoutServer(t, Config{ReadTimeout: 5 * time.Second, WriteTimeout: 300 * time.Millisecond, IdleTimeout: 5 * time.Second}))
	if _, err := io.WriteString(c, "GET /v1/big HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The answer's first byte: the server is writing (however long it took to build the
	// answer, which under the race detector is long), and its write timeout runs.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("no answer: %v", err)
	}
	time.Sleep(300*time.Millisecond + 5*deadlineTick) // not reading: the server's write blocks
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, c)
	n++ // the first byte
	t.Logf("read %d bytes of the answer, then %v", n, err)
	if n >= bigAnswer {
		t.Fatalf("read the whole answer (%d bytes, %v) after the write timeout", n, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection stayed open after the write timeout: %d bytes, then %v", n, err)
	}
}
