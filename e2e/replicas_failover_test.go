package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/web3gate/web3gate/contracts"
)

// anvilKey0 is the key of anvil's first dev account (the well-known test mnemonic's).
const anvilKey0 = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"

// leaseHeld reports whether g's admin /metrics says it holds the lease name.
func leaseHeld(t *testing.T, g *gateway, name string) bool {
	t.Helper()
	want := fmt.Sprintf(`web3gate_lease_held{lease=%q} 1`, name)
	return slices.Contains(metric(t, g, "web3gate_lease_held"), want)
}

// waitLease waits until one of gws holds the lease name and returns it, failing after within.
func waitLease(t *testing.T, gws []*gateway, name string, within time.Duration) *gateway {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, g := range gws {
			if leaseHeld(t, g, name) {
				return g
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica holds the lease %s within %v", name, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// holders are the gateways of gws holding the lease name.
func holders(t *testing.T, gws []*gateway, name string) []*gateway {
	t.Helper()
	var out []*gateway
	for _, g := range gws {
		if leaseHeld(t, g, name) {
			out = append(out, g)
		}
	}
	return out
}

// nftIndex is the ERC721 contract on anvil that the replicas' owners indexer follows, and a
// session to mint and move its tokens.
type nftIndex struct {
	c      *contracts.Contract
	addr   common.Address
	sess   *contracts.Session
	minted []int64 // token ids
}

func deployNFT(t *testing.T, url string, chainID uint64) *nftIndex {
	t.Helper()
	client, err := ethclient.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	key, err := crypto.HexToECDSA(anvilKey0)
	if err != nil {
		t.Fatal(err)
	}
	n := &nftIndex{c: contracts.MustLoad("TestERC721"),
		sess: &contracts.Session{Client: client, Key: key, ChainID: new(big.Int).SetUint64(chainID)}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n.addr, err = n.sess.Deploy(ctx, n.c, "Failover", "FO"); err != nil {
		t.Fatal(err)
	}
	return n
}

// ownersConfig indexes n's contract on chainID at once (no confirmations).
func (n *nftIndex) ownersConfig(chainID uint64) string {
	return fmt.Sprintf(`owners:
  chains:
    - chainId: %d
      confirmations: 0
      pollInterval: 100ms
      contracts: [%s]
`, chainID, n.addr.Hex())
}

// mint mints token id to to and returns the block it was mined in.
func (n *nftIndex) mint(t *testing.T, to common.Address, id int64) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := n.sess.Transact(ctx, n.addr, n.c, "mint", to, big.NewInt(id))
	if err != nil {
		t.Fatalf("mint %d: %v", id, err)
	}
	n.minted = append(n.minted, id)
	return rc.BlockNumber.Uint64()
}

// transfer moves token id from the session's account to to.
func (n *nftIndex) transfer(t *testing.T, to common.Address, id int64) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	from := crypto.PubkeyToAddress(n.sess.Key.PublicKey)
	rc, err := n.sess.Transact(ctx, n.addr, n.c, "transferFrom", from, to, big.NewInt(id))
	if err != nil {
		t.Fatalf("transfer %d: %v", id, err)
	}
	return rc.BlockNumber.Uint64()
}

// onChain is ownerOf of every minted token, and balanceOf of every owner, as the chain says.
func (n *nftIndex) onChain(t *testing.T) (owners map[int64]common.Address, balances map[common.Address]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owners, balances = map[int64]common.Address{}, map[common.Address]int64{}
	for _, id := range n.minted {
		out, err := n.sess.Call(ctx, n.addr, n.c, "ownerOf", big.NewInt(id))
		if err != nil {
			t.Fatalf("ownerOf(%d): %v", id, err)
		}
		owners[id] = out[0].(common.Address)
	}
	for _, o := range owners {
		out, err := n.sess.Call(ctx, n.addr, n.c, "balanceOf", o)
		if err != nil {
			t.Fatalf("balanceOf(%s): %v", o.Hex(), err)
		}
		balances[o] = out[0].(*big.Int).Int64()
	}
	return owners, balances
}

// fromIndex is /v1/owners of g for the contract: the owner of each token, the count per owner,
// and the block the index has reached.
func (n *nftIndex) fromIndex(t *testing.T, g *gateway, chainID uint64) (map[int64]common.Address, map[common.Address]int64, uint64) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/v1/owners?chainId=%d&contractAddress=%s", g.API, chainID, n.addr.Hex()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/owners: HTTP %d %s", resp.StatusCode, b)
	}
	var body struct {
		Balances []struct{ Address, Amount, TokenID string } `json:"balances"`
		PageKey  *string                                     `json:"pageKey"`
	}
	if err := json.Unmarshal(b, &body); err != nil || body.PageKey != nil {
		t.Fatalf("GET /v1/owners: %v, a second page %v: %s", err, body.PageKey, b)
	}
	owners, counts := map[int64]common.Address{}, map[common.Address]int64{}
	for _, bal := range body.Balances {
		id, err := hexutil.DecodeBig(bal.TokenID)
		if err != nil || bal.Amount != "1" {
			t.Fatalf("GET /v1/owners: balance %+v", bal)
		}
		owners[id.Int64()] = common.HexToAddress(bal.Address)
		counts[common.HexToAddress(bal.Address)]++
	}
	var block uint64
	fmt.Sscan(resp.Header.Get("X-Indexed-Block"), &block)
	return owners, counts, block
}

// waitIndexed waits until g's owners index has reached block and equals ownerOf and balanceOf
// on the chain.
func (n *nftIndex) waitIndexed(t *testing.T, g *gateway, chainID, block uint64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		owners, balances := n.onChain(t)
		gotOwners, gotCounts, at := n.fromIndex(t, g, chainID)
		if at >= block && fmt.Sprint(owners) == fmt.Sprint(gotOwners) && fmt.Sprint(balances) == fmt.Sprint(gotCounts) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the owners index (at block %d, want %d) differs from the chain after %v:\nindex owners %v, counts %v\nchain ownerOf %v, balanceOf %v",
				at, block, within, gotOwners, gotCounts, owners, balances)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func randomAddress(t *testing.T) common.Address {
	t.Helper()
	k, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return crypto.PubkeyToAddress(k.PublicKey)
}

// TestReplicasFailover: three replicas on one PostgreSQL database; the one holding the
// confirmer's and the owners indexer's leases is killed with SIGKILL in the middle of a burst
// of eth_sendTransaction spread over the three (its clients then go to the survivors, as
// behind a load balancer). Every hash any client received is mined, the account's nonces on
// the chain have no gap once the survivors' confirmer finished the dead replica's
// reservations, both leases move to a survivor within the lease timeout, the next send takes
// the next nonce, and the owners index, fed by the new holder, equals ownerOf/balanceOf for
// tokens minted before and after the kill.
func TestReplicasFailover(t *testing.T) {
	const (
		chainID  = 31337
		total    = 600
		workers  = 48
		killAt   = 150 // hashes returned before the kill
		settle   = 60 * time.Second
		confName = "confirmer/31337"
		ownName  = "owners-indexer/31337"
	)
	rs := newReplicaSet(t, chainID)
	nft := deployNFT(t, rs.node.URL, chainID)
	transactions := "{maxInFlight: 2000, pollInterval: 100ms, rebroadcastAfter: 2s, broadcastTimeout: 3s}"
	extra := nft.ownersConfig(chainID)
	// The first replica takes both leases before the others start.
	first := rs.startReplica(t, transactions, extra)
	waitLease(t, []*gateway{first}, confName, 10*time.Second)
	waitLease(t, []*gateway{first}, ownName, 10*time.Second)
	rs.startReplica(t, transactions, extra)
	rs.startReplica(t, transactions, extra)
	for _, name := range []string{confName, ownName} {
		if h := holders(t, rs.gws, name); len(h) != 1 || h[0] != first {
			t.Fatalf("lease %s: held by %d replicas, want the first one only", name, len(h))
		}
	}

	deployer := crypto.PubkeyToAddress(nft.sess.Key.PublicKey)
	alice, bob := randomAddress(t), randomAddress(t)
	nft.mint(t, alice, 1)
	nft.mint(t, bob, 2)
	nft.mint(t, deployer, 3)
	block := nft.mint(t, alice, 4)
	nft.waitIndexed(t, rs.gws[1], chainID, block, 20*time.Second)

	from := chainNonce(t, rs.node, rs.acct)
	var (
		next, returned atomic.Int64
		dead           atomic.Bool // the first replica was killed
		mu             sync.Mutex
		hashes         []string
		failed, cut    []string
		wg             sync.WaitGroup
	)
	reached := make(chan struct{})
	var reachedOnce sync.Once
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				r := i % len(rs.gws)
				if r == 0 && dead.Load() {
					r = 1 + i%2 // the load balancer sends the dead replica's share to the others
				}
				code, reply, err := callH(rs.gws[r].API+"/v1/web3/mainnet", nil, "eth_sendTransaction", txObject(rs.acct, i%2 == 0, nil))
				var h string
				ok := err == nil && code == 200 && reply.Error == nil && json.Unmarshal(reply.Result, &h) == nil && len(h) == 66
				mu.Lock()
				switch {
				case ok:
					hashes = append(hashes, h)
				case r == 0 && dead.Load():
					cut = append(cut, fmt.Sprintf("HTTP %d, %v, %v", code, reply, err)) // died with the process
				default:
					failed = append(failed, fmt.Sprintf("replica %d: HTTP %d, %v, %v", r, code, reply, err))
				}
				mu.Unlock()
				if ok && returned.Add(1) >= killAt {
					reachedOnce.Do(func() { close(reached) })
				}
			}
		})
	}
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatalf("only %d hashes within 60s", returned.Load())
	}
	dead.Store(true)
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	killed := time.Now()
	<-first.exited
	survivors := rs.gws[1:]

	// Both leases move to a survivor, within the lease timeout (kill -9: the server ends the
	// dead holder's session at once, and a standby asks every leaseTimeout/5).
	waitLease(t, survivors, confName, replicaLeaseTimeout+5*time.Second)
	confAfter := time.Since(killed)
	own := waitLease(t, survivors, ownName, replicaLeaseTimeout+5*time.Second)
	ownAfter := time.Since(killed)
	t.Logf("leases after the kill: %s on a survivor after %v, %s after %v", confName, confAfter.Round(time.Millisecond), ownName, ownAfter.Round(time.Millisecond))
	if confAfter > replicaLeaseTimeout || ownAfter > replicaLeaseTimeout {
		t.Errorf("a lease moved after %v / %v, beyond cluster.leaseTimeout %v", confAfter, ownAfter, replicaLeaseTimeout)
	}

	// Tokens minted and moved after the kill are indexed by the new holder.
	nft.mint(t, bob, 5)
	nft.transfer(t, bob, 3)
	block = nft.mint(t, alice, 6)

	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d sends to a surviving replica failed; first: %s", len(failed), failed[0])
	}
	checkDistinct(t, hashes)
	t.Logf("burst: %d hashes returned, %d requests cut by the kill", len(hashes), len(cut))

	dump := func(missing []string) { dumpReplicaState(t, rs, missing) }
	waitMined(t, rs.node, rs.acct, hashes, settle, nil, dump)
	n := waitSettled(t, rs, settle, dump)
	t.Logf("settled: %d transactions from the account mined (nonces %d..%d), %d of them without a hash reaching a client",
		n-from, from, n-1, int(n-from)-len(hashes))
	checkMinedNonces(t, rs.node, rs.acct, from, n, hashes)

	// The next send, through each survivor, takes the next nonce.
	for i, g := range survivors {
		code, r, err := callH(g.API+"/v1/web3/mainnet", nil, "eth_sendTransaction", txObject(rs.acct, true, nil))
		var h string
		if err != nil || code != 200 || r.Error != nil || json.Unmarshal(r.Result, &h) != nil {
			t.Fatalf("send after the kill through survivor %d: HTTP %d, %v, %v", i, code, r, err)
		}
		waitReceipt(t, rs.node, h)
		res, err := rs.node.Call("eth_getTransactionByHash", h)
		if err != nil {
			t.Fatal(err)
		}
		var tx struct{ Nonce hexutil.Uint64 }
		if err := json.Unmarshal(res, &tx); err != nil {
			t.Fatal(err)
		}
		if uint64(tx.Nonce) != n+uint64(i) {
			t.Fatalf("the send after the kill through survivor %d has nonce %d, want %d", i, tx.Nonce, n+uint64(i))
		}
		hashes = append(hashes, h)
	}
	checkStore(t, rs, from, n+uint64(len(survivors)), hashes, 30*time.Second)

	nft.waitIndexed(t, own, chainID, block, 20*time.Second)
	// Any replica answers from the one index.
	for _, g := range survivors {
		nft.waitIndexed(t, g, chainID, block, 5*time.Second)
	}
	// Exactly one confirmer and one indexer run.
	for _, name := range []string{confName, ownName} {
		if h := holders(t, survivors, name); len(h) != 1 {
			t.Fatalf("lease %s: held by %d survivors, want 1", name, len(h))
		}
	}
}

// waitSettled waits until anvil's pool holds nothing more of the account and its nonce is
// stable (the survivors' confirmer has sent what the dead replica reserved), and returns the
// account's nonce then.
func waitSettled(t *testing.T, rs *replicaSet, within time.Duration, dump func([]string)) uint64 {
	t.Helper()
	until := time.Now().Add(within)
	stuck := &anvilUnsticker{node: rs.node, addr: rs.acct}
	var n uint64
	for stable := 0; stable < 10; {
		stuck.check(t)
		latest := chainNonce(t, rs.node, rs.acct)
		pend := nodeUint(t, rs.node, "eth_getTransactionCount", rs.acct.Hex(), "pending")
		var pool struct{ Pending, Queued hexutil.Uint64 }
		res, err := rs.node.Call("txpool_status")
		if err == nil {
			err = json.Unmarshal(res, &pool)
		}
		if err != nil {
			t.Fatalf("txpool_status: %v", err)
		}
		open := openRows(t, rs)
		if latest == n && latest == pend && pool.Pending == 0 && pool.Queued == 0 && open == 0 {
			stable++
		} else {
			stable = 0
		}
		n = latest
		if time.Now().After(until) {
			dump(nil)
			t.Fatalf("not settled within %v: latest nonce %d, pending %d, pool %d pending %d queued, %d rows reserved or signed",
				within, latest, pend, pool.Pending, pool.Queued, open)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return n
}

// openRows counts the account's rows still reserved or signed in the store.
func openRows(t *testing.T, rs *replicaSet) int {
	t.Helper()
	n := 0
	for _, r := range storeRows(t, rs.dsn, rs.acct) {
		if r.state == "reserved" || r.state == "signed" {
			n++
		}
	}
	return n
}

// dumpReplicaState logs what anvil and the store know of the account, for a failure's
// diagnosis.
func dumpReplicaState(t *testing.T, rs *replicaSet, missing []string) {
	t.Helper()
	t.Logf("anvil: latest nonce %d, pending nonce %d, head block %d",
		chainNonce(t, rs.node, rs.acct), nodeUint(t, rs.node, "eth_getTransactionCount", rs.acct.Hex(), "pending"),
		nodeUint(t, rs.node, "eth_blockNumber"))
	if res, err := rs.node.Call("txpool_inspect"); err == nil {
		t.Logf("anvil txpool_inspect: %s", res)
	}
	for _, h := range missing {
		res, err := rs.node.Call("eth_getTransactionByHash", h)
		t.Logf("missing %s: anvil has %s %v", h, res, err)
	}
	var lines []string
	for _, r := range storeRows(t, rs.dsn, rs.acct) {
		if r.state != "mined" && r.state != "confirmed" {
			lines = append(lines, fmt.Sprintf("nonce %d %s %s %s", r.nonce, r.kind, r.state, r.hash))
		}
	}
	t.Logf("store rows not mined: %s", strings.Join(lines, "; "))
}
