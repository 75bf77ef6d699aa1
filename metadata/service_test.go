package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy"
)

const (
	token1Doc = `{"name":"Alpha #1","description":"first","image":"ipfs://QmImage/1.png",
		"animation_url":"https://example.com/1.mp4","external_url":"https://example.com/1",
		"background_color":"ffffff","attributes":[{"trait_type":"Color","value":"red"},
		{"trait_type":"Level","value":3,"display_type":"number"}],"properties":{"rarity":"rare"}}`
	contractDoc = `{"name":"Alpha","description":"a collection","image":"https://example.com/a.png",
		"external_link":"https://example.com","seller_fee_basis_points":250,
		"fee_recipient":"0x000000000000000000000000000000000000dEaD"}`
)

func wantStatus(t *testing.T, err error, status int) {
	t.Helper()
	var he *proxy.HTTPError
	if !errors.As(err, &he) || he.Status != status {
		t.Fatalf("error = %v, want HTTP %d", err, status)
	}
}

// TestEveryTokenType: real contracts of each kind on the dev chain, read through the pool in
// one batch per lookup, documents from loopback servers.
func TestEveryTokenType(t *testing.T) {
	e := newEnv(t, nil)
	e.docs.set("/token/1.json", doc{body: token1Doc})
	e.docs.set("/contract.json", doc{body: contractDoc})
	e.gateway.set("/ipfs/QmToken2/2.json", doc{body: `{"name":"Alpha #2","imageUrl":"ipfs://QmImage/2.png"}`})

	erc721 := e.nft(1, e.docs.url("/token/1.json"))
	e.mint(erc721, 2, "ipfs://QmToken2/2.json")
	e.transact(erc721, "TestERC721", "setContractURI", e.docs.url("/contract.json"))

	t.Run("ERC721 over http", func(t *testing.T) {
		before := e.batches.Load()
		tok := e.mustToken(erc721, 1, false)
		if got := e.batches.Load() - before; got != 1 {
			t.Errorf("%d batches to the upstream, want 1 round trip", got)
		}
		if tok.CoinType != 60 || tok.ChainID != e.chainID || tok.ContractAddress != strings.ToLower(erc721.Hex()) ||
			tok.ID != "0x1" || tok.TokenType != TypeERC721 || deref(tok.TokenURI) != e.docs.url("/token/1.json") ||
			tok.MetadataError != nil {
			t.Errorf("token = %+v", tok)
		}
		m := tok.Metadata
		if deref(m.Name) != "Alpha #1" || deref(m.Description) != "first" || deref(m.Image) != "ipfs://QmImage/1.png" ||
			deref(m.AnimationURL) != "https://example.com/1.mp4" || deref(m.ExternalURL) != "https://example.com/1" ||
			deref(m.BackgroundColor) != "ffffff" || len(m.Attributes) != 2 || deref(m.Attributes[0].TraitType) != "Color" ||
			string(m.Attributes[0].Value) != `"red"` || deref(m.Attributes[1].DisplayType) != "number" ||
			string(m.Properties) != `{"rarity":"rare"}` {
			b, _ := json.Marshal(m)
			t.Errorf("metadata = %s", b)
		}
		var raw map[string]any
		if err := json.Unmarshal(tok.RawMetadata, &raw); err != nil || raw["background_color"] != "ffffff" {
			t.Errorf("rawMetadata = %s", tok.RawMetadata)
		}
		if ts, err := time.Parse(time.RFC3339, tok.TimeLastUpdated); err != nil || time.Since(ts) > time.Minute {
			t.Errorf("timeLastUpdated = %q", tok.TimeLastUpdated)
		}
	})
	t.Run("ERC721 over ipfs", func(t *testing.T) {
		tok := e.mustToken(erc721, 2, false)
		if deref(tok.Metadata.Name) != "Alpha #2" || deref(tok.Metadata.Image) != "ipfs://QmImage/2.png" || tok.MetadataError != nil {
			t.Errorf("token = %+v", tok)
		}
		if e.gateway.count("/ipfs/QmToken2/2.json") != 1 {
			t.Error("the gateway stand-in was not asked")
		}
	})
	t.Run("ERC721 token that does not exist", func(t *testing.T) {
		_, err := e.token(erc721, 99, false)
		wantStatus(t, err, http.StatusNotFound)
	})
	t.Run("ERC721 contract", func(t *testing.T) {
		c, err := e.contract(erc721, false)
		if err != nil {
			t.Fatal(err)
		}
		if c.TokenType != TypeERC721 || deref(c.Name) != "Test NFT" || deref(c.Symbol) != "TNFT" || c.Decimals != nil ||
			deref(c.TotalSupply) != "2" || deref(c.ContractURI) != e.docs.url("/contract.json") || c.Metadata == nil ||
			c.MetadataError != nil || c.Address != strings.ToLower(erc721.Hex()) {
			t.Fatalf("contract = %+v", c)
		}
		m := c.Metadata
		if deref(m.Name) != "Alpha" || deref(m.ExternalLink) != "https://example.com" || m.SellerFeeBasisPoints == nil ||
			*m.SellerFeeBasisPoints != 250 || deref(m.FeeRecipient) != "0x000000000000000000000000000000000000dead" {
			b, _ := json.Marshal(m)
			t.Errorf("contract metadata = %s", b)
		}
	})

	t.Run("ERC1155", func(t *testing.T) {
		addr := e.deploy("TestERC1155", "Multi", "MLT", e.docs.url("/1155/{id}.json"))
		e.transact(addr, "TestERC1155", "mint", e.me, big.NewInt(0x2a), big.NewInt(5))
		path := fmt.Sprintf("/1155/%064x.json", 0x2a)
		e.docs.set(path, doc{body: `{"name":"Multi 42","attributes":{"Edition":"first"}}`})
		tok := e.mustToken(addr, 0x2a, false)
		if tok.TokenType != TypeERC1155 || deref(tok.TokenURI) != e.docs.url(path) || deref(tok.Metadata.Name) != "Multi 42" ||
			len(tok.Metadata.Attributes) != 1 || deref(tok.Metadata.Attributes[0].TraitType) != "Edition" {
			t.Errorf("token = %+v", tok)
		}
		_, err := e.token(addr, 0x2b, false) // never minted: exists(id) is false
		wantStatus(t, err, http.StatusNotFound)
		c, err := e.contract(addr, false)
		if err != nil || c.TokenType != TypeERC1155 || deref(c.Name) != "Multi" || c.ContractURI != nil || c.Metadata != nil {
			t.Errorf("contract = %+v, %v", c, err)
		}
	})

	t.Run("ERC20", func(t *testing.T) {
		addr := e.deploy("TestERC20", "Coin", "CN", uint8(6))
		e.transact(addr, "TestERC20", "mint", e.me, big.NewInt(1_000_000))
		c, err := e.contract(addr, false)
		if err != nil || c.TokenType != TypeERC20 || deref(c.Name) != "Coin" || deref(c.Symbol) != "CN" ||
			c.Decimals == nil || *c.Decimals != 6 || deref(c.TotalSupply) != "1000000" {
			t.Errorf("contract = %+v, %v", c, err)
		}
		_, err = e.token(addr, 1, false)
		wantStatus(t, err, http.StatusNotFound)
	})

	t.Run("ERC721 with a data: token URI", func(t *testing.T) {
		addr := e.deploy("OnChainERC721")
		e.transact(addr, "OnChainERC721", "mint", e.me, big.NewInt(7))
		tok := e.mustToken(addr, 7, false)
		if !strings.HasPrefix(deref(tok.TokenURI), "data:application/json;base64,") || deref(tok.Metadata.Name) != "OnChain #7" ||
			tok.MetadataError != nil || len(tok.Metadata.Attributes) != 1 {
			t.Errorf("token = %+v", tok)
		}
		_, err := e.token(addr, 8, false) // tokenURI and ownerOf revert
		wantStatus(t, err, http.StatusNotFound)
	})

	t.Run("contract of no standard", func(t *testing.T) {
		addr := e.deploy("Plain")
		c, err := e.contract(addr, false)
		if err != nil || c.TokenType != TypeUnknown || c.Name != nil || c.TotalSupply != nil {
			t.Errorf("contract = %+v, %v", c, err)
		}
		_, err = e.token(addr, 1, false)
		wantStatus(t, err, http.StatusNotFound)
	})

	t.Run("account with no code", func(t *testing.T) {
		_, err := e.contract(e.me, false)
		wantStatus(t, err, http.StatusNotFound)
		_, err = e.token(e.me, 1, false)
		wantStatus(t, err, http.StatusNotFound)
	})

	t.Run("unknown chain", func(t *testing.T) {
		_, err := e.svc.Token(e.ctx, 999, erc721, big.NewInt(1), false)
		wantStatus(t, err, http.StatusNotFound)
	})

	t.Run("token without a URI", func(t *testing.T) {
		e.mint(erc721, 3, "")
		tok := e.mustToken(erc721, 3, false)
		if tok.TokenURI != nil || tok.MetadataError == nil || !isNull(tok.RawMetadata) {
			t.Errorf("token = %+v", tok)
		}
	})
}

// TestDocumentFailures: a token whose document cannot be had is still 200, with
// metadataError, and nothing fetched is echoed.
func TestDocumentFailures(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Fetcher.Timeout = 300 * time.Millisecond
		c.Fetcher.MaxBytes = 4096
	})
	e.docs.set("/big.json", doc{body: `{"name":"` + strings.Repeat("x", 8192) + `"}`})
	e.docs.set("/slow.json", doc{body: `{"name":"slow"}`, delay: 2 * time.Second})
	e.docs.set("/page.html", doc{body: "<html><body>secret internal page</body></html>"})
	e.docs.set("/gone.json", doc{status: http.StatusNotFound, body: `{"error":"secret"}`})
	for i, c := range []struct {
		path, reason string
	}{
		{"/big.json", "document too large"},
		{"/slow.json", "gateway timeout"},
		{"/page.html", "not a JSON document"},
		{"/gone.json", "404"},
	} {
		t.Run(c.path, func(t *testing.T) {
			addr := e.nft(int64(i+1), e.docs.url(c.path))
			tok := e.mustToken(addr, int64(i+1), false)
			if tok.MetadataError == nil || !strings.Contains(*tok.MetadataError, c.reason) {
				t.Errorf("metadataError = %q, want it to say %q", deref(tok.MetadataError), c.reason)
			}
			body, _ := json.Marshal(tok)
			if strings.Contains(string(body), "secret") || strings.Contains(*tok.MetadataError, "127.0.0.1") {
				t.Errorf("the answer echoes what was fetched or where: %s", body)
			}
			if !isNull(tok.RawMetadata) || tok.Metadata.Name != nil {
				t.Errorf("token = %+v", tok)
			}
		})
	}
}

// TestSSRF: with no network allowed, every token URI aimed at an internal address is
// refused with metadataError, and the loopback server records no request.
func TestSSRF(t *testing.T) {
	rec := newRecordingServer(t)
	redirect := redirector(t) // on 127.0.0.2, the one address allowed
	dns := dnsServer(t)       // answers 127.0.0.1 for every name
	e := newEnv(t, func(c *Config) {
		c.Fetcher.AllowNetworks = []string{"127.0.0.2/32"}
		c.Fetcher.DNSServer = dns
		c.IPFSGateways = []string{"http://127.0.0.1:" + rec.port4 + "/ipfs/"}
	})
	uris := []string{
		"http://127.0.0.1:" + rec.port4 + "/token.json",
		"http://10.0.0.1/token.json",
		"http://169.254.169.254/latest/meta-data/",
		"http://" + rec.addr6 + "/token.json",
		"http://localhost:" + rec.port4 + "/token.json",
		redirect + "/?to=" + "http://127.0.0.1:" + rec.port4 + "/token.json",
		"http://metadata.example.com:" + rec.port4 + "/token.json", // resolves to 127.0.0.1
		"ipfs://QmSomething/1.json",                                // the only gateway is on loopback
		"http://[::ffff:127.0.0.1]:" + rec.port4 + "/token.json",
		"http://0.0.0.0:" + rec.port4 + "/token.json",
		"file:///etc/passwd",
	}
	addr := e.deploy("TestERC721", "Test NFT", "TNFT")
	for i, uri := range uris {
		t.Run(uri, func(t *testing.T) {
			e.mint(addr, int64(i+1), uri)
			tok := e.mustToken(addr, int64(i+1), false)
			if tok.MetadataError == nil || !isNull(tok.RawMetadata) {
				t.Fatalf("token = %+v, want a metadataError", tok)
			}
			if strings.Contains(*tok.MetadataError, "127.0.0") || strings.Contains(*tok.MetadataError, "::1") {
				t.Errorf("metadataError %q names an internal address", *tok.MetadataError)
			}
		})
	}
	if n := rec.hits.Load(); n != 0 {
		t.Fatalf("the loopback server received %d requests", n)
	}
}

// TestForceRefreshAndCooldown: forceRefresh re-reads the chain and refetches, except
// within the cooldown of the last fetch, when the cached record answers.
func TestForceRefreshAndCooldown(t *testing.T) {
	e := newEnv(t, nil)
	e.docs.set("/a.json", doc{body: `{"name":"v1"}`})
	addr := e.nft(1, e.docs.url("/a.json"))

	if tok := e.mustToken(addr, 1, false); deref(tok.Metadata.Name) != "v1" {
		t.Fatalf("first = %+v", tok)
	}
	e.docs.set("/a.json", doc{body: `{"name":"v2"}`})
	e.docs.set("/b.json", doc{body: `{"name":"b"}`})
	e.transact(addr, "TestERC721", "setTokenURI", big.NewInt(1), e.docs.url("/b.json"))

	if tok := e.mustToken(addr, 1, false); deref(tok.Metadata.Name) != "v1" {
		t.Errorf("cached = %q, want v1", deref(tok.Metadata.Name))
	}
	e.clock.advance(30 * time.Second)
	before := e.batches.Load()
	if tok := e.mustToken(addr, 1, true); deref(tok.Metadata.Name) != "v1" || e.batches.Load() != before {
		t.Errorf("forceRefresh inside the cooldown = %q with %d chain reads, want the cached v1 and none",
			deref(tok.Metadata.Name), e.batches.Load()-before)
	}
	e.clock.advance(31 * time.Second)
	tok := e.mustToken(addr, 1, true)
	if deref(tok.Metadata.Name) != "b" || deref(tok.TokenURI) != e.docs.url("/b.json") {
		t.Errorf("forceRefresh after the cooldown = %+v, want the new URI and document", tok)
	}
	if got := e.docs.count("/a.json"); got != 1 {
		t.Errorf("/a.json fetched %d times, want 1", got)
	}
	// The refreshed record is what is served from now on, from memory and from the store.
	if tok := e.mustToken(addr, 1, false); deref(tok.Metadata.Name) != "b" {
		t.Errorf("after refresh = %q", deref(tok.Metadata.Name))
	}
	e.svc.mem.Clear()
	if tok := e.mustToken(addr, 1, false); deref(tok.Metadata.Name) != "b" || e.docs.count("/b.json") != 1 {
		t.Errorf("from the store = %q (fetched %d times)", deref(tok.Metadata.Name), e.docs.count("/b.json"))
	}

	// A burned token: forceRefresh answers 404, and the record is gone.
	e.transact(addr, "TestERC721", "burn", big.NewInt(1))
	e.clock.advance(61 * time.Second)
	_, err := e.token(addr, 1, true)
	wantStatus(t, err, http.StatusNotFound)
	_, err = e.token(addr, 1, false)
	wantStatus(t, err, http.StatusNotFound)
}

// TestFailureBackoff: a failed document is cached, retried after 30s, then 60s, … and
// never forever; a success ends the backoff.
func TestFailureBackoff(t *testing.T) {
	e := newEnv(t, nil)
	e.docs.set("/flaky.json", doc{status: http.StatusServiceUnavailable, body: "down"})
	addr := e.nft(1, e.docs.url("/flaky.json"))
	fetches := func() int { return e.docs.count("/flaky.json") }

	if tok := e.mustToken(addr, 1, false); tok.MetadataError == nil || fetches() != 1 {
		t.Fatalf("first = %+v, %d fetches", tok, fetches())
	}
	e.clock.advance(29 * time.Second)
	e.mustToken(addr, 1, false)
	if fetches() != 1 {
		t.Fatalf("refetched within the backoff: %d fetches", fetches())
	}
	e.clock.advance(2 * time.Second) // 31s: the first backoff has passed
	if tok := e.mustToken(addr, 1, false); tok.MetadataError == nil || fetches() != 2 {
		t.Fatalf("after 31s: %+v, %d fetches, want a second failing fetch", tok, fetches())
	}
	e.clock.advance(59 * time.Second) // the second backoff is 60s
	e.mustToken(addr, 1, false)
	if fetches() != 2 {
		t.Fatalf("refetched within the doubled backoff: %d fetches", fetches())
	}
	e.docs.set("/flaky.json", doc{body: `{"name":"back"}`})
	e.clock.advance(2 * time.Second)
	if tok := e.mustToken(addr, 1, false); deref(tok.Metadata.Name) != "back" || tok.MetadataError != nil || fetches() != 3 {
		t.Fatalf("after the backoff: %+v, %d fetches", tok, fetches())
	}
	e.clock.advance(2 * time.Hour) // past every backoff, within maxAge (24h): a success is not refetched
	e.mustToken(addr, 1, false)
	if fetches() != 3 {
		t.Errorf("a good record was refetched: %d fetches", fetches())
	}

	for n, want := range map[int]time.Duration{1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute, 7: 32 * time.Minute, 8: time.Hour, 50: time.Hour} {
		if got := e.svc.backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
}

// TestConcurrentRequestsShareOneFetch: identical concurrent lookups of an uncached token
// make one chain read and one document fetch.
func TestConcurrentRequestsShareOneFetch(t *testing.T) {
	e := newEnv(t, nil)
	e.docs.set("/slowish.json", doc{body: `{"name":"shared"}`, delay: 300 * time.Millisecond})
	addr := e.nft(1, e.docs.url("/slowish.json"))
	before := e.batches.Load()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			body, err := e.svc.Token(e.ctx, e.chainID, addr, big.NewInt(1), false)
			if err == nil && !strings.Contains(string(body), `"shared"`) {
				err = fmt.Errorf("body %s", body)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := e.docs.count("/slowish.json"); got != 1 {
		t.Errorf("document fetched %d times, want 1", got)
	}
	if got := e.batches.Load() - before; got != 1 {
		t.Errorf("%d chain reads, want 1", got)
	}
}

// TestStaleRecordRefreshedInBackground: past maxAge the record is served at once and
// refreshed behind it.
func TestStaleRecordRefreshedInBackground(t *testing.T) {
	e := newEnv(t, nil)
	e.docs.set("/s.json", doc{body: `{"name":"old"}`})
	addr := e.nft(1, e.docs.url("/s.json"))
	e.mustToken(addr, 1, false)
	e.docs.set("/s.json", doc{body: `{"name":"new"}`})
	e.clock.advance(25 * time.Hour)
	if tok := e.mustToken(addr, 1, false); deref(tok.Metadata.Name) != "old" {
		t.Errorf("stale lookup = %q, want the old record at once", deref(tok.Metadata.Name))
	}
	deadline := time.Now().Add(10 * time.Second)
	for deref(e.mustToken(addr, 1, false).Metadata.Name) != "new" {
		if time.Now().After(deadline) {
			t.Fatal("the stale record was never refreshed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestParseInputs(t *testing.T) {
	good := "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	for _, c := range []struct {
		in string
		ok bool
	}{
		{good, true},
		{strings.ToLower(good), true},
		{"0x" + strings.ToUpper(good[2:]), true},
		{"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD", false}, // checksum
		{good[:41], false},
		{"5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed00", false},
		{"0xzaaeb6053f3e94c9b9a09f33669435e7ef1beaed", false},
	} {
		a, err := ParseAddress(c.in)
		if (err == nil) != c.ok || c.ok && a != common.HexToAddress(good) {
			t.Errorf("ParseAddress(%q) = %v, %v", c.in, a, err)
		}
	}
	max := "0x" + strings.Repeat("f", 64)
	for _, c := range []struct {
		in, want string
	}{
		{"42", "0x2a"}, {"0x2a", "0x2a"}, {"0X2A", "0x2a"}, {"0x002a", "0x2a"}, {"0", "0x0"}, {"0x0", "0x0"},
		{max, max},
		{"0x1" + strings.Repeat("0", 64), ""}, // 2^256
		{"-1", ""}, {"+1", ""}, {"0x", ""}, {"", ""}, {"1e3", ""}, {"0x-1", ""}, {"1_000", ""}, {"abc", ""},
		{"115792089237316195423570985008687907853269984665640564039457584007913129639936", ""}, // 2^256
	} {
		id, err := ParseTokenID(c.in)
		got := ""
		if err == nil {
			got = hexID(id)
		}
		if got != c.want {
			t.Errorf("ParseTokenID(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// TestNegativeAnswersCached: a 404 the chain gave answers again for negativeTtl without a
// chain read, for the item and (no contract, not an NFT contract) for every token id of the
// address; concurrent identical misses share one read; after the TTL the chain is read
// again; forceRefresh re-checks at once (a token minted after its 404 is found).
func TestNegativeAnswersCached(t *testing.T) {
	e := newEnv(t, nil)
	nft := e.nft(1, "")
	plain := e.deploy("Plain")
	nobody := common.HexToAddress("0x00000000000000000000000000000000000b0d1e")

	type lookup struct {
		name     string
		first    func() error // the miss that reads the chain
		repeated []func() error
	}
	token := func(addr common.Address, id int64) func() error {
		return func() error { _, err := e.token(addr, id, false); return err }
	}
	contract := func(addr common.Address) func() error {
		return func() error { _, err := e.contract(addr, false); return err }
	}
	for _, c := range []lookup{
		{"no such token", token(nft, 99), []func() error{token(nft, 99)}},
		{"not an NFT contract", token(plain, 1), []func() error{token(plain, 1), token(plain, 2), token(plain, 1<<40)}},
		{"no contract, token route", token(nobody, 1), []func() error{token(nobody, 1), token(nobody, 7)}},
		{"no contract, contract route", contract(e.me), []func() error{contract(e.me), token(e.me, 3)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := e.batches.Load()
			wantStatus(t, c.first(), http.StatusNotFound)
			if got := e.batches.Load() - before; got != 1 {
				t.Fatalf("first miss: %d chain reads, want 1", got)
			}
			for range 50 {
				for _, f := range c.repeated {
					wantStatus(t, f(), http.StatusNotFound)
				}
			}
			if got := e.batches.Load() - before; got != 1 {
				t.Errorf("%d chain reads after 50 repeated misses, want the first one only", got)
			}
			e.clock.advance(e.cfg.NegativeTTL + time.Second)
			wantStatus(t, c.repeated[0](), http.StatusNotFound)
			if got := e.batches.Load() - before; got != 2 {
				t.Errorf("after negativeTtl: %d chain reads in all, want a second one", got)
			}
		})
	}

	t.Run("concurrent misses share one read", func(t *testing.T) {
		before := e.batches.Load()
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for range 50 {
			wg.Go(func() { errs <- token(nft, 1234)() })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			wantStatus(t, err, http.StatusNotFound)
		}
		if got := e.batches.Load() - before; got != 1 {
			t.Errorf("%d chain reads for 50 concurrent identical misses, want 1", got)
		}
	})

	t.Run("forceRefresh re-checks a remembered 404", func(t *testing.T) {
		wantStatus(t, token(nft, 5)(), http.StatusNotFound)
		e.mint(nft, 5, "")
		before := e.batches.Load()
		wantStatus(t, token(nft, 5)(), http.StatusNotFound) // remembered: no read
		if got := e.batches.Load() - before; got != 0 {
			t.Fatalf("%d chain reads inside negativeTtl, want 0", got)
		}
		if tok := e.mustToken(nft, 5, true); tok.ID != "0x5" || e.batches.Load()-before != 1 {
			t.Fatalf("forceRefresh = %+v after %d chain reads, want the minted token after 1", tok, e.batches.Load()-before)
		}
		if tok := e.mustToken(nft, 5, false); tok.ID != "0x5" || e.batches.Load()-before != 1 {
			t.Errorf("after forceRefresh = %+v after %d chain reads, want the record, no read", tok, e.batches.Load()-before)
		}
	})

	t.Run("a token found ends its address's 404", func(t *testing.T) {
		nonce, err := e.sess.Client.PendingNonceAt(e.ctx, e.me)
		if err != nil {
			t.Fatal(err)
		}
		addr := crypto.CreateAddress(e.me, nonce) // no code yet
		wantStatus(t, token(addr, 1)(), http.StatusNotFound)
		if got := e.deploy("TestERC721", "Late", "LT"); got != addr {
			t.Fatalf("deployed at %s, want %s", got, addr)
		}
		e.mint(addr, 1, "")
		e.mint(addr, 2, "")
		wantStatus(t, token(addr, 2)(), http.StatusNotFound) // the address's "no contract", remembered
		if tok := e.mustToken(addr, 1, true); tok.ID != "0x1" {
			t.Fatalf("forceRefresh = %+v", tok)
		}
		if tok := e.mustToken(addr, 2, false); tok.ID != "0x2" {
			t.Errorf("another token of the address = %+v, want it read from the chain", tok)
		}
	})
}

func TestConfigNegativeTTL(t *testing.T) {
	for _, c := range []struct {
		ttl time.Duration
		ok  bool
	}{
		{0, true}, // the default, 30s
		{time.Second, true},
		{time.Hour, true},
		{999 * time.Millisecond, false},
		{time.Hour + time.Second, false},
	} {
		t.Run(c.ttl.String(), func(t *testing.T) {
			cfg := Config{NegativeTTL: c.ttl}
			cfg.SetDefaults()
			err := cfg.Validate()
			if c.ok != (err == nil) || !c.ok && !strings.Contains(err.Error(), "negativeTtl: ") {
				t.Errorf("Validate = %v", err)
			}
		})
	}
}

// serve serves the token and contract routes on a real proxy server on loopback and returns
// its base URL.
func (e *env) serve() string {
	e.t.Helper()
	var sc proxy.Config
	sc.SetDefaults()
	srv, err := proxy.New(sc, proxy.Deps{Logger: zap.NewNop(), Registry: prometheus.NewRegistry(), Routes: []*proxy.Route{
		{Name: "token", Method: http.MethodGet, Pattern: "/v1/tokens/{coinType}/{chainId}/{contractAddress}/{tokenId}", REST: e.svc.TokenHandler()},
		{Name: "contract", Method: http.MethodGet, Pattern: "/v1/tokens/{coinType}/{chainId}/{contractAddress}", REST: e.svc.ContractHandler()},
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	e.t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String()
}

// TestForceRefreshParameter: forceRefresh follows the REST rule for booleans on both routes:
// true or false in any case, empty as absent, anything else a 400 naming it.
func TestForceRefreshParameter(t *testing.T) {
	e := newEnv(t, nil)
	addr := e.nft(1, "")
	api := e.serve()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(api + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	routes := map[string]string{
		"token":    fmt.Sprintf("/v1/tokens/60/%d/%s/1", e.chainID, addr.Hex()),
		"contract": fmt.Sprintf("/v1/tokens/60/%d/%s", e.chainID, addr.Hex()),
	}
	for route, path := range routes {
		t.Run(route+" accepted", func(t *testing.T) {
			for _, q := range []string{"", "?forceRefresh=true", "?forceRefresh=TRUE", "?forceRefresh=True", "?forceRefresh=false",
				"?forceRefresh=FALSE", "?forceRefresh="} {
				if status, body := get(path + q); status != http.StatusOK {
					t.Errorf("%s: HTTP %d %s, want 200", q, status, body)
				}
			}
		})
		t.Run(route+" refused", func(t *testing.T) {
			for _, q := range []string{"?forceRefresh=1", "?forceRefresh=0", "?forceRefresh=t", "?forceRefresh=F", "?forceRefresh=yes",
				"?forceRefresh=%20true"} {
				status, body := get(path + q)
				if status != http.StatusBadRequest || !strings.Contains(body, `"message":"forceRefresh: must be true or false"`) {
					t.Errorf("%s: HTTP %d %s, want a 400 naming forceRefresh", q, status, body)
				}
			}
		})
	}
}
