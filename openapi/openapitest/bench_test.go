package openapitest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A GET /v1/transactions/{hash} answer, as the whole-server tests poll it.
const txAnswer = `{"transaction":{"hash":"0x9b0d3c2c3a1b1f0e4c5a1f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4","state":"confirmed","kind":"send","chainId":1337,"nonce":7,"from":"0x1ac9ea42bf97174d69e0f4cda39684109c90c59e","to":"0x000000000000000000000000000000000000dead","value":"0x1","filled":["gas","maxFeePerGas","maxPriorityFeePerGas"],"blockNumber":12,"blockHash":"0x1b0d3c2c3a1b1f0e4c5a1f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4","error":null,"createdAt":"2026-11-21T15:20:44.123Z","updatedAt":"2026-11-21T15:20:45Z","minedHash":"0x9b0d3c2c3a1b1f0e4c5a1f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4","versions":[{"hash":"0x9b0d3c2c3a1b1f0e4c5a1f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4","kind":"original","maxFeePerGas":"0x3b9aca00","maxPriorityFeePerGas":"0x1","state":"mined","createdAt":"2026-11-21T15:20:44.123Z"}]},"error":null}`

func TestTransactionAnswer(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "http://127.0.0.1:1/v1/transactions/0x9b0d3c2c3a1b1f0e4c5a1f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4", nil)
	h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r-1"}}
	if _, err := c.Check(Public, req, 200, h, []byte(txAnswer)); err != nil {
		t.Fatal(err)
	}
	// Formats are asserted, patterns applied, inside $refs.
	for _, drift := range [][2]string{
		{`"createdAt":"2026-11-21T15:20:44.123Z","updatedAt"`, `"createdAt":"yesterday","updatedAt"`},
		{`"from":"0x1ac9ea42bf97174d69e0f4cda39684109c90c59e"`, `"from":"0x1aC9ea42bf97174d69e0f4cda39684109c90c59e"`},
		{`"nonce":7`, `"nonce":"0x7"`},
	} {
		body := strings.Replace(txAnswer, drift[0], drift[1], 1)
		if body == txAnswer {
			t.Fatalf("%s: not in the answer", drift[0])
		}
		if _, err := c.Check(Public, req, 200, h, []byte(body)); err == nil || !strings.Contains(err.Error(), "doesn't match the schema") {
			t.Errorf("%s: %v", drift[1], err)
		}
	}
}

func BenchmarkCheckTransaction(b *testing.B) {
	c, err := New()
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("GET", "http://127.0.0.1:1/v1/transactions/0x9b0d3c2c3a1b1f0e4c5a1f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4", nil)
	h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r-1"}}
	for b.Loop() {
		if _, err := c.Check(Public, req, 200, h, []byte(txAnswer)); err != nil {
			b.Fatal(err)
		}
	}
}
