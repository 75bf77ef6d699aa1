//go:build linux

package main

// The product catalog measurement:
//
//	(p) GET /v1/products over a catalog of 100,000 products: the latency of each kind of
//	    list (no filter, a creator, a sale type, sold, deep offsets, a full page, filters
//	    combined) at concurrency 1, then all of them mixed, at concurrency 1 (its p99 is the
//	    target, ≤ 5 ms) and at the throughput load.
//
// The catalog is generated (deterministic: the same 100,000 products every run) and imported
// with `web3gate products import` into a fresh store, in one transaction, before web3gate
// starts on it (the shipped config.yaml, as for the signing measurements). Each kind of list
// rotates over several URLs (50 creators, every sale type, offsets from 1,000 to 10,000) so
// that no one query is measured alone. Every URL is checked before the load to answer a full
// page; any answer other than 200 during the load fails the run.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/web3gate/web3gate/products"
)

const (
	productsCount     = 100_000
	productsCreators  = 1_000
	targetProductsP99 = 5 * time.Millisecond
)

// productCases are the kinds of list of (p); each case's want is the number of products each
// URL must answer.
func productCases() []getCase {
	var creators, types, deep []string
	for i := range 50 {
		creators = append(creators, "/v1/products?baseUrl="+url.QueryEscape(fmt.Sprintf("https://example.com/@creator%d", i*17%productsCreators)))
	}
	for _, t := range []string{"LIMITED_EDITION", "OPEN_EDITION", "OFF_CHAIN_AUCTION", "ON_CHAIN_AUCTION", "EDITION", "AUCTION"} {
		types = append(types, "/v1/products?saleType="+t)
	}
	for _, o := range []int{1000, 2500, 5000, 7500, 10000} {
		deep = append(deep, fmt.Sprintf("/v1/products?offset=%d", o))
	}
	var combined []string
	for i := range 20 {
		combined = append(combined, fmt.Sprintf("/v1/products?baseUrl=%s&saleType=EDITION&sold=false&includeUpcoming=true&limit=10",
			url.QueryEscape(fmt.Sprintf("https://example.com/creators/creator%d", i*31%productsCreators))))
	}
	return []getCase{
		{key: "p1", name: "no filter", paths: []string{"/v1/products"}, want: 20},
		{key: "p2", name: "creator (baseUrl)", paths: creators, want: 20},
		{key: "p3", name: "saleType", paths: types, want: 20},
		{key: "p4", name: "sold=true / false", paths: []string{"/v1/products?sold=true", "/v1/products?sold=false"}, want: 20},
		{key: "p5", name: "offset 1,000-10,000", paths: deep, want: 20},
		{key: "p6", name: "limit=100", paths: []string{"/v1/products?limit=100", "/v1/products?limit=100&offset=100"}, want: 100},
		{key: "p7", name: "combined filters", paths: combined, want: 10},
		{key: "p8", name: "upcoming, sold, page 50", paths: []string{"/v1/products?includeUpcoming=true&sold=true&offset=1000", "/v1/products?sold=true&saleType=EDITION&offset=980"}, want: 20},
	}
}

// productsRun is the whole measurement.
type productsRun struct {
	catalogBytes int64
	importTime   time.Duration
	importOut    string
	get          getSuite
}

// measureProducts generates and imports the catalog, starts web3gate on it and measures.
func measureProducts(ctx context.Context, cs *children, cfg runConfig, env signEnv) (*productsRun, error) {
	dir, err := os.MkdirTemp(env.tmp, "products-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	pr := &productsRun{get: getSuite{label: "products list", cases: productCases()}}

	catalog := filepath.Join(dir, "catalog.json")
	if pr.catalogBytes, err = writeCatalog(catalog, productsCount, time.Now().UTC()); err != nil {
		return nil, err
	}
	cfgPath, err := signConfig(env.root, dir, nil)(0, 0) // the store's path; ports set below
	if err != nil {
		return nil, err
	}
	fmt.Printf("products: importing %d products (%.0f MB of JSON) into a fresh store...\n", productsCount, float64(pr.catalogBytes)/1e6)
	started := time.Now()
	out, _, err := cs.run(ctx, "web3gate products import", "", 10*time.Minute, env.bin, "products", "import", "--config", cfgPath, catalog)
	pr.importTime = time.Since(started)
	pr.importOut = strings.TrimSpace(string(out))
	if err != nil {
		return nil, fmt.Errorf("products import: %w", err) // with its output
	}
	if want := fmt.Sprintf("%d inserted", productsCount); !strings.Contains(pr.importOut, want) {
		return nil, fmt.Errorf("products import: %q, want %s", pr.importOut, want)
	}

	c, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, "web3gate (products)", signConfig(env.root, dir, nil))
	if err != nil {
		return nil, err
	}
	defer func() { _ = cs.stop(c) }()

	return pr, pr.get.measure(ctx, cs, cfg, dir, api, admin, c, checkProducts)
}

// checkProducts GETs url and checks the answer is a products list of want products.
func checkProducts(url string, want int) error {
	resp, body, err := probeGet(url, 4<<20)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d %.300s", url, resp.StatusCode, body)
	}
	var v struct {
		Products []json.RawMessage `json:"products"`
		Error    json.RawMessage   `json:"error"`
	}
	if err := json.Unmarshal(body, &v); err != nil || string(v.Error) != "null" {
		return fmt.Errorf("GET %s: not a products answer: %.300s", url, body)
	}
	if len(v.Products) != want {
		return fmt.Errorf("GET %s: %d products, want a full page of %d", url, len(v.Products), want)
	}
	return nil
}

// writeCatalog writes a generated catalog of n products, {"products": [...]}, and returns
// its size.
//
// 1,000 creators; 90 % on network ethereum, 10 % on mainnet (sold from the chain); sale types 40 % limited editions (1-100 available, a quarter of them sold
// out), 30 % open editions, 15 % each auction (1 available, 30 % sold); liveAt spread over
// the three years before now, 5 % upcoming within 90 days, 2 % never scheduled; 10 % with a
// salesEndAt 1-60 days after liveAt (most of them ended).
func writeCatalog(path string, n int, now time.Time) (int64, error) {
	rng := rand.New(rand.NewPCG(5, 100000))
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	enc := json.NewEncoder(f)
	if _, err := f.WriteString(`{"products": [`); err != nil {
		f.Close()
		return 0, err
	}
	hex := func(n int) string {
		const digits = "0123456789abcdef"
		b := make([]byte, n)
		for i := range b {
			b[i] = digits[rng.IntN(16)]
		}
		return string(b)
	}
	uuid := func() string {
		return hex(8) + "-" + hex(4) + "-4" + hex(3) + "-8" + hex(3) + "-" + hex(12)
	}
	for i := range n {
		creator := fmt.Sprintf("creator%d", rng.IntN(productsCreators))
		// A tenth on mainnet, the dev chain the shipped config's owners indexer follows: their
		// totalSold comes from the chain (nft_minted); the rest on a network it does not serve.
		network := "ethereum"
		if rng.IntN(10) == 0 {
			network = "mainnet"
		}
		p := products.Product{
			ID: uuid(), Network: network, TokenContractAddress: "0x" + hex(40),
			TokenMetadata: json.RawMessage(fmt.Sprintf(`{"name":"Work %d","description":"Generated product %d of the bench catalog.","image":"ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi/%d.png","background_color":"ffffff","attributes":[{"trait_type":"Batch","value":%d}],"properties":{}}`, i, i, i, i%100)),
			GatedContent:  []string{}, Prices: []products.Price{{ID: uuid(), Currency: "USD", Price: fmt.Sprintf("%d.00", 5+rng.IntN(500))}},
			Auctions:  []products.Auction{},
			CreatedAt: now.Add(-time.Duration(rng.Int64N(int64(3 * 365 * 24 * time.Hour)))).Truncate(time.Second),
			Username:  &creator,
		}
		purchase := "https://example.com/@" + creator + "/" + p.ID
		p.PurchaseLink = &purchase
		if rng.IntN(3) == 0 {
			p.GatedContent, p.IsGated = []string{"FULL_RESOLUTION_IMAGE"}, true
		}
		one := int64(1)
		switch x := rng.IntN(100); {
		case x < 40:
			p.SaleType = products.LimitedEdition
			n := int64(1 + rng.IntN(100))
			p.TotalAvailable = &n
			if rng.IntN(4) == 0 {
				p.TotalSold = n
			} else {
				p.TotalSold = rng.Int64N(n)
			}
		case x < 70:
			p.SaleType, p.TotalSold = products.OpenEdition, rng.Int64N(1000)
		default:
			p.SaleType, p.TotalAvailable = products.OffChainAuction, &one
			if x >= 85 {
				p.SaleType = products.OnChainAuction
			}
			if rng.IntN(10) < 3 {
				p.TotalSold = 1
			}
		}
		var live time.Time
		switch x := rng.IntN(100); {
		case x < 2:
		case x < 7:
			live = now.Add(time.Duration(rng.Int64N(int64(90 * 24 * time.Hour)))).Truncate(time.Second)
		default:
			live = now.Add(-time.Duration(rng.Int64N(int64(3 * 365 * 24 * time.Hour)))).Truncate(time.Second)
		}
		if !live.IsZero() {
			p.LiveAt = &live
			if rng.IntN(10) == 0 {
				end := live.Add(24*time.Hour + time.Duration(rng.Int64N(int64(59*24*time.Hour)))).Truncate(time.Second)
				p.SalesEndAt = &end
			}
		}
		if p.SaleType == products.OffChainAuction || p.SaleType == products.OnChainAuction {
			start := p.CreatedAt
			if p.LiveAt != nil {
				start = *p.LiveAt
			}
			p.Auctions = []products.Auction{{ID: uuid(), TokenID: "1", Status: "CREATED", StartsAt: start, EndsAt: start.Add(7 * 24 * time.Hour), AuctionContractID: uuid()}}
		}
		if i > 0 {
			if _, err := f.WriteString(","); err != nil {
				f.Close()
				return 0, err
			}
		}
		if err := enc.Encode(&p); err != nil {
			f.Close()
			return 0, err
		}
	}
	if _, err := f.WriteString("]}\n"); err != nil {
		f.Close()
		return 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return 0, err
	}
	return fi.Size(), f.Close()
}

// reportProducts prints the rounds and the summary of (p).
func reportProducts(w io.Writer, cfg runConfig, pr *productsRun) {
	if pr == nil || len(pr.get.rounds) == 0 {
		return
	}
	fmt.Fprintf(w, "\nproducts (p): GET /v1/products over %d products (%d creators), imported with `web3gate products import` in %v (%.0f MB of JSON: %s); latency load %s, throughput load %s, each after a %v warm-up; %d rounds\n",
		productsCount, productsCreators, pr.importTime.Round(100*time.Millisecond), float64(pr.catalogBytes)/1e6, pr.importOut, cfg.latency, cfg.load, cfg.warmup, len(pr.get.rounds))
	pr.get.report(w, cfg, "list", targetProductsP99)
	if bad := productsFailures(pr); bad != "" {
		fmt.Fprintf(w, "\n!!!!! THE LOAD GOT ERRORS: these figures count failed requests and are not valid !!!!!\n%s\n", bad)
	}
}

// productsFailures lists the runs of (p) that got errors, "" when none did.
func productsFailures(pr *productsRun) string {
	if pr == nil {
		return ""
	}
	return pr.get.failures()
}
