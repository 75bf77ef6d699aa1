package upstreams

import (
	"context"
	"errors"
	"testing"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

const rawTx = `["0x02f86b0580843b9aca00850df8475800825208940000000000000000000000000000000000000001808000c001a0aa"]`

func TestSendRawTransactionAtMostOncePerNode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nodes  int
		answer behaviour
	}{
		{"one node, HTTP 500", 1, answer500},
		{"one node, connection closed", 1, answerHijack},
		{"three nodes, HTTP 500", 3, answer500},
		{"three nodes, connection closed", 3, answerHijack},
		{"three nodes, garbage", 3, answerGarbage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := make([]*fakeNode, tc.nodes)
			for i := range nodes {
				nodes[i] = newFakeNode(t, "n", 1337, 100)
			}
			cfg := testConfig(nodes...)
			cfg.MaxAttempts = 5
			cfg.EjectAfter = 100
			p := startSet(t, cfg, Deps{}).dev(t)
			for _, n := range nodes {
				n.setReads(tc.answer)
			}

			_, err := p.Forward(context.Background(), "eth_sendRawTransaction", []byte(rawTx))
			if !errors.Is(err, jsonrpc.ErrUpstreamUnavailable) {
				t.Fatalf("err = %v, want ErrUpstreamUnavailable", err)
			}
			for i, n := range nodes {
				if got := n.count("eth_sendRawTransaction"); got != 1 {
					t.Errorf("node %d received the transaction %d times, want 1", i, got)
				}
			}
		})
	}
}

func TestSendRawTransactionFailsOverToNextNode(t *testing.T) {
	bad := newFakeNode(t, "bad", 1337, 102)
	good := newFakeNode(t, "good", 1337, 101)
	spare := newFakeNode(t, "spare", 1337, 100)
	p := startSet(t, testConfig(bad, good, spare), Deps{}).dev(t)
	bad.setReads(answerHijack)

	res, err := p.Forward(context.Background(), "eth_sendRawTransaction", []byte(rawTx))
	if err != nil {
		t.Fatalf("Forward: %v", err)
	}
	if string(res) != `"good"` {
		t.Errorf("accepted by %s, want the next node", res)
	}
	for _, c := range []struct {
		n    *fakeNode
		want int
	}{{bad, 1}, {good, 1}, {spare, 0}} {
		if got := c.n.count("eth_sendRawTransaction"); got != c.want {
			t.Errorf("node %s received the transaction %d times, want %d", c.n.name, got, c.want)
		}
	}
}

func TestSendRawTransactionRejectionNotRetried(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 101)
	b := newFakeNode(t, "b", 1337, 100)
	p := startSet(t, testConfig(a, b), Deps{}).dev(t)
	a.setReads(answerRPCError)

	_, err := p.Forward(context.Background(), "eth_sendRawTransaction", []byte(rawTx))
	if e := asError[*jsonrpc.Error](t, err); e.Code != rpcErrorCode {
		t.Fatalf("err = %v, want the node's rejection", err)
	}
	if got := a.count("eth_sendRawTransaction") + b.count("eth_sendRawTransaction"); got != 1 {
		t.Errorf("transaction sent %d times, want 1", got)
	}
}

// TestBatchWithSendRawTransactionAtMostOncePerNode: a batch holding eth_sendRawTransaction
// is held to the same rule as the call alone.
func TestBatchWithSendRawTransactionAtMostOncePerNode(t *testing.T) {
	n := newFakeNode(t, "n", 1337, 100)
	cfg := testConfig(n)
	cfg.MaxAttempts = 5
	cfg.EjectAfter = 100
	p := startSet(t, cfg, Deps{}).dev(t)
	n.setReads(answer500)
	_, err := p.ForwardBatch(context.Background(), []BatchCall{{Method: "eth_chainId"}, {Method: "eth_sendRawTransaction", Params: []byte(rawTx)}})
	if !errors.Is(err, jsonrpc.ErrUpstreamUnavailable) {
		t.Fatalf("err = %v, want ErrUpstreamUnavailable", err)
	}
	if got := n.count("batch"); got != 1 {
		t.Errorf("the node received the batch %d times, want 1", got)
	}
}
