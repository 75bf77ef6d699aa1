package owners

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/lease"
)

// TestIndexerRunsOnOneReplica: two replicas' Services on one store, each running its indexers
// under a lease: the chain's indexer runs on the first only; when the first stops, the
// second's takes over from the stored progress.
func TestIndexerRunsOnOneReplica(t *testing.T) {
	node, _ := devNode(t)
	e := newEnv(t, node, nil)
	name := fmt.Sprintf("owners-indexer/%d", node.chainID)
	replica := func(id string) (*lease.Leases, *observer.ObservedLogs) {
		core, logs := observer.New(zap.InfoLevel)
		l, err := lease.NewTable(e.db, lease.Config{ReplicaID: id, LeaseTimeout: 3 * time.Second, LeaseCheckInterval: 300 * time.Millisecond},
			lease.Deps{Logger: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l, logs
	}
	holds := func(l *lease.Leases) bool {
		h := l.HeldLeases()
		return len(h) == 1 && h[0].Name == name
	}
	nft := e.deploy(erc721C, "Alpha", "A")
	e.transact(0, erc721C, nft, "mint", e.addrs[0], big.NewInt(1))

	la, _ := replica("a")
	e.hold = la.Hold
	e.start()
	first := e.svc
	t.Cleanup(first.Close)
	e.waitIndexed()
	if !holds(la) {
		t.Fatalf("the indexing replica lists %+v", la.HeldLeases())
	}
	lb, logsB := replica("b")
	e.hold = lb.Hold
	e.start()
	deadline := time.Now().Add(10 * time.Second)
	for logsB.FilterMessageSnippet("standing by").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second replica's indexer does not stand by")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if holds(lb) {
		t.Fatal("both replicas hold the indexer's lease")
	}

	first.Close()
	e.transact(0, erc721C, nft, "mint", e.addrs[1], big.NewInt(2))
	e.waitIndexed()
	if !holds(lb) {
		t.Fatalf("the second replica lists %+v after the first stopped", lb.HeldLeases())
	}
	tr := newTracked(e.addrs)
	tr.addID(tr.erc721, nft, big.NewInt(1))
	tr.addID(tr.erc721, nft, big.NewInt(2))
	tr.minted[nft] = 2
	e.check(tr)
}
