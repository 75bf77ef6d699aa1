// WebSockets: the Socket interfaces, and the upgrade (its checks, its authentication, its handover).

package proxy

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// WebSocket. Every JSON-RPC route also answers GET with Upgrade: websocket (server.websocket
// enabled). The upgrade is authenticated as a POST is: the client id of the X-API-Key header
// or of the URL (the route's {client_id} segment, the apiKey query parameter), and a bearer
// token from the Authorization header or, for browsers, which cannot set headers on a
// WebSocket, offered as the subprotocol "bearer.<token>" beside "web3gate" (the server
// selects "web3gate" and never echoes the token). A refused upgrade gets the HTTP answer a
// POST would (401 with the JSON-RPC error body, 404 for an unknown chain, 429 over
// maxConnsPerPrincipal, maxConnsPerAddress or maxConnsPerClient), and no socket.
//
// Each text message of a socket is a JSON-RPC body, single or batch, parsed with the same
// parser and limits as a POST body and served through the route's compiled chain, with an
// exchange that carries the upgrade's credentials (verified again for each message, as for
// each POST) and the socket (Exchange.Socket), through which the subscribe stage registers
// subscriptions. A message's answer is one text message (a batch's answers in one array, in
// order); messages are served concurrently (up to server.batchConcurrency of one socket at
// once), so the answers of different messages may come in any order, as geth's do.
//
// Memory: an idle socket holds its reader goroutine, a small read buffer (wsReadBuffer) and
// its state; no writer goroutine and no write buffer. A writer goroutine runs only while the
// socket has messages queued, and builds their frames in a buffer it takes from a pool for
// each wake-up (frames.go).
//
// fasthttp does not track the connections it hands over (hijacks): the server keeps its
// sockets (socketSet) and Shutdown closes them (1001). A hijacked connection is still the
// listener's watchedConn, so server.maxConns and server.maxConnsPerIP count it until it is
// closed; the HTTP timeouts no longer hold on it (watchedConn.socket), the socket's own do.

// Socket is the WebSocket connection an exchange came on (Exchange.Socket; nil over HTTP).
// The subscribe stage registers its subscriptions through it.
type Socket interface {
	// Subscribe registers a subscription of kind (a metric label: "newHeads", "logs",
	// "syncing") made by the call c. The subscription is pending until the answer to c's
	// message is queued: its notifications meanwhile are held and queued after that answer.
	// Over server.websocket.maxSubscriptionsPerConn it returns a -32005 error.
	Subscribe(c *Call, kind string) (Subscription, error)
	// Unsubscribe ends the socket's subscription id and reports whether the socket had it.
	Unsubscribe(id string) bool
}

// Subscription is one subscription of a socket.
type Subscription interface {
	// ID is the subscription's id: "0x" and 32 hex digits.
	ID() string
	// Notify queues the notification {"jsonrpc":"2.0","method":"eth_subscription",
	// "params":{"subscription":ID,"result":result}} without blocking. result is a JSON value
	// kept until written: it is shared, never modified. A socket whose queue is full is
	// closed (slow consumer); a subscription that ended ignores Notify.
	Notify(result []byte)
	// NotifyAll queues the notifications of results, in order, as Notify would queue each
	// (the socket is closed when they do not all fit in its queue); results is not kept.
	NotifyAll(results [][]byte)
	// OnEnd makes stop run once when the subscription ends (Unsubscribe, or its socket's
	// close), at once when it has ended already.
	OnEnd(stop func())
}

// Subprotocol is the WebSocket subprotocol the server selects when a client offers it: the
// one a client offers beside "bearer.<token>".
const Subprotocol = "web3gate"

// bearerProtocol is the prefix of a bearer token offered as a subprotocol.
const bearerProtocol = "bearer."

// The sizes of a socket's buffers. The read buffer holds the frame headers and small
// messages (gorilla's minimum is a control frame's 125 bytes); a longer message is read past
// it into the message's own buffer. websocket.Conn's write buffer (pooled) is for its own
// messages, which the server does not send: the sockets' writers build their frames
// themselves (frames.go), and control frames are written whole without it.
const (
	wsReadBuffer  = 512
	wsWriteBuffer = 2048
)

// wsBufferPool is the pool of the sockets' write buffers (websocket.BufferPool).
type wsBufferPool struct{ p sync.Pool }

func (b *wsBufferPool) Get() any  { return b.p.Get() }
func (b *wsBufferPool) Put(v any) { b.p.Put(v) }

// upgrade is what a socket keeps of its upgrade request: copies, nothing of fasthttp's.
type upgrade struct {
	route   *Route
	chainID uint64
	reqID   string
	hdr     reqHeaders  // the credentials each message's exchange is made of (owned copies)
	owner   socketOwner // whom the socket is counted against: its client id, principal, address
	expires time.Time
	key     string // Sec-WebSocket-Key
	proto   bool   // the client offered Subprotocol
}

// serveUpgrade answers a GET with Upgrade: websocket on an RPC route: the checks and the
// authentication of the upgrade, then the handover of the connection to startSocket. A
// refusal is the HTTP answer a POST would get.
func (s *Server) serveUpgrade(ctx *fasthttp.RequestCtx, rec *reqRecord, route *Route, params Params, reqID []byte, hdr *reqHeaders, start time.Time) {
	chainID, cerr := s.routeChain(route, params)
	if cerr != nil {
		s.writeRPCError(ctx, rec, route, nil, cerr, start)
		return
	}
	if len(hdr.origin) > 0 && !s.cors.allows(hdr.origin) {
		s.writeRPCError(ctx, rec, route, nil, errOriginRefused, start)
		return
	}
	h := &ctx.Request.Header
	if !headerHasToken(h.Peek("Sec-WebSocket-Version"), "13") {
		ctx.Response.Header.Set("Sec-WebSocket-Version", "13")
		s.writeRPCError(ctx, rec, route, nil, errWebSocketVersion, start)
		return
	}
	key := h.Peek("Sec-WebSocket-Key")
	if k, err := base64.StdEncoding.DecodeString(string(key)); err != nil || len(k) != 16 {
		s.writeRPCError(ctx, rec, route, nil, errWebSocketKey, start)
		return
	}
	proto, bearer, err := offeredProtocols(h.Peek("Sec-WebSocket-Protocol"))
	if err != nil {
		s.writeRPCError(ctx, rec, route, nil, err, start)
		return
	}
	hdr.readURL(ctx, params)
	if bearer != nil {
		if len(hdr.authorization) > 0 {
			if tok, ok := bearerToken(hdr.authorization); !ok || !bytes.Equal(tok, bearer) {
				s.writeRPCError(ctx, rec, route, nil, errTwoBearers, start)
				return
			}
		}
		hdr.authorization = append([]byte("Bearer "), bearer...)
	}
	ex, _ := newExchange(nil, false, reqID, hdr, start)
	var p Principal
	if s.verifier != nil {
		err := s.verifier.VerifyExchange(ex, &p)
		rec.client, rec.principal = p.ClientID, p.ID
		if err != nil {
			s.writeRPCError(ctx, rec, route, nil, s.wireError(err, ex, ""), start)
			return
		}
		if !p.Expires.IsZero() && !start.Before(p.Expires) {
			s.writeRPCError(ctx, rec, route, nil, errTokenExpired, start)
			return
		}
	}
	owner := socketOwner{client: ex.ClientID, principal: p.ID, addr: s.sourceAddr(ctx)}
	if e := s.ws.admit(owner, false); e != nil {
		if e.Status() != http.StatusForbidden {
			ctx.Response.Header.Set("Retry-After", "1")
		}
		s.writeRPCError(ctx, rec, route, nil, e, start)
		return
	}
	up := &upgrade{
		route:   route,
		chainID: chainID,
		reqID:   string(reqID),
		owner:   owner,
		expires: p.Expires,
		key:     string(key),
		proto:   proto,
		hdr: reqHeaders{
			clientID:         []byte(ex.ClientID),
			authorization:    bytes.Clone(hdr.authorization),
			clientIDConflict: hdr.clientIDConflict,
		},
	}
	// fasthttp answers nothing: the upgrader writes the 101 on the connection it is handed.
	rec.upgrade = true
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) { s.startSocket(c, up) })
}

// sourceAddr is the address a request came from: the TCP peer's, or, when the peer is one of
// server.trustedProxies, the one X-Forwarded-For names (ForwardedFor).
func (s *Server) sourceAddr(ctx *fasthttp.RequestCtx) netip.Addr {
	peer := peerAddr(ctx.RemoteAddr())
	if len(s.trusted) == 0 {
		return peer
	}
	return ForwardedFor(peer, s.trusted, ctx.Request.Header.PeekAll("X-Forwarded-For"))
}

// offeredProtocols reads a Sec-WebSocket-Protocol header: whether Subprotocol is offered,
// and the bearer token offered as "bearer.<token>" (nil: none). A token offered without
// Subprotocol could not be answered (the server selects one of the offered protocols, and
// never the token), so it is refused.
func offeredProtocols(v []byte) (web3gate bool, bearer []byte, _ *jsonrpc.Error) {
	for len(v) > 0 {
		var p []byte
		p, v, _ = bytes.Cut(v, []byte(","))
		p = bytes.TrimSpace(p)
		switch {
		case string(p) == Subprotocol:
			web3gate = true
		case len(p) > len(bearerProtocol) && string(p[:len(bearerProtocol)]) == bearerProtocol:
			if bearer != nil {
				return false, nil, errTwoBearers
			}
			bearer = p[len(bearerProtocol):]
		}
	}
	if bearer != nil && !web3gate {
		return false, nil, errBearerAlone
	}
	return web3gate, bearer, nil
}

// headerHasToken reports whether the comma-separated header value v holds token (case
// insensitive).
func headerHasToken(v []byte, token string) bool {
	for len(v) > 0 {
		var p []byte
		p, v, _ = bytes.Cut(v, []byte(","))
		if bytes.EqualFold(bytes.TrimSpace(p), []byte(token)) {
			return true
		}
	}
	return false
}

// The refusals of an upgrade.
var (
	errOriginRefused = func() *jsonrpc.Error {
		e := jsonrpc.ErrInvalidRequest.With("WebSocket refused: the page's Origin is not in server.cors.allowedOrigins")
		e.HTTPStatus = http.StatusForbidden
		return e
	}()
	errWebSocketVersion = func() *jsonrpc.Error {
		e := jsonrpc.ErrInvalidRequest.With("WebSocket refused: Sec-WebSocket-Version must be 13")
		e.HTTPStatus = http.StatusUpgradeRequired
		return e
	}()
	errWebSocketKey = jsonrpc.ErrInvalidRequest.With("WebSocket refused: Sec-WebSocket-Key must be 16 bytes in base64")
	errBearerAlone  = jsonrpc.ErrInvalidRequest.With("WebSocket refused: a bearer token subprotocol must be offered beside the web3gate subprotocol (Sec-WebSocket-Protocol: web3gate, bearer.TOKEN)")
	errTwoBearers   = jsonrpc.ErrUnauthorized.With("Not Authorized: the upgrade carries two different bearer tokens (Authorization header, Sec-WebSocket-Protocol)")
	errTokenExpired = jsonrpc.ErrUnauthorized.With("Not Authorized: access token expired")
)

// startSocket takes over a hijacked connection: it completes the upgrade (the 101) and
// starts the socket's reader. hc is fasthttp's wrapper of the listener's connection; its
// buffered reader (server.maxHeaderBytes large) is drained and dropped, so that an idle
// socket does not keep it.
func (s *Server) startSocket(hc net.Conn, up *upgrade) {
	conn := hc
	var pre []byte
	if u, ok := hc.(interface{ UnsafeConn() net.Conn }); ok {
		if wc, ok := u.UnsafeConn().(*watchedConn); ok {
			wc.socket = true
			pre = drainHijacked(hc, wc)
			conn = wc
		}
	}
	if e := s.ws.admit(up.owner, true); e != nil {
		refuse(conn, e, up.reqID)
		return
	}
	br := bufio.NewReaderSize(bytes.NewReader(pre), max(len(pre), 16))
	if len(pre) > 0 {
		_, _ = br.Peek(len(pre)) // buffered: the upgrader reads them first
	}
	bc := &batchConn{Conn: conn}
	if wc, ok := conn.(*watchedConn); ok {
		if t, ok := wc.Conn.(interface{ TryWrite([]byte) (int, error) }); ok {
			bc.try = t.TryWrite
		}
	}
	w := &hijackWriter{conn: bc, brw: bufio.NewReadWriter(br, bufio.NewWriterSize(bc, 16))}
	req := &http.Request{Method: http.MethodGet, Header: http.Header{
		"Connection":            {"Upgrade"},
		"Upgrade":               {"websocket"},
		"Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key":     {up.key},
	}}
	if up.proto {
		req.Header["Sec-Websocket-Protocol"] = []string{Subprotocol}
	}
	wsc, err := s.ws.upgrader.Upgrade(w, req, http.Header{"X-Request-Id": {up.reqID}})
	if err != nil {
		// The upgrader closed the connection; its checks were made before the hijack, so
		// only the write of the 101 fails here.
		s.ws.release(up.owner)
		return
	}
	k := newSocket(s, wsc, bc, up)
	s.ws.attach(k)
	go k.run()
}

// drainHijacked returns the bytes that fasthttp read past the upgrade request (a client must
// not send any before the 101; a few do), reading hc's buffer with a deadline in the past on
// the connection itself, so that nothing more is read from it.
func drainHijacked(hc net.Conn, wc *watchedConn) []byte {
	_ = wc.Conn.SetReadDeadline(aLongTimeAgo)
	var pre []byte
	var b [512]byte
	for {
		n, err := hc.Read(b[:])
		pre = append(pre, b[:n]...)
		if err != nil || n == 0 {
			break
		}
	}
	_ = wc.Conn.SetReadDeadline(time.Time{})
	return pre
}

// refuse answers a hijacked connection with e, whole, and closes it.
func refuse(c net.Conn, e *jsonrpc.Error, reqID string) {
	body := jsonrpc.AppendResponse(nil, nil, nil, e)
	status := e.Status()
	answer := fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nServer: web3gate\r\nX-Request-Id: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), reqID, len(body), body)
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(answer)
	_ = c.Close()
}

// hijackWriter hands a hijacked connection to websocket.Upgrader, which writes the 101 on it.
// The upgrader's own refusals are not sent: its checks were made before the hijack.
type hijackWriter struct {
	conn net.Conn
	brw  *bufio.ReadWriter
	h    http.Header
}

func (w *hijackWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}

func (w *hijackWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *hijackWriter) WriteHeader(int)             {}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.conn, w.brw, nil }
