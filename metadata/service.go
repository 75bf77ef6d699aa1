package metadata

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/web3gate/web3gate/internal/lazycache"
	"github.com/web3gate/web3gate/internal/redisx"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// Deps are the Service's collaborators.
type Deps struct {
	// Chain returns the upstream pool of a configured chain.
	Chain    func(chainID uint64) (Chain, bool)
	DB       *store.DB
	Registry prometheus.Registerer
	Logger   *zap.Logger
	Now      func() time.Time // nil: time.Now
	// Redis is the second level, shared by the replicas, between memory and the store; nil:
	// none.
	Redis *redisx.Client
	// Shared reports whether a chain's records go to Redis: false for a chain only this
	// process serves (the embedded dev chain). nil: every chain.
	Shared func(chainID uint64) bool
}

// Service answers the /v1/tokens routes: chain reads through the upstream pools, documents
// through the resolver, records kept in memory and in the store.
type Service struct {
	cfg      Config
	chain    func(uint64) (Chain, bool)
	db       *store.DB
	resolver *Resolver
	fetcher  *Fetcher
	mem      *lazycache.Cache[string, *entry] // built at the first record kept
	redis    *redisx.Client                   // nil: no shared level
	shared   func(uint64) bool
	flight   singleflight.Group
	log      *zap.Logger
	now      func() time.Time
	metrics  *metrics

	bgCtx  context.Context // background refreshes
	bgStop context.CancelFunc
	bgWG   sync.WaitGroup
	bgSem  chan struct{} // bounds background refreshes in flight
}

// entry is a record as served: the member object and when it was fetched; or, with miss
// set, a negative answer (a 404) and when the chain said so. Negative entries live in
// memory only, for Config.NegativeTTL.
type entry struct {
	body     []byte // Token or Contract, JSON
	doc      []byte // the route's whole answer: {"token"|"contract": body, "error": null}
	updated  time.Time
	failures int   // fetches in a row whose document could not be had
	miss     error // errNoContract, errNotNFT or errNoToken; nil for a record
}

// New returns a Service; Close stops its background refreshes.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.Chain == nil || deps.DB == nil {
		return nil, errors.New("metadata: Chain and DB are required")
	}
	fetcher, err := NewFetcher(cfg.Fetcher)
	if err != nil {
		return nil, err
	}
	mem, err := lazycache.New(&ristretto.Config[string, *entry]{
		NumCounters: max(cfg.CacheBytes/100, 1000), // ~10x the records expected at ~1 KiB each
		MaxCost:     cfg.CacheBytes,
		BufferItems: 64,
	})
	if err != nil {
		return nil, err
	}
	s := &Service{
		cfg:      cfg,
		chain:    deps.Chain,
		db:       deps.DB,
		resolver: NewResolver(fetcher, cfg.IPFSGateways, cfg.ArweaveGateway, cfg.Fetcher.MaxBytes),
		fetcher:  fetcher,
		mem:      mem,
		redis:    deps.Redis,
		shared:   deps.Shared,
		log:      deps.Logger,
		now:      deps.Now,
		metrics:  newMetrics(deps.Registry),
		bgSem:    make(chan struct{}, 8),
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.shared == nil {
		s.shared = func(uint64) bool { return true }
	}
	s.bgCtx, s.bgStop = context.WithCancel(context.Background())
	return s, nil
}

// Close stops background refreshes, waits for them, and frees the memory cache.
func (s *Service) Close() {
	s.bgStop()
	s.bgWG.Wait()
	s.mem.Close()
	s.fetcher.CloseIdleConnections()
}

// ForgetChain drops every record of chainID, from the store and Redis (memory holds none
// yet: it is called at start). It is called for a chain that started over (a new genesis;
// the embedded dev chain at every start): the records of the previous chain describe
// contracts that no longer exist. Redis failing is logged, not returned: its entries expire.
func (s *Service) ForgetChain(ctx context.Context, chainID uint64) error {
	var n int64
	err := s.db.Write(ctx, func(tx *store.DBTx) error {
		var err error
		n, err = tx.DeleteChainMetadata(ctx, chainID)
		return err
	})
	if err == nil && n > 0 {
		s.log.Info("dropped the metadata records of the chain's previous genesis", zap.Uint64("chain", chainID), zap.Int64("records", n))
	}
	if err == nil && s.redis != nil && s.shared(chainID) {
		pattern := s.redis.KeyPrefix() + "md:" + strconv.FormatUint(chainID, 10) + "/*"
		if k, rerr := s.redis.DeleteMatching(ctx, pattern); rerr != nil {
			s.log.Warn("the chain's metadata records in Redis were not all dropped; they expire after redis.maxTtl",
				zap.Uint64("chain", chainID), zap.Int("dropped", k), zap.String("error", rerr.Error()))
		} else if k > 0 {
			s.log.Info("dropped the metadata records of the chain's previous genesis from Redis", zap.Uint64("chain", chainID), zap.Int("records", k))
		}
	}
	return err
}

// item is what a record is about: a contract, or one token of it (id not nil).
type item struct {
	chainID uint64
	addr    common.Address
	id      *big.Int
}

func (it item) tokenKey() string {
	if it.id == nil {
		return ""
	}
	return hexID(it.id)
}

// key is the item's cache key, "<chain>/<address hex>[/<id hex>]" (no EIP-55 checksum: it
// costs a keccak on the hot path).
func (it item) key() string {
	b := make([]byte, 0, 24+40+2+64)
	b = strconv.AppendUint(b, it.chainID, 10)
	b = append(b, '/')
	b = hex.AppendEncode(b, it.addr[:])
	if it.id != nil {
		b = append(b, '/')
		b = it.id.Append(b, 16)
	}
	return string(b)
}

// contractKey is the cache key of the item's contract: the key of the contract route's
// record, and of its "no contract" answer.
func (it item) contractKey() string { return item{chainID: it.chainID, addr: it.addr}.key() }

// addressKey is the key of what the token route learned of the address itself ("no
// contract", "not an NFT contract"): it answers every token id of the address. "/-" cannot
// be a token key (ids are hex).
func (it item) addressKey() string { return it.contractKey() + "/-" }

// kind is the item's route: the member of its answer and its metrics label.
func (it item) kind() string {
	if it.id == nil {
		return "contract"
	}
	return "token"
}

// newEntry is the entry of a record whose object is body.
func newEntry(it item, body []byte, updated time.Time, failures int) *entry {
	doc := make([]byte, 0, len(body)+32)
	doc = append(doc, `{"`...)
	doc = append(doc, it.kind()...)
	doc = append(doc, `":`...)
	doc = append(doc, body...)
	doc = append(doc, `,"error":null}`...)
	return &entry{body: body, doc: doc, updated: updated, failures: failures}
}

// Errors that answer 404.
var (
	errNoContract = proxy.Errorf(http.StatusNotFound, "no contract at this address")
	errNotNFT     = proxy.Errorf(http.StatusNotFound, "the contract is not an ERC721 or ERC1155 token contract")
	errNoToken    = proxy.Errorf(http.StatusNotFound, "token does not exist")
)

// Token returns the Token object (JSON) of token id of contract addr on chainID, as the
// token route serves it; force is forceRefresh.
func (s *Service) Token(ctx context.Context, chainID uint64, addr common.Address, id *big.Int, force bool) ([]byte, error) {
	e, err := s.get(ctx, item{chainID: chainID, addr: addr, id: id}, force)
	if err != nil {
		return nil, err
	}
	return e.body, nil
}

// Contract returns the Contract object (JSON) of addr on chainID.
func (s *Service) Contract(ctx context.Context, chainID uint64, addr common.Address, force bool) ([]byte, error) {
	e, err := s.get(ctx, item{chainID: chainID, addr: addr}, force)
	if err != nil {
		return nil, err
	}
	return e.body, nil
}

// get serves a record: from memory or the store, refreshed when asked (outside the
// cooldown), when its document failed and the backoff has passed, or (in the background)
// when it is older than maxAge; a miss is fetched live. A 404 the chain gave within
// negativeTtl answers again without a chain read, unless forceRefresh asks to re-check.
// Concurrent fetches of one item share one.
func (s *Service) get(ctx context.Context, it item, force bool) (*entry, error) {
	if _, ok := s.chain(it.chainID); !ok {
		return nil, proxy.Errorf(http.StatusNotFound, "chain %d is not configured", it.chainID)
	}
	key := it.key()
	kind := it.kind()
	e, ok := s.mem.Get(key)
	if !ok || e.miss != nil {
		if !force {
			if err := s.negative(it, key, e); err != nil {
				s.metrics.lookup(kind, "negative")
				return nil, err
			}
		}
		var err error
		if e, err = s.stored(ctx, it, key); err != nil {
			return nil, err
		}
	}
	if e != nil {
		age := s.now().Sub(e.updated)
		switch {
		case force && age < s.cfg.RefreshCooldown:
			s.metrics.lookup(kind, "cooldown")
			return e, nil
		case force:
			s.metrics.lookup(kind, "refresh")
		case e.failures > 0 && age >= s.backoff(e.failures):
			s.metrics.lookup(kind, "retry")
		case e.failures == 0 && age >= s.cfg.MaxAge:
			s.metrics.lookup(kind, "stale")
			s.refreshLater(it, key, e)
			return e, nil
		default:
			s.metrics.lookup(kind, "hit")
			return e, nil
		}
	} else {
		s.metrics.lookup(kind, "miss")
	}
	return s.refresh(ctx, it, key, e, force)
}

// negative returns the 404 that answers it without a chain read: a negative entry of its
// own (e, when the caller has it, else looked up), or for a token, the contract route's "no
// contract" or what an earlier token lookup learned of the address; each only within
// negativeTtl of when the chain said so. nil: none.
func (s *Service) negative(it item, key string, e *entry) error {
	now := s.now()
	fresh := func(e *entry) error {
		if e != nil && e.miss != nil && now.Sub(e.updated) < s.cfg.NegativeTTL {
			return e.miss
		}
		return nil
	}
	if e == nil {
		e, _ = s.mem.Get(key)
	}
	if err := fresh(e); err != nil || it.id == nil {
		return err
	}
	ce, _ := s.mem.Get(it.contractKey())
	if err := fresh(ce); err != nil {
		return err
	}
	ae, _ := s.mem.Get(it.addressKey())
	return fresh(ae)
}

// remember keeps the 404 err of it in memory for negativeTtl, under the key it is an answer
// for: the address's for "no contract" and "not an NFT contract" found by the token route,
// else the item's.
func (s *Service) remember(it item, key string, err error, now time.Time) {
	if it.id != nil && (errors.Is(err, errNoContract) || errors.Is(err, errNotNFT)) {
		key = it.addressKey()
	}
	e := &entry{updated: now, miss: err}
	s.mem.SetWithTTL(key, e, e.cost(key), s.cfg.NegativeTTL)
	s.mem.Wait()
}

// cost is the memory an entry takes in the cache, roughly.
func (e *entry) cost(key string) int64 { return int64(len(e.body) + len(e.doc) + len(key) + 96) }

// backoff is how long a record whose document failed n times in a row is served before the
// next try.
func (s *Service) backoff(n int) time.Duration {
	d := s.cfg.FailureBackoff
	for i := 1; i < n && d < s.cfg.MaxFailureBackoff; i++ {
		d *= 2
	}
	return min(d, s.cfg.MaxFailureBackoff)
}

// stored returns the record of it from Redis or else the store (then kept in memory, and a
// record from the store in Redis too), else nil.
func (s *Service) stored(ctx context.Context, it item, key string) (*entry, error) {
	shared := s.redis != nil && s.shared(it.chainID)
	if shared {
		if e := s.sharedGet(it, key); e != nil {
			s.mem.Set(key, e, e.cost(key))
			return e, nil
		}
	}
	var rec *store.MetadataRecord
	err := s.db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		rec, err = tx.Metadata(ctx, it.chainID, it.addr, it.tokenKey())
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	e := newEntry(it, rec.Body, rec.UpdatedAt, rec.Failures)
	s.mem.Set(key, e, e.cost(key))
	if shared {
		s.sharedSet(it, key, e)
	}
	return e, nil
}

// refresh fetches it anew (one fetch for all concurrent callers) and records the result.
// When the chain cannot be read, the previous record (if any) is served. A forced refresh
// shares its fetch only with other forced ones: it must not be answered by a fetch that
// started before it, nor by a negative answer that such a fetch left.
func (s *Service) refresh(ctx context.Context, it item, key string, prev *entry, force bool) (*entry, error) {
	fkey := key
	if force {
		fkey += "!"
	}
	v, err, _ := s.flight.Do(fkey, func() (any, error) {
		if !force {
			// A fetch that ended since this caller looked may have left a 404.
			if err := s.negative(it, key, nil); err != nil {
				return nil, err
			}
		}
		return s.fetch(context.WithoutCancel(ctx), it, key, prev)
	})
	if err != nil {
		var je *jsonrpc.Error
		if prev != nil && errors.As(err, &je) {
			s.log.Warn("metadata refresh failed; serving the previous record",
				zap.String("item", key), zap.Error(err))
			return prev, nil
		}
		return nil, err
	}
	return v.(*entry), nil
}

// refreshLater refreshes a stale record in the background, unless enough refreshes are in
// flight already (a later request tries again).
func (s *Service) refreshLater(it item, key string, prev *entry) {
	select {
	case s.bgSem <- struct{}{}:
	default:
		return
	}
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		defer func() { <-s.bgSem }()
		if _, err := s.refresh(s.bgCtx, it, key, prev, false); err != nil && s.bgCtx.Err() == nil {
			s.log.Info("background metadata refresh failed", zap.String("item", key), zap.Error(err))
		}
	}()
}

// fetch reads the chain and the document of it, and stores the record. A 404 (no contract,
// not an NFT contract, no such token) removes the record and is remembered for negativeTtl.
func (s *Service) fetch(ctx context.Context, it item, key string, prev *entry) (*entry, error) {
	chain, ok := s.chain(it.chainID)
	if !ok {
		return nil, proxy.Errorf(http.StatusNotFound, "chain %d is not configured", it.chainID)
	}
	now := s.now()
	var (
		body   []byte
		docErr error
		err    error
	)
	if it.id != nil {
		body, docErr, err = s.fetchToken(ctx, chain, it, now)
	} else {
		body, docErr, err = s.fetchContract(ctx, chain, it, now)
	}
	var he *proxy.HTTPError
	if errors.As(err, &he) && he.Status == http.StatusNotFound {
		if prev != nil {
			s.forget(ctx, it, key)
		}
		s.remember(it, key, err, now)
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	failures := 0
	if docErr != nil {
		s.metrics.fetched("failed")
		failures = 1
		if prev != nil {
			failures = prev.failures + 1
		}
	} else {
		s.metrics.fetched("ok")
	}
	e := newEntry(it, body, now, failures)
	rec := &store.MetadataRecord{ChainID: it.chainID, Address: it.addr, TokenID: it.tokenKey(),
		Body: body, Failures: e.failures, UpdatedAt: now}
	if err := s.db.Write(ctx, func(tx *store.DBTx) error { return tx.PutMetadata(ctx, rec) }); err != nil {
		return nil, err
	}
	s.mem.Set(key, e, e.cost(key))
	if s.redis != nil && s.shared(it.chainID) {
		s.sharedSet(it, key, e)
	}
	if it.id != nil {
		s.mem.Del(it.addressKey()) // the address holds this token: whatever 404 it had is over
	}
	s.mem.Wait()
	return e, nil
}

// forget removes the record of it, from memory and the store.
func (s *Service) forget(ctx context.Context, it item, key string) {
	s.mem.Del(key)
	err := s.db.Write(ctx, func(tx *store.DBTx) error {
		return tx.DeleteMetadata(ctx, it.chainID, it.addr, it.tokenKey())
	})
	if err != nil {
		s.log.Warn("forget metadata record", zap.String("item", key), zap.Error(err))
	}
	if s.redis != nil && s.shared(it.chainID) {
		s.redis.Del(s.redisKey(key))
	}
}

// fetchToken builds the Token object of it. docErr is the reason its document is missing
// (the object then carries it in metadataError); err fails the request.
func (s *Service) fetchToken(ctx context.Context, chain Chain, it item, now time.Time) (body []byte, docErr, err error) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.ChainTimeout)
	reads, err := readToken(cctx, chain, it.addr, it.id)
	cancel()
	if err != nil {
		return nil, nil, err
	}
	switch {
	case reads.tokenType == "":
		return nil, nil, errNotNFT
	case !reads.exists:
		return nil, nil, errNoToken
	}
	t := Token{
		CoinType: CoinTypeEVM, ChainID: it.chainID, ContractAddress: strings.ToLower(it.addr.Hex()),
		ID: hexID(it.id), TokenType: reads.tokenType, Metadata: EmptyTokenMetadata(), TimeLastUpdated: timeString(now),
	}
	if !reads.hasURI {
		docErr = &FetchError{Reason: "the contract has no token URI"}
	} else {
		t.TokenURI = ptr(reads.uri)
		var doc []byte
		if doc, docErr = s.resolver.Resolve(ctx, reads.uri); docErr == nil {
			if t.Metadata, docErr = NormalizeToken(doc); docErr == nil {
				t.RawMetadata = compactJSON(doc)
			} else {
				t.Metadata = EmptyTokenMetadata()
			}
		}
	}
	if docErr != nil {
		t.MetadataError = ptr(reason(docErr))
	}
	body, err = json.Marshal(t)
	return body, docErr, err
}

// fetchContract builds the Contract object of it.
func (s *Service) fetchContract(ctx context.Context, chain Chain, it item, now time.Time) (body []byte, docErr, err error) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.ChainTimeout)
	reads, err := readContract(cctx, chain, it.addr)
	cancel()
	if err != nil {
		return nil, nil, err
	}
	c := Contract{
		CoinType: CoinTypeEVM, ChainID: it.chainID, Address: strings.ToLower(it.addr.Hex()),
		TokenType: reads.tokenType, Name: reads.name, Symbol: reads.symbol, Decimals: reads.decimals,
		TimeLastUpdated: timeString(now),
	}
	if reads.totalSupply != nil {
		c.TotalSupply = ptr(reads.totalSupply.String())
	}
	if reads.contractURI != "" {
		c.ContractURI = ptr(reads.contractURI)
		var doc []byte
		if doc, docErr = s.resolver.Resolve(ctx, reads.contractURI); docErr == nil {
			var m ContractMetadata
			if m, docErr = NormalizeContract(doc); docErr == nil {
				c.Metadata = &m
			}
		}
		if docErr != nil {
			c.MetadataError = ptr(reason(docErr))
		}
	}
	body, err = json.Marshal(c)
	return body, docErr, err
}

// reason is the text of a document failure as callers see it: a FetchError's reason, never
// anything fetched or internal.
func reason(err error) string {
	var fe *FetchError
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return "not a JSON document"
}
