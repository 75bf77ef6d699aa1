package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/wallet"
	"github.com/web3gate/web3gate/wallet/awskms"
	"github.com/web3gate/web3gate/wallet/awskms/localkmstest"
)

// TestKMSAccountSendsAndSurvivesAStall: an account whose key is in a real local KMS
// (local-kms, ECC_SECG_P256K1) sends transactions that are mined, from it, and signs
// personal_sign; then a burst of sends meets a KMS that stops answering in its middle: every
// send answers either a hash (mined) or -32002 "signer unavailable" (HTTP 503) within the
// sign timeout, never a hang; once the KMS is back, no nonce is left stranded: pending
// equals latest, every answered hash is mined, and a send after the burst is mined.
func TestKMSAccountSendsAndSurvivesAStall(t *testing.T) {
	const burst = 30
	endpoint := localkmstest.Start(t)
	kms := localkmstest.Proxy(t, endpoint)
	dir := t.TempDir()
	cfg := testConfig(t, devConfig(t), dir)
	cfg.Wallet.AWSKMS = awskms.Config{Enabled: true, Region: localkmstest.Region, Endpoint: kms.Endpoint(), SignTimeout: time.Second}
	cfg.Wallet.AWSKMS.SetDefaults()
	cfg.Wallet.Transactions.MaxInFlight = 1000
	cfg.Wallet.Transactions.BroadcastTimeout = 2 * time.Second
	b, err := awskms.New(context.Background(), cfg.Wallet.AWSKMS, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts, acct, _, _ := startWithHardwareAccounts(t, cfg, b, false)
	url := ts.API + "/v1/web3/mainnet"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: burst, MaxConnsPerHost: burst}}
	defer client.CloseIdleConnections()
	send := func(obj map[string]string) (common.Hash, rpcResult) {
		r := rpcCall(t, client, url, "eth_sendTransaction", []any{obj}, devAuth...)
		var h common.Hash
		if r.Error == nil {
			json.Unmarshal(r.Result, &h)
		}
		return h, r
	}
	count := func(tag string) uint64 {
		r := rpcCall(t, client, url, "eth_getTransactionCount", []any{acct, tag}, devAuth...)
		var n hexutil.Uint64
		if r.Error != nil || json.Unmarshal(r.Result, &n) != nil {
			t.Fatalf("eth_getTransactionCount %s: %+v", tag, r)
		}
		return uint64(n)
	}

	fund, r := send(map[string]string{"from": devAccount3.Hex(), "to": acct.Hex(), "value": "0xde0b6b3a7640000"})
	if r.Error != nil {
		t.Fatalf("funding: %+v", r.Error)
	}
	waitMined(t, url, []common.Hash{fund})
	first, r := send(transfer(acct, 5))
	if r.Error != nil {
		t.Fatalf("a send from the KMS account: %+v", r.Error)
	}
	waitMined(t, url, []common.Hash{first})
	var rc struct{ From common.Address }
	json.Unmarshal(rpcCall(t, client, url, "eth_getTransactionReceipt", []any{first}, devAuth...).Result, &rc)
	if rc.From != acct {
		t.Fatalf("the receipt of %s is from %s, want %s", first.Hex(), rc.From.Hex(), acct.Hex())
	}
	msg := []byte("signed in KMS")
	ps := rpcCall(t, client, url, "personal_sign", []any{hexutil.Encode(msg), acct}, devAuth...)
	var sig hexutil.Bytes
	if ps.Error != nil || json.Unmarshal(ps.Result, &sig) != nil || len(sig) != 65 {
		t.Fatalf("personal_sign: %+v %s", ps.Error, ps.Result)
	}
	sig[64] -= 27
	if err := wallet.VerifySignature(accounts.TextHash(msg), sig, acct); err != nil {
		t.Fatal(err)
	}

	// The burst: the KMS stops answering once a few sends were answered, for 1.5 s.
	var answered atomic.Int32
	stalled := make(chan struct{})
	go func() {
		defer close(stalled)
		for answered.Load() < 5 {
			time.Sleep(time.Millisecond)
		}
		kms.Stall()
		time.Sleep(1500 * time.Millisecond)
		kms.Resume()
	}()
	var (
		mu       sync.Mutex
		hashes   []common.Hash
		refused  int
		slowest  time.Duration
		problems []string
	)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Spread over 1.5 s, so that sends are in flight before, during and after the
			// stall.
			time.Sleep(time.Duration(i) * 50 * time.Millisecond)
			start := time.Now()
			h, r := send(transfer(acct, int64(100+i)))
			took := time.Since(start)
			answered.Add(1)
			mu.Lock()
			defer mu.Unlock()
			slowest = max(slowest, took)
			switch {
			case r.Error == nil:
				hashes = append(hashes, h)
			case r.Error.Code == -32002 && r.Status == http.StatusServiceUnavailable && strings.Contains(r.Error.Message, "signer unavailable"):
				refused++
			default:
				problems = append(problems, r.Error.Message)
			}
		}()
	}
	wg.Wait()
	<-stalled
	if len(problems) > 0 {
		t.Fatalf("unexpected answers during the stall: %v", problems)
	}
	if refused == 0 {
		t.Fatalf("no send met the stalled KMS (%d sent ok): the stall came too late", len(hashes))
	}
	// A send waits for the in-flight slot of the account, then the sign timeout (1 s) and the
	// SDK's last attempt: far below a hang.
	if slowest > 10*time.Second {
		t.Errorf("the slowest answer took %s", slowest)
	}
	t.Logf("burst of %d: %d sent, %d refused signer unavailable, slowest %s", burst, len(hashes), refused, slowest)

	after, r := send(transfer(acct, 1))
	if r.Error != nil {
		t.Fatalf("a send after the KMS came back: %+v", r.Error)
	}
	waitMined(t, url, append(hashes, after))
	deadline := time.Now().Add(60 * time.Second)
	for {
		latest, pending := count("latest"), count("pending")
		if latest == pending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending %d, latest %d a minute after the burst: a nonce is stranded", pending, latest)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Every refused send's nonce was either taken back (it was the last one reserved) or
	// filled by a zero-value self-transfer once the KMS answered.
	t.Logf("the account's nonce is %d: 1 + %d sends + %d fillers + 1", count("latest"), len(hashes), int(count("latest"))-2-len(hashes))
	if n := metric(t, ts.Admin, `web3gate_sign_errors_total{backend="awskms",reason="unavailable"}`); n < float64(refused) {
		t.Errorf(`web3gate_sign_errors_total{backend="awskms",reason="unavailable"} = %v, want >= %d`, n, refused)
	}
}
