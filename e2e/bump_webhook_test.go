package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/webhooks"
)

// The webhooks of fee bumping against anvil: what a wallet backend learns, without polling,
// when its request is stuck at the cap, cancelled, or bumped and mined.

const bumpHookSecret = "whsec_e2e_bump_0123456789abcdef"

// bumpHooks is a webhook endpoint on loopback that answers 204 and keeps what it got.
type bumpHooks struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []webhooks.Event
	bad []string // deliveries whose signature or form was wrong
}

func newBumpHooks(t *testing.T) *bumpHooks {
	h := &bumpHooks{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var ev webhooks.Event
		h.mu.Lock()
		defer h.mu.Unlock()
		switch {
		case err != nil || json.Unmarshal(body, &ev) != nil:
			h.bad = append(h.bad, fmt.Sprintf("undecodable %q (%v)", body, err))
		case r.Header.Get(webhooks.EventIDHeader) != ev.ID:
			h.bad = append(h.bad, fmt.Sprintf("%s: event id header %q", ev.ID, r.Header.Get(webhooks.EventIDHeader)))
		default:
			if err := webhooks.Verify(bumpHookSecret, r.Header.Get(webhooks.SignatureHeader), body, 5*time.Minute, time.Now()); err != nil {
				h.bad = append(h.bad, fmt.Sprintf("%s: signature: %v", ev.ID, err))
			}
			h.got = append(h.got, ev)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// of are the events of the request first hashed hash, deduplicated by event id, in arrival
// order.
func (h *bumpHooks) of(hash common.Hash) []webhooks.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	var out []webhooks.Event
	for _, ev := range h.got {
		if ev.Transaction.Hash == nil || common.HexToHash(*ev.Transaction.Hash) != hash || seen[ev.ID] {
			continue
		}
		seen[ev.ID] = true
		out = append(out, ev)
	}
	return out
}

func eventTypes(evs []webhooks.Event) []string {
	out := []string{}
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

func minedHashOf(ev webhooks.Event) string {
	if ev.Transaction.MinedHash == nil {
		return "null"
	}
	return *ev.Transaction.MinedHash
}

// TestFeeBumpWebhooks: with maxFeeCap below what the chain needs, a send becomes stuck and
// its endpoint is told (transaction.stuck); a cancel at an explicit fee makes it broadcast
// again and, mined, cancelled, the event carrying the original hash and the cancel's as
// minedHash. A caller-priced send (X-Fee-Bump: allow) priced out by the base fee is bumped
// within the cap and mined: transaction.mined carries the bump's hash as minedHash. Every
// delivery is signed with the endpoint's secret; none arrives for a version signed while the
// request stays broadcast.
func TestFeeBumpWebhooks(t *testing.T) { bumpStores(t, testFeeBumpWebhooks) }

func testFeeBumpWebhooks(t *testing.T, dsn string) {
	hooks := newBumpHooks(t)
	t.Setenv("WEB3GATE_E2E_BUMP_WEBHOOK_SECRET", bumpHookSecret)
	node, _, _, accts, g := startBumpAccounts(t, dsn, `{pollInterval: 100ms, rebroadcastAfter: 2s, bump: {after: 2, maxFeeCap: "10000000000"}}`,
		fmt.Sprintf(`
webhooks:
  pollInterval: 50ms
  backoff: 100ms
  maxBackoff: 500ms
  allowNetworks: [127.0.0.1/32]
  endpoints:
    - {principal: e2e, url: "%s/hooks", secretEnv: WEB3GATE_E2E_BUMP_WEBHOOK_SECRET}
`, hooks.srv.URL), nil, 2)
	waitEvents := func(hash common.Hash, what string, cond func([]webhooks.Event) bool) []webhooks.Event {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !cond(hooks.of(hash)) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: events of %s %q", what, hash.Hex(), eventTypes(hooks.of(hash)))
			}
			time.Sleep(50 * time.Millisecond)
		}
		return hooks.of(hash)
	}
	has := func(typ string) func([]webhooks.Event) bool {
		return func(evs []webhooks.Event) bool { return slices.Contains(eventTypes(evs), typ) }
	}

	// Stuck at the cap, then cancelled.
	first := send(t, g, accts[0])
	setBaseFee(t, node, 50*gwei)
	mineUntil(t, node, 20*time.Second, "stuck", func() bool { return status(t, g, first).State == "stuck" })
	evs := waitEvents(first, "transaction.stuck delivered", has("transaction.stuck"))
	if got, want := eventTypes(evs), []string{"transaction.broadcast", "transaction.stuck"}; !slices.Equal(got, want) {
		t.Fatalf("events before the cancel %q, want %q", got, want)
	}
	stuck := evs[1].Transaction
	if stuck.State != "stuck" || stuck.MinedHash != nil || stuck.Error == nil || !strings.Contains(*stuck.Error, "maxFeeCap") || stuck.From != accts[0].Hex() || stuck.Nonce != 0 || stuck.ChainID != 31337 || stuck.Kind != "send" {
		t.Errorf("stuck event %+v", stuck)
	}
	setBaseFee(t, node, 4*gwei)
	mine(t, node)
	fees := fmt.Sprintf(`{"maxFeePerGas":%q,"maxPriorityFeePerGas":%q}`, hexutil.EncodeBig(big.NewInt(9*gwei)), hexutil.EncodeBig(big.NewInt(2*gwei)))
	code, b := rest(t, http.MethodPost, g.API+"/v1/transactions/"+first.Hex()+"/cancel", "e2e-token", fees)
	var ans struct {
		Signed bumpVersion `json:"signed"`
	}
	if code != 200 || json.Unmarshal(b, &ans) != nil || ans.Signed.Kind != "cancel" {
		t.Fatalf("cancel: %d %s", code, b)
	}
	mineUntil(t, node, 15*time.Second, "cancelled", func() bool { return status(t, g, first).State == "cancelled" })
	evs = waitEvents(first, "transaction.cancelled delivered", has("transaction.cancelled"))
	// The cancel of a stuck request puts it in flight again (broadcast) before it is mined.
	if got, want := eventTypes(evs), []string{"transaction.broadcast", "transaction.stuck", "transaction.broadcast", "transaction.cancelled"}; !slices.Equal(got, want) {
		t.Fatalf("events of the cancelled request %q, want %q", got, want)
	}
	for _, ev := range evs {
		if ev.Transaction.ID != evs[0].Transaction.ID || common.HexToHash(*ev.Transaction.Hash) != first {
			t.Errorf("%s: transaction %s hash %s, want %s and the original %s", ev.Type, ev.Transaction.ID, *ev.Transaction.Hash, evs[0].Transaction.ID, first.Hex())
		}
	}
	if c := evs[3].Transaction; c.MinedHash == nil || common.HexToHash(*c.MinedHash) != ans.Signed.Hash || c.BlockNumber == nil || c.State != "cancelled" {
		t.Errorf("cancelled event: minedHash %s, block %v; want the cancel's hash %s", minedHashOf(evs[3]), c.BlockNumber, ans.Signed.Hash.Hex())
	}

	// Priced out with bumping allowed: bumped within the cap and mined.
	setBaseFee(t, node, gwei)
	mine(t, node)
	time.Sleep(700 * time.Millisecond) // web3gate sees the new head (see TestFeeBumpOnAnvil)
	r := sendHeader(t, g, txObject(accts[1], true, map[string]any{
		"maxFeePerGas": hexutil.EncodeBig(big.NewInt(3 * gwei)), "maxPriorityFeePerGas": hexutil.EncodeBig(big.NewInt(gwei))}), "allow")
	var second common.Hash
	if r.Error != nil || json.Unmarshal(r.Result, &second) != nil {
		t.Fatalf("send: %v", r)
	}
	setBaseFee(t, node, 5*gwei)
	mineUntil(t, node, 30*time.Second, "mined after a bump", func() bool { return settled(status(t, g, second)) })
	s := status(t, g, second)
	if s.MinedHash == nil || *s.MinedHash == second || len(s.Versions) < 2 {
		t.Fatalf("the bumped request: %+v", s)
	}
	var bump *bumpVersion
	for i := range s.Versions {
		if s.Versions[i].Hash == *s.MinedHash {
			bump = &s.Versions[i]
		}
	}
	if bump == nil || bump.Kind != "bump" {
		t.Fatalf("the mined version is no bump: %+v", s.Versions)
	}
	evs = waitEvents(second, "transaction.mined delivered", has("transaction.mined"))
	got := eventTypes(evs)
	// confirmed may follow mined (finality), nothing else; no event for the bump itself.
	if len(got) < 2 || len(got) > 3 || got[0] != "transaction.broadcast" || got[1] != "transaction.mined" || len(got) == 3 && got[2] != "transaction.confirmed" {
		t.Fatalf("events of the bumped request %q, want broadcast, mined (and confirmed)", got)
	}
	for _, ev := range evs[1:] {
		if ev.Transaction.MinedHash == nil || common.HexToHash(*ev.Transaction.MinedHash) != *s.MinedHash || common.HexToHash(*ev.Transaction.Hash) != second {
			t.Errorf("%s: hash %s minedHash %s, want the original %s and the bump's %s", ev.Type, *ev.Transaction.Hash, minedHashOf(ev), second.Hex(), s.MinedHash.Hex())
		}
	}
	if evs[0].Transaction.MinedHash != nil {
		t.Errorf("broadcast event with minedHash %s", minedHashOf(evs[0]))
	}

	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	if len(hooks.bad) > 0 {
		t.Errorf("bad deliveries: %q", hooks.bad)
	}
	t.Logf("%d deliveries received, every signature verified; the bumped request's fee cap %v -> %v wei", len(hooks.got), s.Versions[0].MaxFeePerGas.ToInt(), bump.MaxFeePerGas.ToInt())
}
