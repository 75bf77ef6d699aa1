package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/rpc"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// embeddedHandler is a small in-process JSON-RPC handler standing in for the dev chain's
// go-ethereum rpc.Server.
type embeddedHandler struct {
	mode  atomic.Int32 // 0 answer, 1 hang until the request context ends, 2 huge answer, 3 panic
	calls atomic.Int32
	bad   atomic.Value // string: a problem with a request
}

func (h *embeddedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req fakeRequest
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil || r.Method != http.MethodPost ||
		r.Header.Get("Content-Type") != "application/json" {
		h.bad.Store(fmt.Sprintf("%s %q %s", r.Method, r.Header.Get("Content-Type"), body))
	}
	if req.Method != "eth_chainId" && req.Method != "eth_blockNumber" {
		h.calls.Add(1)
		switch h.mode.Load() {
		case 1:
			<-r.Context().Done()
			return
		case 2:
			w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":"`))
			w.Write([]byte(strings.Repeat("a", bigResultBytes)))
			w.Write([]byte(`"}`))
			return
		case 3:
			panic("handler bug")
		}
	}
	result := `"embedded-result"`
	switch req.Method {
	case "eth_chainId":
		result = `"0x539"`
	case "eth_blockNumber":
		result = `"0x10"`
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result)
}

func embeddedConfig() Config {
	cfg := testConfig()
	cfg.Chains = []ChainConfig{{ChainID: 1337, Name: "dev", URLs: []string{EmbeddedURL}}}
	return cfg
}

func TestEmbeddedNode(t *testing.T) {
	h := &embeddedHandler{}
	s := startSet(t, embeddedConfig(), Deps{Embedded: map[uint64]http.Handler{1337: h}})
	p := s.dev(t)

	res, err := p.Forward(context.Background(), "eth_getBalance", []byte(`["0x01","latest"]`))
	if err != nil {
		t.Fatalf("Forward: %v", err)
	}
	if string(res) != `"embedded-result"` {
		t.Errorf("result = %s", res)
	}
	if bad := h.bad.Load(); bad != nil {
		t.Errorf("handler got a bad request: %v", bad)
	}
	st := status(t, p, EmbeddedURL)
	if !st.Healthy || st.Head != 16 || st.Endpoint != EmbeddedURL {
		t.Errorf("embedded node status = %+v", st)
	}
	if err := s.Ready(); err != nil {
		t.Errorf("Ready: %v", err)
	}
}

func TestEmbeddedNodeLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode int32
		want error
	}{
		{"hang past the timeout", 1, jsonrpc.ErrUpstreamTimeout},
		{"response too large", 2, jsonrpc.ErrUpstreamUnavailable},
		{"handler panics", 3, jsonrpc.ErrUpstreamUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &embeddedHandler{}
			cfg := embeddedConfig()
			cfg.MaxResponseBytes = bigResultBytes / 2
			cfg.Timeout = 200 * time.Millisecond
			cfg.MaxAttempts = 1
			p := startSet(t, cfg, Deps{Embedded: map[uint64]http.Handler{1337: h}}).dev(t)
			h.mode.Store(tc.mode)

			start := time.Now()
			_, err := p.Forward(context.Background(), "eth_getLogs", nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Forward took %v", d)
			}
		})
	}
}

func TestEmbeddedWithoutHandler(t *testing.T) {
	_, err := New(embeddedConfig(), Deps{Embedded: map[uint64]http.Handler{1: &embeddedHandler{}}})
	if err == nil || !strings.Contains(err.Error(), "chains[0].urls[0]: no embedded handler for chain 1337") {
		t.Fatalf("New = %v, want the missing handler named", err)
	}
}

// gethService is served by a real go-ethereum rpc.Server, the handler the embedded dev chain
// provides, as methods eth_chainId, eth_blockNumber and eth_call.
type gethService struct{}

func (gethService) ChainId() string     { return "0x539" }
func (gethService) BlockNumber() string { return "0x2a" }

func (gethService) Call(_ context.Context, _ map[string]any, _ string) (string, error) {
	return "", &jsonrpc.Error{Code: 3, Message: "execution reverted", Data: "0x08c379a0"}
}

func (gethService) GetBalance(_ context.Context, _ string, _ string) (string, error) {
	return "0xde0b6b3a7640000", nil
}

func TestEmbeddedGethRPCServer(t *testing.T) {
	srv := rpc.NewServer()
	t.Cleanup(srv.Stop)
	if err := srv.RegisterName("eth", gethService{}); err != nil {
		t.Fatal(err)
	}
	p := startSet(t, embeddedConfig(), Deps{Embedded: map[uint64]http.Handler{1337: srv}}).dev(t)

	if p.Head() != 42 {
		t.Errorf("Head = %d, want 42", p.Head())
	}
	res, err := p.Forward(context.Background(), "eth_getBalance", []byte(`["0x0000000000000000000000000000000000000001","latest"]`))
	if err != nil || string(res) != `"0xde0b6b3a7640000"` {
		t.Errorf("eth_getBalance = %s, %v", res, err)
	}
	_, err = p.Forward(context.Background(), "eth_call", []byte(`[{"to":"0x0000000000000000000000000000000000000001"},"latest"]`))
	e := asError[*jsonrpc.Error](t, err)
	if data, _ := e.Data.(json.RawMessage); e.Code != 3 || e.Message != "execution reverted" || string(data) != `"0x08c379a0"` {
		t.Errorf("eth_call error = %d %q %s", e.Code, e.Message, data)
	}
	_, err = p.Forward(context.Background(), "eth_noSuchMethod", nil)
	if e := asError[*jsonrpc.Error](t, err); e.Code != -32601 {
		t.Errorf("unknown method error = %d %q, want -32601 passed through", e.Code, e.Message)
	}
}
