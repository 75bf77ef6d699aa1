package owners

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/devchain"
	"github.com/web3gate/web3gate/devchain/devchaintest"
	"github.com/web3gate/web3gate/internal/leaktest"
	"github.com/web3gate/web3gate/metadata"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/upstreams"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// chainNode is a chain the tests index: its JSON-RPC endpoint (an embedded handler or a URL)
// and a client for the test's own transactions and reads.
type chainNode struct {
	chainID  uint64
	url      string       // http URL of the node, or upstreams.EmbeddedURL
	embedded http.Handler // with EmbeddedURL
	client   *ethclient.Client
}

// devNode starts an embedded dev chain, served to the tests' client over loopback HTTP.
func devNode(t *testing.T) (*chainNode, *devchain.Chain) {
	t.Helper()
	chain := devchaintest.Start(t)
	return &chainNode{chainID: chain.ChainID(), url: upstreams.EmbeddedURL, embedded: chain.Handler(), client: chain.Client}, chain.Chain
}

// env is a Service indexing one chain through a real upstream pool, on a real SQLite file.
type env struct {
	t      *testing.T
	ctx    context.Context
	node   *chainNode
	ups    *upstreams.Set
	chains []upstreams.ChainConfig
	db     *store.DB
	md     *metadata.Service
	tokens TokenSource // nil: md
	cfg    ChainConfig
	svc    *Service
	reg    *prometheus.Registry
	logs   *observer.ObservedLogs
	keys   []*ecdsa.PrivateKey
	sess   []*contracts.Session
	addrs  []common.Address
	closed bool
	// hold, when set, is the Deps.Hold of the next start.
	hold func(ctx context.Context, name string, job func(ctx context.Context))
}

// testChainConfig is a chain's config with test-sized intervals: every block indexed at once.
func testChainConfig(chainID uint64) ChainConfig {
	zero := uint64(0)
	c := Config{Chains: []ChainConfig{{ChainID: chainID, Confirmations: &zero, PollInterval: 20 * time.Millisecond,
		ProgressLogInterval: time.Second, RequestTimeout: 10 * time.Second}}}
	c.SetDefaults()
	return c.Chains[0]
}

// newEnv prepares the indexing of node with cfg (nil: testChainConfig) on a new store, and
// sessions for dev accounts 0-3 (funded on the dev chain; a test on anvil funds them). start
// starts the Service.
func newEnv(t *testing.T, node *chainNode, cfg *ChainConfig) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, node: node}
	uc := upstreams.Config{Mainnet: node.chainID, Chains: []upstreams.ChainConfig{{ChainID: node.chainID, URLs: []string{node.url}}}}
	deps := upstreams.Deps{}
	if node.embedded != nil {
		deps.Embedded = map[uint64]http.Handler{node.chainID: node.embedded}
	}
	ups, err := upstreams.New(uc, deps)
	if err != nil {
		t.Fatal(err)
	}
	ups.Start(ctx)
	t.Cleanup(ups.Close)
	e.ups, e.chains = ups, uc.Chains

	sc := store.Config{Path: filepath.Join(t.TempDir(), "web3gate.db")}
	sc.SetDefaults()
	if e.db, err = store.Open(ctx, sc, store.Deps{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.db.Close() })
	mc := metadata.Config{}
	mc.SetDefaults()
	if e.md, err = metadata.New(mc, metadata.Deps{Chain: func(id uint64) (metadata.Chain, bool) {
		p, ok := ups.Pool(id)
		return p, ok
	}, DB: e.db}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.md.Close)

	if cfg == nil {
		c := testChainConfig(node.chainID)
		cfg = &c
	}
	e.cfg = *cfg
	accounts, err := devchain.DevAccounts(4)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range accounts {
		e.keys = append(e.keys, a.Key)
		e.addrs = append(e.addrs, a.Address)
		e.sess = append(e.sess, &contracts.Session{Client: node.client, Key: a.Key, ChainID: new(big.Int).SetUint64(node.chainID)})
	}
	return e
}

// start starts a Service on the env's store (a new one after stop: a restart).
func (e *env) start() {
	e.t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	e.logs, e.reg = logs, prometheus.NewRegistry()
	cfg := Config{Chains: []ChainConfig{e.cfg}}
	cfg.SetDefaults()
	if err := cfg.Validate(e.chains); err != nil {
		e.t.Fatal(err)
	}
	var tokens TokenSource = e.md
	if e.tokens != nil {
		tokens = e.tokens
	}
	svc, err := New(cfg, Deps{
		Chain: func(id uint64) (Chain, bool) {
			p, ok := e.ups.Pool(id)
			return p, ok
		},
		DB: e.db, Tokens: tokens, Registry: e.reg, Logger: zap.New(core), Hold: e.hold,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.svc, e.closed = svc, false
	svc.Start()
	e.t.Cleanup(e.stop)
}

// serve serves the Service's route on a real proxy server on loopback and returns its base URL.
func (e *env) serve() string {
	e.t.Helper()
	var sc proxy.Config
	sc.SetDefaults()
	srv, err := proxy.New(sc, proxy.Deps{Logger: zap.NewNop(), Registry: prometheus.NewRegistry(), Routes: []*proxy.Route{
		{Name: "owners", Method: http.MethodGet, Pattern: "/v1/owners", REST: e.svc.Handler()},
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

func (e *env) stop() {
	if !e.closed {
		e.closed = true
		e.svc.Close()
	}
}

// transact sends method of contract c at to, signed by account i, and returns its block.
func (e *env) transact(i int, c *contracts.Contract, to common.Address, method string, args ...any) uint64 {
	e.t.Helper()
	r, err := e.sess[i].Transact(e.ctx, to, c, method, args...)
	if err != nil {
		e.t.Fatalf("%s.%s: %v", c.Name, method, err)
	}
	return r.BlockNumber.Uint64()
}

func (e *env) deploy(c *contracts.Contract, args ...any) common.Address {
	e.t.Helper()
	addr, err := e.sess[0].Deploy(e.ctx, c, args...)
	if err != nil {
		e.t.Fatalf("deploy %s: %v", c.Name, err)
	}
	return addr
}

// progress is the stored progress, nil when none.
func (e *env) progress() *store.NFTIndexProgress {
	e.t.Helper()
	var p *store.NFTIndexProgress
	err := e.db.Read(e.ctx, func(tx *store.DBTx) error {
		var err error
		p, err = tx.NFTIndexProgress(e.ctx, e.node.chainID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// waitIndexed waits until the index holds the chain's current head block, by hash.
func (e *env) waitIndexed() uint64 {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		head, err := e.node.client.HeaderByNumber(e.ctx, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		if p := e.progress(); p != nil && p.Block == head.Number.Uint64() && p.Hash == head.Hash() {
			return p.Block
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the index did not reach head %d (%s) within 30s; progress %+v", head.Number, head.Hash(), e.progress())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tracked is what a test has done on chain, to check the index against: the ERC721 token
// ids and the ERC1155 ids of each contract, the accounts that may hold them, the contracts
// that must have no rows, and the mints each contract must count.
type tracked struct {
	erc721  map[common.Address][]*big.Int
	erc1155 map[common.Address][]*big.Int
	holders []common.Address
	none    []common.Address
	minted  map[common.Address]int64
}

func newTracked(holders []common.Address) *tracked {
	return &tracked{erc721: map[common.Address][]*big.Int{}, erc1155: map[common.Address][]*big.Int{},
		holders: holders, minted: map[common.Address]int64{}}
}

func (tr *tracked) addID(m map[common.Address][]*big.Int, c common.Address, id *big.Int) {
	if !slices.ContainsFunc(m[c], func(x *big.Int) bool { return x.Cmp(id) == 0 }) {
		m[c] = append(m[c], id)
	}
}

var (
	erc721C  = contracts.MustLoad("TestERC721")
	erc1155C = contracts.MustLoad("TestERC1155")
	erc20C   = contracts.MustLoad("TestERC20")
)

// row is a balance as the checks compare them.
type row struct {
	contract, owner common.Address
	id, amount      string
	std             int
}

func (r row) String() string {
	return fmt.Sprintf("%s/%s/%s=%s(%d)", r.contract.Hex()[:8], r.id, r.owner.Hex()[:8], r.amount, r.std)
}

// check waits for the index to hold the head, then compares every stored balance of the
// chain with ownerOf and balanceOf read from the chain at that block, and nft_minted with
// the mints the test made: every row the chain implies is stored, and nothing else is.
func (e *env) check(tr *tracked) {
	e.t.Helper()
	e.waitIndexed()
	var want []row
	call := func(c *contracts.Contract, to common.Address, method string, args ...any) ([]any, error) {
		return e.sess[0].Call(e.ctx, to, c, method, args...)
	}
	for c, ids := range tr.erc721 {
		for _, id := range ids {
			out, err := call(erc721C, c, "ownerOf", id)
			if err != nil {
				if !strings.Contains(err.Error(), "ERC721NonexistentToken") {
					e.t.Fatalf("ownerOf(%s) at %s: %v", id, c, err)
				}
				continue // burned
			}
			want = append(want, row{c, out[0].(common.Address), id.String(), "1", store.StandardERC721})
		}
	}
	for c, ids := range tr.erc1155 {
		for _, id := range ids {
			for _, h := range tr.holders {
				out, err := call(erc1155C, c, "balanceOf", h, id)
				if err != nil {
					e.t.Fatalf("balanceOf(%s, %s) at %s: %v", h, id, c, err)
				}
				if n := out[0].(*big.Int); n.Sign() > 0 {
					want = append(want, row{c, h, id.String(), n.String(), store.StandardERC1155})
				}
			}
		}
	}
	var got []row
	total := 0
	err := e.db.Read(e.ctx, func(tx *store.DBTx) error {
		for _, c := range append(slices.Collect(mapKeys(tr.erc721, tr.erc1155)), tr.none...) {
			rows, err := tx.NFTBalancesPage(e.ctx, e.node.chainID, c, nil, nil, 100000, nil)
			if err != nil {
				return err
			}
			for _, r := range rows {
				got = append(got, row{r.Contract, r.Owner, r.ID.Dec(), r.Amount.Dec(), r.Standard})
			}
		}
		return tx.QueryRowContext(e.ctx, `SELECT COUNT(*) FROM nft_balances WHERE chain_id = ?`, int64(e.node.chainID)).Scan(&total)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	key := func(r row) string { return fmt.Sprintf("%s/%s/%s", r.contract.Hex(), r.id, r.owner.Hex()) }
	slices.SortFunc(want, func(a, b row) int { return strings.Compare(key(a), key(b)) })
	slices.SortFunc(got, func(a, b row) int { return strings.Compare(key(a), key(b)) })
	if !slices.Equal(got, want) || total != len(want) {
		e.t.Fatalf("index (%d rows in the chain's table) differs from the chain:\n got  %v\n want %v", total, got, want)
	}
	err = e.db.Read(e.ctx, func(tx *store.DBTx) error {
		for _, c := range append(slices.Collect(mapKeys(tr.erc721, tr.erc1155)), tr.none...) {
			n, ok, err := tx.NFTMinted(e.ctx, e.node.chainID, c)
			if err != nil {
				return err
			}
			if want, has := tr.minted[c]; n != want || ok != has {
				e.t.Errorf("nft_minted of %s = %d (row %v), want %d (row %v)", c, n, ok, want, has)
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func mapKeys(ms ...map[common.Address][]*big.Int) func(func(common.Address) bool) {
	return func(yield func(common.Address) bool) {
		seen := map[common.Address]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}

// counter is the value of a counter of the env's registry, 0 when it has none yet.
func (e *env) counter(name string, labels map[string]string) float64 {
	e.t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// logsSeen are the messages the Service logged.
func (e *env) logsSeen() []string {
	var out []string
	for _, l := range e.logs.All() {
		out = append(out, l.Message)
	}
	return out
}
