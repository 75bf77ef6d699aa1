package metadata

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/devchain"
	"github.com/web3gate/web3gate/devchain/devchaintest"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/upstreams"
)

// clock is the Service's time in tests: real time plus an offset the test advances.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

// docServer is a real HTTP server on 127.0.0.1 serving documents a test sets per path,
// counting the requests of each path.
type docServer struct {
	srv *httptest.Server

	mu     sync.Mutex
	docs   map[string]doc
	counts map[string]int
}

type doc struct {
	status int           // 0: 200
	body   string        // served as is
	delay  time.Duration // before answering
}

func newDocServer(t *testing.T) *docServer {
	t.Helper()
	d := &docServer{docs: map[string]doc{}, counts: map[string]int{}}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.counts[r.URL.Path]++
		dc, ok := d.docs[r.URL.Path]
		d.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		if dc.delay > 0 {
			select {
			case <-time.After(dc.delay):
			case <-r.Context().Done():
				return
			}
		}
		if dc.status != 0 {
			w.WriteHeader(dc.status)
		}
		fmt.Fprint(w, dc.body)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *docServer) set(path string, dc doc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.docs[path] = dc
}

func (d *docServer) count(path string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counts[path]
}

func (d *docServer) url(path string) string { return d.srv.URL + path }

// countingChain counts the batches sent to a chain.
type countingChain struct {
	Chain
	n *atomic.Int64
}

func (c countingChain) ForwardBatch(ctx context.Context, calls []upstreams.BatchCall) ([]upstreams.BatchResult, error) {
	c.n.Add(1)
	return c.Chain.ForwardBatch(ctx, calls)
}

// env is a Service on a real embedded dev chain (through a real upstream pool), a SQLite
// store, a document server and an IPFS gateway stand-in on loopback, and a session that
// deploys and drives the test contracts.
type env struct {
	t       *testing.T
	ctx     context.Context
	svc     *Service
	cfg     Config
	sess    *contracts.Session
	me      common.Address
	clock   *clock
	docs    *docServer
	gateway *docServer
	batches atomic.Int64
	chainID uint64
	// pool is the dev chain's upstream pool, for Services besides svc.
	pool func(uint64) (Chain, bool)
}

func newEnv(t *testing.T, mutate func(*Config)) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, clock: &clock{}, docs: newDocServer(t), gateway: newDocServer(t)}

	chain := devchaintest.Start(t)
	e.chainID = chain.ChainID()
	ups, err := upstreams.New(upstreams.Config{
		Mainnet: e.chainID,
		Chains:  []upstreams.ChainConfig{{ChainID: e.chainID, URLs: []string{"embedded"}}},
	}, upstreams.Deps{Embedded: map[uint64]http.Handler{e.chainID: chain.Handler()}})
	if err != nil {
		t.Fatal(err)
	}
	ups.Start(ctx)
	t.Cleanup(ups.Close)
	e.pool = func(id uint64) (Chain, bool) {
		p, ok := ups.Pool(id)
		if !ok {
			return nil, false
		}
		return p, true
	}
	for ups.Ready() != nil {
		if ctx.Err() != nil {
			t.Fatal("upstream pool never became ready")
		}
		time.Sleep(10 * time.Millisecond)
	}

	sc := store.Config{Path: filepath.Join(t.TempDir(), "web3gate.db")}
	sc.SetDefaults()
	db, err := store.Open(ctx, sc, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })

	e.cfg.IPFSGateways = []string{e.gateway.url("/ipfs/")}
	e.cfg.Fetcher.AllowNetworks = []string{"127.0.0.0/8"}
	e.cfg.Fetcher.Timeout = 2 * time.Second
	if mutate != nil {
		mutate(&e.cfg)
	}
	e.cfg.SetDefaults()
	if err := e.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e.svc, err = New(e.cfg, Deps{
		Chain: func(id uint64) (Chain, bool) {
			p, ok := ups.Pool(id)
			if !ok {
				return nil, false
			}
			return countingChain{Chain: p, n: &e.batches}, true
		},
		DB:  db,
		Now: e.clock.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.svc.Close)

	client := chain.Client
	accounts, err := devchain.DevAccounts(1)
	if err != nil {
		t.Fatal(err)
	}
	e.sess = &contracts.Session{Client: client, Key: accounts[0].Key, ChainID: new(big.Int).SetUint64(e.chainID)}
	e.me = crypto.PubkeyToAddress(accounts[0].Key.PublicKey)
	return e
}

func (e *env) deploy(name string, args ...any) common.Address {
	e.t.Helper()
	addr, err := e.sess.Deploy(e.ctx, contracts.MustLoad(name), args...)
	if err != nil {
		e.t.Fatalf("deploy %s: %v", name, err)
	}
	return addr
}

func (e *env) transact(to common.Address, name, method string, args ...any) {
	e.t.Helper()
	if _, err := e.sess.Transact(e.ctx, to, contracts.MustLoad(name), method, args...); err != nil {
		e.t.Fatalf("%s.%s: %v", name, method, err)
	}
}

// nft deploys a TestERC721 and mints token id with tokenURI uri (none when empty).
func (e *env) nft(id int64, uri string) common.Address {
	e.t.Helper()
	addr := e.deploy("TestERC721", "Test NFT", "TNFT")
	e.mint(addr, id, uri)
	return addr
}

func (e *env) mint(addr common.Address, id int64, uri string) {
	e.t.Helper()
	e.transact(addr, "TestERC721", "mint", e.me, big.NewInt(id))
	if uri != "" {
		e.transact(addr, "TestERC721", "setTokenURI", big.NewInt(id), uri)
	}
}

// token looks a token up through the Service and decodes the Token object.
func (e *env) token(addr common.Address, id int64, force bool) (Token, error) {
	e.t.Helper()
	body, err := e.svc.Token(e.ctx, e.chainID, addr, big.NewInt(id), force)
	if err != nil {
		return Token{}, err
	}
	var tok Token
	if err := json.Unmarshal(body, &tok); err != nil {
		e.t.Fatalf("token body %s: %v", body, err)
	}
	return tok, nil
}

// mustToken is token that fails the test on an error.
func (e *env) mustToken(addr common.Address, id int64, force bool) Token {
	e.t.Helper()
	tok, err := e.token(addr, id, force)
	if err != nil {
		e.t.Fatalf("token %s/%d: %v", addr.Hex(), id, err)
	}
	return tok
}

func (e *env) contract(addr common.Address, force bool) (Contract, error) {
	e.t.Helper()
	body, err := e.svc.Contract(e.ctx, e.chainID, addr, force)
	if err != nil {
		return Contract{}, err
	}
	var c Contract
	if err := json.Unmarshal(body, &c); err != nil {
		e.t.Fatalf("contract body %s: %v", body, err)
	}
	return c, nil
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
