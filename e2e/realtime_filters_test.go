package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	gethrpc "github.com/ethereum/go-ethereum/rpc"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/testengine"
)

// TestRealtimeFilterOwnership runs two replicas on one PostgreSQL database and checks whose a
// filter is, through the binary: a filter belongs to the principal of the token that made it
// (any of its client ids, on any replica: the state is in the store), or, made with a client
// id alone, to that client id. Anyone else polling, reading the logs of or uninstalling it is
// answered -32000 "filter not found" (false for eth_uninstallFilter, as geth answers an
// unknown id), and it stays intact. A poll on one replica advances the cursor the other
// replica's next poll starts from.
func TestRealtimeFilterOwnership(t *testing.T) {
	node := anvil.Start(t, realtimeChainID)
	dsn := testengine.Postgres(t)
	replica := func(r int) *gateway {
		g := startGateway(t, realtimeConfig(fmt.Sprintf(`
store:
  driver: postgres
  dsn: %s
cluster: {replicaId: r%d}
`, dsn, r), node.URL))
		waitReady(t, g)
		return g
	}
	g1, g2 := replica(0), replica(1)
	url1, url2 := g1.API+"/v1/web3/mainnet", g2.API+"/v1/web3/mainnet"

	var (
		alice     = dialGateway(t, url1, e2eCreds)                              // principal e2e
		aliceElse = dialGateway(t, url2, credentials{"e2e-other", "e2e-token"}) // principal e2e, another client id, the other replica
		bob       = dialGateway(t, url2, credentials{"e2e", "other-token"})     // principal other
		bob1      = dialGateway(t, url1, credentials{"e2e", "other-token"})
		client    = dialClientID(t, url1, "e2e")       // owner client:e2e
		client2   = dialClientID(t, url2, "e2e")       // the same, on the other replica
		otherClnt = dialClientID(t, url2, "e2e-other") // owner client:e2e-other
		newFilter = func(c *gethrpc.Client, method string, params ...any) string {
			t.Helper()
			var id string
			if err := rpcCall(c, &id, method, params...); err != nil {
				t.Fatalf("%s: %s", method, describeErr(err))
			}
			return id
		}
	)
	logs := newFilter(alice, "eth_newFilter", map[string]any{})
	blocks := newFilter(alice, "eth_newBlockFilter")
	mine := func() common.Hash {
		t.Helper()
		if _, err := node.Call("evm_mine"); err != nil {
			t.Fatal(err)
		}
		raw, err := node.Call("eth_getBlockByNumber", "latest", false)
		if err != nil {
			t.Fatal(err)
		}
		var b struct{ Hash common.Hash }
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Fatal(err)
		}
		return b.Hash
	}

	notFound := func(who string, c *gethrpc.Client, method, id string) {
		t.Helper()
		var res any
		err := rpcCall(c, &res, method, id)
		if err == nil {
			t.Errorf("%s: %s(%s) answered %v, want -32000 filter not found", who, method, id[:10], res)
			return
		}
		if code, msg, _ := rpcErr(err); code != -32000 || msg != "filter not found" {
			t.Errorf("%s: %s(%s): %s, want -32000 \"filter not found\"", who, method, id[:10], describeErr(err))
		}
	}
	for _, call := range []struct{ method, id string }{
		{"eth_getFilterChanges", logs}, {"eth_getFilterLogs", logs}, {"eth_getFilterChanges", blocks},
	} {
		notFound("bob (other principal, replica 2)", bob, call.method, call.id)
		notFound("bob (other principal, replica 1)", bob1, call.method, call.id)
		notFound("client id e2e without a token", client, call.method, call.id)
	}
	for _, f := range []string{logs, blocks} {
		var ok bool
		if err := rpcCall(bob, &ok, "eth_uninstallFilter", f); err != nil || ok {
			t.Errorf("bob: eth_uninstallFilter(%s) = %v, %v; want false", f[:10], ok, err)
		}
	}

	// Alice's filters are intact, and hers on the other replica with another client id.
	h := mine()
	var got []common.Hash
	deadline := time.Now().Add(15 * time.Second)
	for len(got) == 0 && time.Now().Before(deadline) {
		if err := rpcCall(aliceElse, &got, "eth_getFilterChanges", blocks); err != nil {
			t.Fatalf("alice (client e2e-other, replica 2): eth_getFilterChanges: %s", describeErr(err))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(got) != 1 || got[0] != h {
		t.Errorf("alice's block filter on replica 2: %v, want [%s]", got, h)
	}
	var again []common.Hash
	if err := rpcCall(alice, &again, "eth_getFilterChanges", blocks); err != nil || len(again) != 0 {
		t.Errorf("alice's block filter on replica 1 after the poll on replica 2: %v, %v; want nothing new", again, err)
	}
	var lg []any
	if err := rpcCall(alice, &lg, "eth_getFilterChanges", logs); err != nil {
		t.Errorf("alice's log filter: %s", describeErr(err))
	}

	// A filter made with a client id alone is that client id's.
	mine2 := newFilter(client, "eth_newBlockFilter")
	notFound("client id e2e-other", otherClnt, "eth_getFilterChanges", mine2)
	notFound("alice (principal e2e, client e2e)", alice, "eth_getFilterChanges", mine2)
	var hs []common.Hash
	if err := rpcCall(client2, &hs, "eth_getFilterChanges", mine2); err != nil {
		t.Errorf("client id e2e on replica 2, its own filter: %s", describeErr(err))
	}

	// Uninstalled by its owner, gone for everyone; an id never made, unknown.
	var ok bool
	if err := rpcCall(aliceElse, &ok, "eth_uninstallFilter", logs); err != nil || !ok {
		t.Errorf("alice: eth_uninstallFilter = %v, %v; want true", ok, err)
	}
	notFound("alice after uninstalling", alice, "eth_getFilterChanges", logs)
	buf := make([]byte, 16)
	_, _ = rand.Read(buf)
	notFound("alice, an id never made", alice, "eth_getFilterChanges", "0x"+hex.EncodeToString(buf))
}

// dialClientID is a go-ethereum RPC client of url that sends only the client id (X-API-Key),
// as a wallet with a URL does.
func dialClientID(t *testing.T, url, clientID string) *gethrpc.Client {
	t.Helper()
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{Proxy: nil}}
	c, err := gethrpc.DialOptions(context.Background(), url, gethrpc.WithHTTPClient(hc), gethrpc.WithHeader("X-API-Key", clientID))
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(c.Close)
	return c
}
