package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/wallet/pkcs11/softhsmtest"
)

// TestHSMReplicas300Sends: two replicas (two processes) on one PostgreSQL database sign for
// one account whose key is on a SoftHSM2 token both open (SoftHSM's file object store is
// shared between processes): 300 concurrent eth_sendTransaction split over both are all
// answered with hashes and mined, with contiguous nonces from the account's starting nonce,
// and nothing is left pending.
func TestHSMReplicas300Sends(t *testing.T) {
	const (
		chainID = 31337
		total   = 300
		workers = 32
	)
	// The token before any process that uses it: SoftHSM finds tokens at C_Initialize.
	tok := softhsmtest.Token(t)
	transactions := "{maxInFlight: 1000, pollInterval: 100ms, rebroadcastAfter: 2s}\n" + strings.TrimSuffix(pkcs11Section(tok, 16), "\n")
	rs := &replicaSet{node: anvil.Start(t, chainID), dsn: testengine.Postgres(t)}
	t.Setenv("WEB3GATE_KEYSTORE_PASSPHRASE", signingPassphrase)
	rs.acct = newHSMAccount(t, tok, writeConfig(t, t.TempDir(), replicaConfig(rs.dsn, chainID, transactions, "", rs.node.URL)), "e2e replicas")
	fund(t, rs.node, rs.acct)
	// A nonce the account used before web3gate: the replicas start from the chain's.
	if _, err := rs.node.Call("anvil_setNonce", rs.acct.Hex(), "0x7"); err != nil {
		t.Fatalf("anvil_setNonce: %v", err)
	}
	rs.start = 7
	for range 2 {
		rs.startReplica(t, transactions, "")
	}
	urls := []string{rs.gws[0].API + "/v1/web3/mainnet", rs.gws[1].API + "/v1/web3/mainnet"}

	from := chainNonce(t, rs.node, rs.acct)
	if from != rs.start {
		t.Fatalf("the account's nonce on anvil is %d before any send, want %d", from, rs.start)
	}
	began := time.Now()
	res := burst(rs.acct, urls, "eth_sendTransaction", total, workers, nil)
	answered := time.Since(began)
	if len(res.failed) > 0 {
		t.Fatalf("%d of %d sends failed; first: %s", len(res.failed), total, res.failed[0])
	}
	if len(res.results) != total {
		t.Fatalf("%d hashes for %d sends", len(res.results), total)
	}
	checkDistinct(t, res.results)
	waitMined(t, rs.node, rs.acct, res.results, 60*time.Second, nil, nil)
	checkMinedNonces(t, rs.node, rs.acct, from, from+total, res.results)
	checkStore(t, rs, from, from+total, res.results, 30*time.Second)
	latest := nodeUint(t, rs.node, "eth_getTransactionCount", rs.acct.Hex(), "latest")
	pending := nodeUint(t, rs.node, "eth_getTransactionCount", rs.acct.Hex(), "pending")
	if latest != from+total || pending != latest {
		t.Fatalf("the account's nonce: latest %d, pending %d; want both %d", latest, pending, from+total)
	}
	for i, g := range rs.gws {
		if n := metricSum(t, g, "web3gate_sign_duration_seconds_count", `backend="pkcs11"`); n < 1 {
			t.Errorf(`replica %d: web3gate_sign_duration_seconds_count{backend="pkcs11"} = %v, want > 0`, i, n)
		}
		if strings.Contains(strings.ToLower(g.logs.String()), strings.ToLower(tokenPIN(t, tok))) {
			t.Errorf("replica %d logged the token's PIN", i)
		}
	}
	t.Logf("%d sends over %d replicas answered in %v (%.0f/s), all mined in %v",
		total, len(rs.gws), answered.Round(time.Millisecond), float64(total)/answered.Seconds(), time.Since(began).Round(time.Millisecond))
}
