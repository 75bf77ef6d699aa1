package ratelimit

import (
	"testing"
	"time"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// BenchmarkCharge is the stage's own work for one call on the local limiter: the call's cost
// and the charge of its client's and principal's budgets. It allocates nothing
// (BenchmarkHandleRateLimited in the root package measures it within the whole handler).
func BenchmarkCharge(b *testing.B) {
	s := newTestStage(&testing.T{}, Config{Client: Rate{Rate: 1e9, Burst: 1e9}, Principal: Rate{Rate: 1e9, Burst: 1e9}}, Deps{})
	r := jsonrpc.Request{Method: "eth_getBalance", Params: []byte(`["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","latest"]`)}
	ce := &s.defClient
	b.ReportAllocs()
	for b.Loop() {
		cost := s.cost(ce.costs, &r, 1)
		v := s.charge(time.Now(), s.rpcClients, "client-id", &ce.limits, s.rpcPrincipals, "principal", &s.defPrinc, cost, "c:", "p:")
		if !v.ok {
			b.Fatal("refused")
		}
	}
}
