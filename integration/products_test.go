package integration

import (
	"context"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/contracts"
)

// productNames lists the tokenMetadata names of a /v1/products answer, in order.
func productNames(t *testing.T, body string) string {
	t.Helper()
	var v struct {
		Products []struct {
			TokenMetadata struct {
				Name string `json:"name"`
			} `json:"tokenMetadata"`
		} `json:"products"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Products == nil {
		t.Fatalf("not a products answer: %s", body)
	}
	var out []string
	for _, p := range v.Products {
		out = append(out, p.TokenMetadata.Name)
	}
	return strings.Join(out, ", ")
}

// TestProductsCatalog: `web3gate products import` of the example catalog into the store of a
// server's config, then GET /v1/products with each filter and the admin product API, through
// the real listeners.
func TestProductsCatalog(t *testing.T) {
	dir := t.TempDir()
	const adminToken = "catalog-admin-token"
	cfgText := strings.Replace(deploymentConfig(t), "    tokens: []\n    #  - name: catalog-ops",
		"    tokens:\n      - {name: catalog-ops, sha256: "+sha256Hex(adminToken)+"}\n    #  - name: catalog-ops", 1)
	fileCfg := withTestStore(t, cfgText, dir)
	if cfgText == devConfig(t) || fileCfg == cfgText {
		t.Fatal("config.yaml changed: the products test settings were not applied")
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(fileCfg), 0o600); err != nil {
		t.Fatal(err)
	}

	if code, out := runCLI(t, "", "products", "import", "--config", cfgPath, "../examples/products.yaml"); code != 0 ||
		out != "../examples/products.yaml: 8 products imported: 8 inserted, 0 updated, 0 unchanged\n" {
		t.Fatalf("import: exit %d: %s", code, out)
	}
	ts := startServerIn(t, cfgText, dir, io.Discard)
	list := ts.API + "/v1/products"

	for _, c := range []struct{ name, query, want string }{
		{"live", "", "Chain Reaction, Glass Garden, Sunrise over Lisbon, Midnight Bloom, Open Waters, Tides"},
		{"creator by @", "?baseUrl=https://example.com/@nft_creator", "Chain Reaction, Sunrise over Lisbon, Midnight Bloom"},
		{"creator by last segment", "?baseUrl=https://example.com/creators/lumen_studio", "Glass Garden, Open Waters, Tides"},
		{"EDITION", "?saleType=EDITION", "Sunrise over Lisbon, Midnight Bloom, Open Waters, Tides"},
		{"AUCTION", "?saleType=AUCTION", "Chain Reaction, Glass Garden"},
		{"one type", "?saleType=OPEN_EDITION", "Open Waters, Tides"},
		{"two types", "?saleType=LIMITED_EDITION,ON_CHAIN_AUCTION", "Chain Reaction, Sunrise over Lisbon, Midnight Bloom"},
		{"sold", "?sold=true", "Midnight Bloom"},
		{"not sold", "?sold=false", "Chain Reaction, Glass Garden, Sunrise over Lisbon, Open Waters, Tides"},
		{"upcoming", "?includeUpcoming=true", "Aurora, Chain Reaction, Glass Garden, Sunrise over Lisbon, Midnight Bloom, Open Waters, Tides"},
		{"liveAt in the past", "?liveAt=2025-03-15T00:00:00Z", "Last Light"},
		{"page", "?limit=2&offset=2", "Sunrise over Lisbon, Midnight Bloom"},
		{"combined", "?baseUrl=https://example.com/@lumen_studio&saleType=EDITION&sold=false&includeUpcoming=true", "Aurora, Open Waters, Tides"},
	} {
		code, body := get(t, list+c.query)
		if code != http.StatusOK {
			t.Errorf("%s: HTTP %d %s", c.name, code, body)
			continue
		}
		if got := productNames(t, body); got != c.want {
			t.Errorf("%s: %s\nwant %s", c.name, got, c.want)
		}
	}
	// One answer whole: the Product object of api-objects.md, as imported.
	_, body := get(t, list+"?sold=true")
	if err := matchJSON(`{"products":[{"id":"3d28cad8-e613-5bec-8e89-51911ba75a64","network":"ethereum",
		"tokenContractAddress":"0xae96784acb8acac5e29def8dea260b3b0de954a3",
		"tokenMetadata":{"name":"Midnight Bloom","description":"Night-flowering cactus, photographed once a year.",
			"image":"ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi/bloom.png","background_color":"000000",
			"attributes":[{"trait_type":"Series","value":"Nature"}],"properties":{}},
		"gatedContent":[],"isGated":false,"totalSold":25,"totalAvailable":25,
		"prices":[{"id":"141313c9-fa64-50b5-96bd-c5e2a79d67b2","currency":"USD","price":"80.00"}],"auctions":[],
		"saleType":"LIMITED_EDITION","createdAt":"2026-10-10T12:00:00Z","liveAt":"2026-10-15T12:00:00Z","previewAt":null,
		"salesEndAt":null,"purchaseLink":"https://example.com/@nft_creator/midnight-bloom","username":"nft_creator"}],"error":null}`, []byte(body)); err != nil {
		t.Errorf("sold=true answer: %v\n%s", err, body)
	}
	// Sold from the chain: Open Waters (imported with totalSold 142) is on mainnet, the dev
	// chain the owners indexer follows, where its contract has minted nothing.
	if _, body := get(t, list+"?saleType=OPEN_EDITION&limit=1"); !strings.Contains(body, `"name":"Open Waters"`) ||
		!strings.Contains(body, `"totalSold":0,`) {
		t.Errorf("Open Waters counts its tokens minted on the dev chain (none): %s", body)
	}
	if code, body := get(t, list+"?limit=0"); code != http.StatusBadRequest || !strings.Contains(body, "limit: must be an integer from 1 to 100") {
		t.Errorf("limit=0: HTTP %d %s", code, body)
	}

	// The CLI next to the running server: the same file again changes nothing; a bad file is
	// refused whole, the store untouched; usage errors exit 2.
	if code, out := runCLI(t, "", "products", "import", "../examples/products.yaml", "--config", cfgPath); code != 0 ||
		!strings.Contains(out, "0 inserted, 0 updated, 8 unchanged") {
		t.Errorf("import again: exit %d: %s", code, out)
	}
	raw, err := os.ReadFile("../examples/products.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(strings.Replace(string(raw), "totalSold: 3\n", "totalSold: 10\n", 1), "saleType: ON_CHAIN_AUCTION", "saleType: AUCTION", 1)
	_, before := get(t, list+"?includeUpcoming=true")
	code, out := runCLI(t, bad, "products", "import", "--config", cfgPath, "-")
	if code != 1 || !strings.Contains(out, "nothing imported, 1 problem(s)") || !strings.Contains(out, "products[4] (line 121): saleType: must be") {
		t.Errorf("bad import: exit %d: %s", code, out)
	}
	if _, after := get(t, list+"?includeUpcoming=true"); after != before {
		t.Errorf("a refused import changed the list:\n%s\nwas\n%s", after, before)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"products"}, 2, `expected "import"`},
		{[]string{"products", "export"}, 2, "unexpected argument export"},
		{[]string{"products", "import", "--config", cfgPath}, 2, `expected "<FILE>"`},
		{[]string{"products", "import", "a.yaml", "b.yaml"}, 2, "unexpected argument b.yaml"},
		{[]string{"products", "import", "--frob", "a.yaml"}, 2, "unknown flag --frob"},
		{[]string{"products", "import", "--config", cfgPath, filepath.Join(dir, "missing.yaml")}, 1, "no such file"},
		{[]string{"products", "import", "--dry-run", "../examples/products.yaml"}, 0, "8 products, all valid (dry run: nothing written)"},
	} {
		if code, out := runCLI(t, "", c.args...); code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d: %s; want %d with %q", c.args, code, out, c.code, c.want)
		}
	}

	// The admin API on the admin listener: Sunrise sells out, then goes.
	const sunrise = "681d6956-da94-5297-aa33-6190582880b1"
	admin := func(method, path, body, token string) (int, string) {
		t.Helper()
		code, _, b := request(t, method, ts.Admin+path, []byte(body), "Content-Type", "application/json", "Authorization", "Bearer "+token)
		return code, string(b)
	}
	code, product := admin("GET", "/v1/admin/products/"+sunrise, "", adminToken)
	if code != http.StatusOK {
		t.Fatalf("admin GET: HTTP %d %s", code, product)
	}
	var got struct {
		Product map[string]any `json:"product"`
	}
	if err := json.Unmarshal([]byte(product), &got); err != nil {
		t.Fatal(err)
	}
	got.Product["totalSold"] = 10
	soldOut, _ := json.Marshal(got.Product)
	if code, body := admin("PUT", "/v1/admin/products/"+sunrise, string(soldOut), "wrong-token"); code != http.StatusUnauthorized || !strings.Contains(body, "Not Authorized") {
		t.Errorf("admin PUT with a wrong token: HTTP %d %s", code, body)
	}
	if code, body := admin("PUT", "/v1/admin/products/"+sunrise, string(soldOut), adminToken); code != http.StatusOK {
		t.Errorf("admin PUT: HTTP %d %s", code, body)
	}
	if _, body := get(t, list+"?sold=true"); productNames(t, body) != "Sunrise over Lisbon, Midnight Bloom" {
		t.Errorf("sold after the PUT: %s", productNames(t, body))
	}
	if code, body := admin("DELETE", "/v1/admin/products/"+sunrise, "", adminToken); code != http.StatusNoContent {
		t.Errorf("admin DELETE: HTTP %d %s", code, body)
	}
	if _, body := get(t, list+"?baseUrl=https://example.com/@nft_creator"); productNames(t, body) != "Chain Reaction, Midnight Bloom" {
		t.Errorf("after the DELETE: %s", productNames(t, body))
	}
	if code, body := admin("PATCH", "/v1/admin/products/"+sunrise, "{}", adminToken); code != http.StatusMethodNotAllowed {
		t.Errorf("admin PATCH: HTTP %d %s", code, body)
	}

	// Sold from the chain, end to end: an edition of a contract deployed and minted on the dev
	// chain counts the index's mints, and the sold filter follows that figure.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess := gatewaySession(t, ts.API, 3)
	erc1155 := contracts.MustLoad("TestERC1155")
	edition, err := sess.Deploy(ctx, erc1155, "Edition", "ED", "")
	if err != nil {
		t.Fatal(err)
	}
	const editionID = "0b5e6f2a-4c1d-4e7a-9b3c-2d8f1a6e5c47"
	got.Product["id"], got.Product["network"], got.Product["tokenContractAddress"] = editionID, "mainnet", strings.ToLower(edition.Hex())
	got.Product["totalSold"], got.Product["totalAvailable"] = 0, 7
	got.Product["tokenMetadata"] = map[string]any{"name": "Chain Edition"}
	editionJSON, _ := json.Marshal(got.Product)
	if code, body := admin("POST", "/v1/admin/products", string(editionJSON), adminToken); code != http.StatusCreated {
		t.Fatalf("admin POST: HTTP %d %s", code, body)
	}
	for _, amount := range []int64{4, 3} {
		if _, err := sess.Transact(ctx, edition, erc1155, "mint", crypto.PubkeyToAddress(sess.Key.PublicKey), big.NewInt(1), big.NewInt(amount)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := get(t, list+"?sold=true")
		if productNames(t, body) == "Chain Edition, Midnight Bloom" {
			if !strings.Contains(body, `"totalSold":7,"totalAvailable":7`) {
				t.Errorf("the edition's figure: %s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edition minted out on chain never listed as sold: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
