package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
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
