package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/fasthttp/websocket"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/middleware/auth"
	"github.com/web3gate/web3gate/store"
)

// wsClient is a WebSocket client of the tests: a reader goroutine sorts the server's
// messages into answers and notifications.
type wsClient struct {
	conn    *websocket.Conn
	answers chan []byte
	notes   chan wsNote
	done    chan struct{} // closed when the reader ends; err is then its error
	err     error
}

// wsNote is one eth_subscription notification.
type wsNote struct {
	Sub    string          `json:"subscription"`
	Result json.RawMessage `json:"result"`
}

// wsURL is the ws:// URL of path on the test server.
func wsURL(ts *testServer, path string) string {
	return "ws" + strings.TrimPrefix(ts.API, "http") + path
}

// dialWS opens a socket on path with the header (nil: the dev credentials) and the
// subprotocols; it fails the test when the upgrade is refused. The socket is closed when the
// test ends.
func dialWS(t *testing.T, ts *testServer, path string, header http.Header, protocols ...string) (*wsClient, *http.Response) {
	t.Helper()
	conn, resp := dialRaw(t, ts, path, header, protocols...)
	w := &wsClient{conn: conn, answers: make(chan []byte, 64), notes: make(chan wsNote, 4096), done: make(chan struct{})}
	go w.read()
	t.Cleanup(func() { _ = conn.Close(); <-w.done })
	return w, resp
}

// dialRaw is dialWS without the reader goroutine.
func dialRaw(t *testing.T, ts *testServer, path string, header http.Header, protocols ...string) (*websocket.Conn, *http.Response) {
	t.Helper()
	if header == nil {
		header = http.Header{"X-Api-Key": {config.DevClientID}, "Authorization": {"Bearer " + config.DevToken}}
	}
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: protocols}
	conn, resp, err := d.Dial(wsURL(ts, path), header)
	if err != nil {
		t.Fatalf("upgrade %s: %v (%s)", path, err, answerOf(resp))
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn, resp
}

// answerOf is the status and body of a refused upgrade.
func answerOf(resp *http.Response) string {
	if resp == nil {
		return "no answer"
	}
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

func (w *wsClient) read() {
	defer close(w.done)
	for {
		_, b, err := w.conn.ReadMessage()
		if err != nil {
			w.err = err
			return
		}
		var m struct {
			Method string
			Params wsNote
		}
		if json.Unmarshal(b, &m) == nil && m.Method == "eth_subscription" {
			w.notes <- m.Params
			continue
		}
		w.answers <- b
	}
}

// call sends method(params) and returns the answer.
func (w *wsClient) call(t *testing.T, method string, params ...any) rpcResult {
	t.Helper()
	if params == nil {
		params = []any{}
	}
	p, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	return w.send(t, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+string(p)+`}`)
}

// send sends one message and decodes the answer of a single call.
func (w *wsClient) send(t *testing.T, msg string) rpcResult {
	t.Helper()
	var r rpcResult
	if err := json.Unmarshal(w.roundTrip(t, msg), &r); err != nil {
		t.Fatalf("answer to %s: %v", msg, err)
	}
	return r
}

// roundTrip sends one message and returns the next answer.
func (w *wsClient) roundTrip(t *testing.T, msg string) []byte {
	t.Helper()
	if err := w.conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatalf("send %s: %v", msg, err)
	}
	select {
	case b := <-w.answers:
		return b
	case <-w.done:
		t.Fatalf("socket ended before the answer to %s: %v", msg, w.err)
	case <-time.After(30 * time.Second):
		t.Fatalf("no answer to %s within 30s", msg)
	}
	return nil
}

// subscribe makes a subscription and returns its id.
func (w *wsClient) subscribe(t *testing.T, params ...any) string {
	t.Helper()
	r := w.call(t, "eth_subscribe", params...)
	var id string
	if r.Error != nil || json.Unmarshal(r.Result, &id) != nil || len(id) != 34 {
		t.Fatalf("eth_subscribe %v: %+v %s", params, r.Error, r.Result)
	}
	return id
}

// next returns the next notification of sub, skipping other subscriptions'.
func (w *wsClient) next(t *testing.T, sub string) json.RawMessage {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case n := <-w.notes:
			if n.Sub == sub {
				return n.Result
			}
		case <-w.done:
			t.Fatalf("socket ended before a notification of %s: %v", sub, w.err)
		case <-timeout:
			t.Fatalf("no notification of %s within 30s", sub)
		}
	}
}

// closeError waits for the end of the socket and returns the server's close frame.
func (w *wsClient) closeError(t *testing.T) *websocket.CloseError {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatal("socket still open after 30s")
	}
	var ce *websocket.CloseError
	if !errors.As(w.err, &ce) {
		t.Fatalf("socket ended with %v, not a close frame", w.err)
	}
	return ce
}

// wsTx sends eth_sendTransaction over the socket and waits until it is mined; it returns
// the hash and the receipt.
func wsTx(t *testing.T, w *wsClient, tx map[string]string) (common.Hash, wsReceipt) {
	t.Helper()
	r := w.call(t, "eth_sendTransaction", tx)
	var h common.Hash
	if r.Error != nil || json.Unmarshal(r.Result, &h) != nil {
		t.Fatalf("eth_sendTransaction over the socket: %+v %s", r.Error, r.Result)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := w.call(t, "eth_getTransactionReceipt", h)
		var rc wsReceipt
		if r.Error == nil && string(r.Result) != "null" && json.Unmarshal(r.Result, &rc) == nil {
			return h, rc
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not mined within 30s", h.Hex())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type wsReceipt struct {
	BlockNumber     hexutil.Uint64
	BlockHash       common.Hash
	ContractAddress *common.Address
	Status          hexutil.Uint64
}

// logContract's runtime emits LOG1(logTopic) with its calldata as the log's data. Its
// creation code returns the runtime (44 bytes) from offset 11.
const (
	logTopic    = "0x1111111111111111111111111111111111111111111111111111111111111111"
	logContract = "0x602c80600b6000396000f3" + "3660006000377f" + "1111111111111111111111111111111111111111111111111111111111111111" + "366000a100"
)

// deployLogContract deploys logContract from dev account 3 and returns its address.
func deployLogContract(t *testing.T, w *wsClient) common.Address {
	t.Helper()
	_, rc := wsTx(t, w, map[string]string{"from": devAccount3.Hex(), "data": logContract, "gas": "0x30000"})
	if rc.Status != 1 || rc.ContractAddress == nil {
		t.Fatalf("deploy: %+v", rc)
	}
	return *rc.ContractAddress
}

// TestWebSocketJSONRPC: JSON-RPC over a socket answers as over HTTP, single and batch,
// eth_sendTransaction included (signed for the socket's principal).
func TestWebSocketJSONRPC(t *testing.T) {
	ts := startServer(t, devConfig(t))
	w, _ := dialWS(t, ts, "/v1/web3/mainnet", nil)
	if r := w.call(t, "eth_blockNumber"); r.Error != nil || !strings.HasPrefix(string(r.Result), `"0x`) {
		t.Fatalf("eth_blockNumber: %+v %s", r.Error, r.Result)
	}
	batch := w.roundTrip(t, `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"net_version"},{"jsonrpc":"2.0","id":3,"method":"eth_nope"}]`)
	want := `[{"jsonrpc":"2.0","id":1,"result":"0x539"},{"jsonrpc":"2.0","id":2,"result":"1337"},{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"the method eth_nope does not exist/is not available"}}]`
	if string(batch) != want {
		t.Fatalf("batch:\n got %s\nwant %s", batch, want)
	}
	// The server's maxBatch (5 in the test config) holds.
	if b := w.roundTrip(t, "["+strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},`, 5)+`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}]`); !strings.Contains(string(b), "batch exceeds the limit of 5 requests") {
		t.Fatalf("batch of 6: %s", b)
	}
	h, rc := wsTx(t, w, transfer(devAccount3, 7))
	if rc.Status != 1 {
		t.Fatalf("receipt %+v", rc)
	}
	// The chain agrees, over HTTP.
	if r := rpcCall(t, http.DefaultClient, ts.API+"/v1/web3/mainnet", "eth_getTransactionByHash", []any{h}); r.Error != nil || !strings.Contains(strings.ToLower(string(r.Result)), strings.ToLower(devAccount3.Hex())) {
		t.Fatalf("eth_getTransactionByHash over HTTP: %+v %s", r.Error, r.Result)
	}
	// Subscriptions are for sockets: over HTTP geth's answer.
	r := rpcCall(t, http.DefaultClient, ts.API+"/v1/web3/mainnet", "eth_subscribe", []any{"newHeads"})
	if r.Status != 200 || r.Error == nil || r.Error.Code != -32601 || r.Error.Message != "notifications not supported" {
		t.Fatalf("eth_subscribe over HTTP: %d %+v", r.Status, r.Error)
	}
}

// TestWebSocketNewHeads: a newHeads subscription gets the header of each mined block.
func TestWebSocketNewHeads(t *testing.T) {
	ts := startServer(t, devConfig(t))
	w, _ := dialWS(t, ts, "/v1/web3/chains/1337", nil)
	sub := w.subscribe(t, "newHeads")
	_, rc := wsTx(t, w, transfer(devAccount3, 1))
	for {
		var head struct {
			Number       hexutil.Uint64
			Hash         common.Hash
			ParentHash   common.Hash
			Transactions json.RawMessage
		}
		raw := w.next(t, sub)
		if err := json.Unmarshal(raw, &head); err != nil {
			t.Fatalf("header %s: %v", raw, err)
		}
		if head.Transactions != nil {
			t.Fatalf("a newHeads header has transactions: %s", raw)
		}
		if head.Number < rc.BlockNumber {
			continue
		}
		if head.Number != rc.BlockNumber || head.Hash != rc.BlockHash {
			t.Fatalf("head %d %s, the transaction's block is %d %s", head.Number, head.Hash, rc.BlockNumber, rc.BlockHash)
		}
		break
	}
	if r := w.call(t, "eth_unsubscribe", sub); string(r.Result) != "true" {
		t.Fatalf("eth_unsubscribe: %+v %s", r.Error, r.Result)
	}
}

// TestWebSocketLogs: a logs subscription gets the matching logs of mined blocks, as the node
// returns them.
func TestWebSocketLogs(t *testing.T) {
	ts := startServer(t, devConfig(t))
	w, _ := dialWS(t, ts, "/v1/web3/mainnet", nil)
	contract := deployLogContract(t, w)
	sub := w.subscribe(t, "logs", map[string]any{"address": contract, "topics": []any{logTopic}})
	h, rc := wsTx(t, w, map[string]string{"from": devAccount3.Hex(), "to": contract.Hex(), "data": "0xc0ffee", "gas": "0x20000"})
	var lg struct {
		Address         common.Address
		Topics          []common.Hash
		Data            hexutil.Bytes
		BlockNumber     hexutil.Uint64
		TransactionHash common.Hash
		Removed         bool
	}
	raw := w.next(t, sub)
	if err := json.Unmarshal(raw, &lg); err != nil {
		t.Fatalf("log %s: %v", raw, err)
	}
	if lg.Address != contract || len(lg.Topics) != 1 || lg.Topics[0] != common.HexToHash(logTopic) || hexutil.Encode(lg.Data) != "0xc0ffee" ||
		lg.TransactionHash != h || lg.BlockNumber != rc.BlockNumber || lg.Removed || !strings.Contains(string(raw), `"removed":false`) {
		t.Fatalf("log %s, tx %s in block %d", raw, h.Hex(), rc.BlockNumber)
	}
	// A block range geth refuses is refused (toBlock before fromBlock), as is a pending one.
	if r := w.call(t, "eth_subscribe", "logs", map[string]any{"fromBlock": "0x5", "toBlock": "0x1"}); r.Error == nil || r.Error.Code != -32602 || r.Error.Message != "invalid block range params" {
		t.Fatalf("logs from block 5 to 1: %+v %s", r.Error, r.Result)
	}
	if r := w.call(t, "eth_subscribe", "newPendingTransactions"); r.Error == nil || r.Error.Code != -32601 || !strings.HasPrefix(r.Error.Message, "newPendingTransactions is not offered on this chain") {
		t.Fatalf("newPendingTransactions: %+v", r.Error)
	}
	if r := w.call(t, "eth_subscribe", "blocks"); r.Error == nil || r.Error.Code != -32601 || r.Error.Message != `no "blocks" subscription in eth namespace` {
		t.Fatalf("unknown kind: %+v", r.Error)
	}
	// A filter over server.websocket.logsCriteria's default bounds is refused: 1000
	// addresses (geth's own limit) times 100 topics.
	addrs := make([]string, 1000)
	for i := range addrs {
		addrs[i] = common.BigToAddress(big.NewInt(int64(i + 1))).Hex()
	}
	topics := make([]string, 100)
	for i := range topics {
		topics[i] = common.BigToHash(big.NewInt(int64(i + 1))).Hex()
	}
	if r := w.call(t, "eth_subscribe", "logs", map[string]any{"address": addrs, "topics": []any{topics}}); r.Error == nil || r.Error.Code != -32602 ||
		r.Error.Message != "filter too large: 1000 addresses × 100 topics is 100000, the most this server takes is 10000 (server.websocket.logsCriteria.maxProduct)" {
		t.Fatalf("an oversize filter: %+v %s", r.Error, r.Result)
	}
}

// TestWebSocketAuthAtUpgrade: the upgrade is authenticated as a POST is; a refusal is the
// POST's answer, and no socket.
func TestWebSocketAuthAtUpgrade(t *testing.T) {
	ts := startServer(t, devConfig(t))
	for _, tc := range []struct {
		name      string
		header    http.Header
		protocols []string
		status    int
		message   string
	}{
		{"no client id", http.Header{"Authorization": {"Bearer " + config.DevToken}}, nil, 401, "Not Authorized: a client id is required"},
		{"unknown client id", http.Header{"X-Api-Key": {"nobody"}, "Authorization": {"Bearer " + config.DevToken}}, nil, 401, "Not Authorized: unknown client id"},
		{"no token", http.Header{"X-Api-Key": {config.DevClientID}}, nil, 401, "Not Authorized: a bearer access token is required"},
		{"bad token", http.Header{"X-Api-Key": {config.DevClientID}, "Authorization": {"Bearer wrong"}}, nil, 401, "Not Authorized: invalid access token"},
		{"bad token as subprotocol", http.Header{"X-Api-Key": {config.DevClientID}}, []string{"web3gate", "bearer.wrong"}, 401, "Not Authorized: invalid access token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: tc.protocols}
			c, resp, err := d.Dial(wsURL(ts, "/v1/web3/mainnet"), tc.header)
			if err == nil {
				c.Close()
				t.Fatal("upgraded")
			}
			if resp == nil {
				t.Fatalf("no answer: %v", err)
			}
			var r rpcResult
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || json.Unmarshal(b, &r) != nil || r.Error == nil || r.Error.Code != 4100 || !strings.HasPrefix(r.Error.Message, tc.message) {
				t.Fatalf("%d %s, want %d %q", resp.StatusCode, b, tc.status, tc.message)
			}
		})
	}
}

// TestWebSocketBearerSubprotocol: a browser offers its token as a subprotocol; the server
// selects web3gate, and the socket acts for the token's principal (it signs).
func TestWebSocketBearerSubprotocol(t *testing.T) {
	ts := startServer(t, devConfig(t))
	w, resp := dialWS(t, ts, "/v1/web3/mainnet/"+config.DevClientID, http.Header{}, "web3gate", "bearer."+config.DevToken)
	if got := resp.Header.Values("Sec-WebSocket-Protocol"); len(got) != 1 || got[0] != "web3gate" {
		t.Fatalf("selected %q", got)
	}
	if _, rc := wsTx(t, w, transfer(devAccount3, 3)); rc.Status != 1 {
		t.Fatalf("receipt %+v", rc)
	}
}

// TestWebSocketTokenExpiry: a socket opened with a token closes (1008) when the token
// expires.
func TestWebSocketTokenExpiry(t *testing.T) {
	dir := t.TempDir()
	cfgText := devConfig(t)
	ts := startServerIn(t, cfgText, dir, io.Discard)
	token := shortToken(t, cfgText, dir, 2*time.Second)
	w, _ := dialWS(t, ts, "/v1/web3/mainnet", http.Header{"X-Api-Key": {config.DevClientID}}, "web3gate", "bearer."+token)
	if r := w.call(t, "eth_accounts"); r.Error != nil {
		t.Fatalf("eth_accounts with the short token: %+v", r.Error)
	}
	if ce := w.closeError(t); ce.Code != websocket.ClosePolicyViolation || ce.Text != "access token expired" {
		t.Fatalf("close %d %q", ce.Code, ce.Text)
	}
}

// shortToken issues a web3gate access token for the dev principal that expires within ttl,
// signed with the server's key, for an OAuth client stored for it.
func shortToken(t *testing.T, cfgText, dir string, ttl time.Duration) string {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	setTestStore(t, &cfg.Store, dir)
	db, err := store.Open(context.Background(), cfg.Store, store.Deps{Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clientID, _, err := auth.CreateClient(context.Background(), db, "dev", []string{auth.ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	key, err := auth.LoadOrCreateSigningKey(filepath.Join(dir, "jwt-signing-key.pem"), nil)
	if err != nil {
		t.Fatal(err)
	}
	oc := cfg.Auth.OAuth
	oc.TokenTTL = ttl
	iss, err := auth.NewIssuer(oc, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := iss.Issue("dev", clientID, []string{auth.ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// TestWebSocketLimits: subscriptions per socket (-32005), sockets per client id (429),
// message size (1009).
func TestWebSocketLimits(t *testing.T) {
	cfg := devConfig(t)
	for old, v := range map[string]string{"maxConnsPerClient: 100": "maxConnsPerClient: 2", "maxSubscriptionsPerConn: 100": "maxSubscriptionsPerConn: 2", "maxMessageBytes: 1048576": "maxMessageBytes: 2048"} {
		if !strings.Contains(cfg, old) {
			t.Fatalf("config.yaml: %q not found", old)
		}
		cfg = strings.Replace(cfg, old, v, 1)
	}
	ts := startServer(t, cfg)
	w, _ := dialWS(t, ts, "/v1/web3/mainnet", nil)
	w.subscribe(t, "syncing")
	w.subscribe(t, "syncing")
	r := w.call(t, "eth_subscribe", "syncing")
	if r.Error == nil || r.Error.Code != -32005 || !strings.Contains(r.Error.Message, "server.websocket.maxSubscriptionsPerConn") {
		t.Fatalf("third subscription: %+v %s", r.Error, r.Result)
	}

	dialRaw(t, ts, "/v1/web3/mainnet", nil)
	_, resp, err := websocket.DefaultDialer.Dial(wsURL(ts, "/v1/web3/mainnet"), http.Header{"X-Api-Key": {config.DevClientID}, "Authorization": {"Bearer " + config.DevToken}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third socket of the client: %v %s", err, answerOf(resp))
	}
	if b := answerOf(resp); !strings.Contains(b, `"code":-32005`) || !strings.Contains(b, "server.websocket.maxConnsPerClient") {
		t.Fatalf("429 body %s", b)
	}

	if err := w.conn.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":["`+strings.Repeat("a", 2048)+`"]}`)); err != nil {
		t.Fatal(err)
	}
	if ce := w.closeError(t); ce.Code != websocket.CloseMessageTooBig || ce.Text != "message exceeds server.websocket.maxMessageBytes (2048 bytes)" {
		t.Fatalf("close %d %q", ce.Code, ce.Text)
	}
}

// TestWebSocketSyncing: a syncing subscription's one notification is false (geth's when in
// sync), after its answer.
func TestWebSocketSyncing(t *testing.T) {
	ts := startServer(t, devConfig(t))
	w, _ := dialWS(t, ts, "/v1/web3/mainnet", nil)
	sub := w.subscribe(t, "syncing")
	if got := w.next(t, sub); string(got) != "false" {
		t.Fatalf("syncing notification %s", got)
	}
}

// TestWebSocketSlowConsumer: a client that stops reading while its logs pile up is closed
// (1008) once its queue is full; another client's newHeads go on.
func TestWebSocketSlowConsumer(t *testing.T) {
	cfg := strings.Replace(deploymentConfig(t), "queueSize: 1024", "queueSize: 16", 1)
	ts := startServer(t, cfg)
	w, _ := dialWS(t, ts, "/v1/web3/mainnet", nil)
	contract := deployLogContract(t, w)
	heads := w.subscribe(t, "newHeads")

	// The slow client's socket has a small receive buffer, so that the server's writes block
	// after a few hundred kilobytes rather than megabytes.
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, NetDial: func(network, addr string) (net.Conn, error) {
		nd := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = setRcvBuf(fd, 8192) })
			return errors.Join(err, serr)
		}}
		return nd.Dial(network, addr)
	}}
	slow, resp, err := d.Dial(wsURL(ts, "/v1/web3/mainnet"), http.Header{"X-Api-Key": {config.DevClientID}, "Authorization": {"Bearer " + config.DevToken}})
	if err != nil {
		t.Fatalf("slow client: %v %s", err, answerOf(resp))
	}
	defer slow.Close()
	for i := range 8 {
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_subscribe","params":["logs",{"address":"%s"}]}`, i, contract.Hex())
		if err := slow.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		if _, b, err := slow.ReadMessage(); err != nil || !strings.Contains(string(b), `"result":"0x`) {
			t.Fatalf("slow client's subscription %d: %s %v", i, b, err)
		}
	}
	// The slow client reads no more. Each block: 8 notifications of a 64 KiB log (128 KiB of
	// hex each), until the server gives up on it.
	data := "0x" + strings.Repeat("ab", 64<<10)
	for i := 0; ; i++ {
		if i == 40 {
			t.Fatal("the slow client was not dropped after 40 blocks")
		}
		_, rc := wsTx(t, w, map[string]string{"from": devAccount3.Hex(), "to": contract.Hex(), "data": data, "gas": "0x300000"})
		// The other client goes on receiving heads meanwhile.
		for {
			var head struct{ Number hexutil.Uint64 }
			if err := json.Unmarshal(w.next(t, heads), &head); err != nil || head.Number >= rc.BlockNumber {
				break
			}
		}
		if _, body := get(t, ts.Admin+"/metrics"); strings.Contains(body, `web3gate_websocket_dropped_total{reason="slow_consumer"} 1`) {
			t.Logf("the slow client was dropped after %d blocks", i+1)
			break
		}
	}
	// Reading again, the slow client gets what was on its way, then the close frame.
	_ = slow.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		_, _, err := slow.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || ce.Text != "slow consumer: outbound queue full (server.websocket.queueSize)" {
			t.Fatalf("slow client ended with %v", err)
		}
		break
	}
	// The other client still gets the next block's head.
	_, rc := wsTx(t, w, transfer(devAccount3, 1))
	for {
		var head struct{ Number hexutil.Uint64 }
		if err := json.Unmarshal(w.next(t, heads), &head); err != nil {
			t.Fatal(err)
		}
		if head.Number == rc.BlockNumber {
			break
		}
	}
}

// TestWebSocketShutdown: stopping the server closes its sockets with 1001.
func TestWebSocketShutdown(t *testing.T) {
	ts := startServer(t, devConfig(t))
	var ws []*wsClient
	for range 3 {
		w, _ := dialWS(t, ts, "/v1/web3/mainnet", nil)
		w.subscribe(t, "newHeads")
		ws = append(ws, w)
	}
	var wg sync.WaitGroup
	wg.Go(ts.stop)
	for i, w := range ws {
		if ce := w.closeError(t); ce.Code != websocket.CloseGoingAway || ce.Text != "server shutting down" {
			t.Fatalf("socket %d: close %d %q", i, ce.Code, ce.Text)
		}
	}
	wg.Wait()
}
