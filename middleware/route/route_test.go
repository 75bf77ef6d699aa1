package route

import (
	"errors"
	"testing"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

type forwarded struct{ n int }

func (f *forwarded) Serve(*proxy.Call) (*proxy.Response, error) {
	f.n++
	return &proxy.Response{Result: []byte(`"upstream"`)}, nil
}

func TestPolicy(t *testing.T) {
	s, err := New(Config{ExtraNamespaces: []string{"txpool"}}, Deps{ClientVersion: "web3gate/test", Chains: []uint64{137}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, chainResult string
		chain               uint64
		forwarded           bool
		refused             bool
	}{
		{"eth_chainId", `"0x89"`, 137, false, false},
		{"eth_chainId", `"0x539"`, 1337, false, false}, // not precomputed: still answered
		{"net_version", `"137"`, 137, false, false},
		{"web3_clientVersion", `"web3gate/test"`, 137, false, false},
		{"eth_getBalance", `"upstream"`, 137, true, false},
		{"net_peerCount", `"upstream"`, 137, true, false},
		{"web3_sha3", `"upstream"`, 137, true, false},
		{"txpool_status", `"upstream"`, 137, true, false},
		{"debug_traceCall", "", 137, false, true},
		{"eth_sendTransaction", "", 137, false, true},
		{"personal_sign", "", 137, false, true},
		{"eth", "", 137, false, true},
		{"_eth", "", 137, false, true},
	} {
		t.Run(tc.method, func(t *testing.T) {
			f := &forwarded{}
			resp, err := s.Serve(&proxy.Call{ChainID: tc.chain, Request: jsonrpc.Request{Method: tc.method}}, f)
			if tc.refused {
				if !errors.Is(err, jsonrpc.ErrMethodNotFound) || f.n != 0 {
					t.Fatalf("err %v, forwarded %d", err, f.n)
				}
				return
			}
			if err != nil || string(resp.Result) != tc.chainResult || (f.n == 1) != tc.forwarded {
				t.Fatalf("resp %v err %v forwarded %d", resp, err, f.n)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, ns := range []string{"Debug", "debug_", "", "personal", "a-b"} {
		c := Config{ExtraNamespaces: []string{ns}}
		if err := c.Validate(); err == nil {
			t.Errorf("namespace %q accepted", ns)
		}
	}
	c := Config{ExtraNamespaces: []string{"debug", "txpool", "trace"}}
	if err := c.Validate(); err != nil {
		t.Errorf("valid namespaces refused: %v", err)
	}
}
