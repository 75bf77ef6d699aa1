package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// getLogsConfig is upstreamConfig's chain 1 with eth_getLogs limits of 50 blocks, in chunks
// of 10.
func getLogsConfig(url string) string {
	return strings.Replace(upstreamConfig("", url), "  chains:\n",
		"  getLogs: {maxRange: 50, chunkSize: 10, concurrency: 2}\n  chains:\n", 1)
}

// TestGetLogsOverHTTP: through the whole server, a range over getLogs.maxRange gets -32005
// naming both sizes with HTTP 200 and no upstream call, and a range of several chunks is
// fetched chunk by chunk and answered as one array.
func TestGetLogsOverHTTP(t *testing.T) {
	up := newFakeUpstream(t, 1) // head 0x64
	up.result("eth_getLogs", `[{"logIndex":"0x0"}]`)
	ts := startServer(t, getLogsConfig(up.srv.URL))
	url := ts.API + "/v1/web3/mainnet"

	for _, tc := range []struct {
		name, params string
		want         string
	}{
		{"to latest", `[{"fromBlock":"0x0","toBlock":"latest"}]`,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"block range too large: 101 blocks, at most 50"}}`},
		{"numbers", `[{"fromBlock":"0x10","toBlock":"0x1000"}]`,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"block range too large: 4081 blocks, at most 50"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := post(t, url, `{"jsonrpc":"2.0","id":7,"method":"eth_getLogs","params":`+tc.params+`}`)
			if code != http.StatusOK || string(body) != tc.want {
				t.Errorf("%d %s\nwant 200 %s", code, body, tc.want)
			}
		})
	}
	if n := up.count("eth_getLogs"); n != 0 {
		t.Fatalf("the node got %d eth_getLogs for refused ranges", n)
	}

	code, _, body := post(t, url, `{"jsonrpc":"2.0","id":7,"method":"eth_getLogs","params":[{"fromBlock":"0x0","toBlock":"0x31"}]}`)
	one := `{"logIndex":"0x0"}`
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"result":[%s,%s,%s,%s,%s]}`, one, one, one, one, one)
	if code != http.StatusOK || string(body) != want {
		t.Errorf("%d %s\nwant 200 %s", code, body, want)
	}
	if n := up.count("eth_getLogs"); n != 5 {
		t.Errorf("the node got %d eth_getLogs, want 5 chunks of 10 blocks", n)
	}
}

// TestHedgedReadsOverHTTP: through the whole server, a chain of two nodes where the preferred
// one (its polls answer at once, the other's take 30 ms) holds eth_getBalance for 300 ms:
// every read is hedged to the other node after maxDelay (50 ms, the slow node having no
// answered read to estimate from) and gets its answer; each node sees every read once;
// eth_sendRawTransaction is never hedged.
func TestHedgedReadsOverHTTP(t *testing.T) {
	slow, fast := newFakeUpstream(t, 1), newFakeUpstream(t, 1)
	slow.routes["eth_getBalance"] = func(w http.ResponseWriter, id json.RawMessage) {
		time.Sleep(300 * time.Millisecond)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":"0xa"}`, id)
	}
	slow.routes["eth_sendRawTransaction"] = func(w http.ResponseWriter, id json.RawMessage) {
		time.Sleep(100 * time.Millisecond)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"nonce too low"}}`, id)
	}
	fast.result("eth_getBalance", `"0xb"`)
	fast.result("eth_sendRawTransaction", `"0x01"`)
	fast.routes["eth_blockNumber"] = func(w http.ResponseWriter, id json.RawMessage) {
		time.Sleep(30 * time.Millisecond)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":"0x64"}`, id)
	}
	cfg := strings.Replace(upstreamConfig("", slow.srv.URL, fast.srv.URL), "  chains:\n",
		"  hedge: {enabled: true, minDelay: 10ms, maxDelay: 50ms, maxExtra: 1}\n  chains:\n", 1)
	ts := startServer(t, cfg)
	url := ts.API + "/v1/web3/mainnet"

	const reads = 5
	for i := range reads {
		code, _, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","latest"]}`)
		if want := `{"jsonrpc":"2.0","id":1,"result":"0xb"}`; code != 200 || string(body) != want {
			t.Fatalf("read %d: %d %s, want the fast node's %s", i, code, body, want)
		}
	}
	if a, b := slow.count("eth_getBalance"), fast.count("eth_getBalance"); a != reads || b != reads {
		t.Errorf("the slow node got %d reads, the fast one %d; want %d each (every read hedged)", a, b, reads)
	}
	code, _, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x00"]}`)
	if want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"nonce too low"}}`; code != 200 || string(body) != want {
		t.Errorf("eth_sendRawTransaction: %d %s, want the preferred node's %s", code, body, want)
	}
	if n := fast.count("eth_sendRawTransaction"); n != 0 {
		t.Errorf("eth_sendRawTransaction reached the second node %d times", n)
	}
	_, metrics := get(t, ts.Admin+"/metrics")
	if want := fmt.Sprintf(`web3gate_upstream_hedges_total{chain="one",outcome="won"} %d`, reads); !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %s", want)
	}
}
