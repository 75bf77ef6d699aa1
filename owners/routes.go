package owners

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/web3gate/web3gate/metadata"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// Limits of GET /v1/owners.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	// MaxQueryContracts is the most contracts one request may name.
	MaxQueryContracts = 100
	// DefaultChainID is the chain of a request without chainId.
	DefaultChainID = 1
	// IndexedBlockHeader carries the last indexed block of the chain on every 200 answer.
	IndexedBlockHeader = "X-Indexed-Block"
)

// query is a parsed GET /v1/owners.
type query struct {
	chainID    uint64
	ix         *indexer
	contracts  []common.Address // sorted, distinct
	id         *uint256.Int     // nil: every token
	limit      int
	after      *store.NFTBalanceKey // from pageKey
	withTokens bool
}

// Handler serves GET /v1/owners.
func (s *Service) Handler() proxy.RESTHandler {
	return proxy.RESTHandlerFunc(func(r *proxy.RESTRequest) (*proxy.RESTResponse, error) {
		q, err := s.parse(r)
		if err != nil {
			return nil, err
		}
		rows, indexed, next, err := s.page(r.Ctx, q)
		if err != nil {
			return nil, err
		}
		var tokens map[store.NFTToken][]byte
		if q.withTokens {
			tokens = s.tokenObjects(r.Ctx, q.chainID, rows)
		}
		return &proxy.RESTResponse{
			Body:   render(q.chainID, rows, tokens, next),
			Header: map[string]string{IndexedBlockHeader: strconv.FormatUint(indexed, 10)},
		}, nil
	})
}

func badRequest(format string, args ...any) error {
	return proxy.Errorf(http.StatusBadRequest, format, args...)
}

// parse reads the query string. Every problem is a 400 naming its parameter; a chain not
// indexed, or a contract outside a chain's configured list, is a 404.
func (s *Service) parse(r *proxy.RESTRequest) (*query, error) {
	q := &query{chainID: DefaultChainID, limit: DefaultLimit}
	if v, ok := r.Query("chainId"); ok {
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil || id == 0 {
			return nil, badRequest("chainId: must be a positive decimal EIP-155 chain id")
		}
		q.chainID = id
	}
	raw := append(r.QueryList("contractAddresses"), r.QueryList("contractAddress")...)
	if len(raw) == 0 {
		return nil, badRequest("contractAddresses: at least one contract address is required (contractAddresses or contractAddress)")
	}
	if len(raw) > MaxQueryContracts {
		return nil, badRequest("contractAddresses: at most %d contracts", MaxQueryContracts)
	}
	for _, v := range raw {
		a, err := metadata.ParseAddress(v)
		if err != nil {
			return nil, badRequest("contractAddresses: %q: %v", clip(v), err)
		}
		if !slices.Contains(q.contracts, a) {
			q.contracts = append(q.contracts, a)
		}
	}
	slices.SortFunc(q.contracts, func(a, b common.Address) int { return a.Cmp(b) })
	if v, ok := r.Query("tokenId"); ok {
		id, err := metadata.ParseTokenID(v)
		if err != nil {
			return nil, badRequest("tokenId: %v", err)
		}
		q.id, _ = uint256.FromBig(id) // at most 256 bits
	}
	if v, ok := r.Query("limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			return nil, badRequest("limit: must be an integer from 1 to %d", MaxLimit)
		}
		q.limit = n
	}
	nfts, _, err := proxy.QueryBool(r, "nfts")
	if err != nil {
		return nil, err
	}
	fetch, _, err := proxy.QueryBool(r, "fetchNftMetadata")
	if err != nil {
		return nil, err
	}
	if fetch && !nfts {
		return nil, badRequest("fetchNftMetadata: token metadata comes with nfts=true&fetchNftMetadata=true; add nfts=true")
	}
	q.withTokens = nfts && fetch
	if v, ok := r.Query("pageKey"); ok && v != "" {
		k, digest, err := decodePageKey(v)
		if err != nil {
			return nil, badRequest("pageKey: %v", err)
		}
		// The digest binds the key to its query; the rest guards page against a forged one.
		if digest != q.digest() || !slices.Contains(q.contracts, k.Contract) || (q.id != nil && !k.ID.Eq(q.id)) {
			return nil, badRequest("pageKey: it belongs to another query (other chainId, contracts or tokenId); start again without it")
		}
		q.after = &k
	}
	// The chain last: a request that is wrong in itself is 400 on any chain.
	q.ix = s.indexers[q.chainID]
	if q.ix == nil {
		return nil, proxy.Errorf(http.StatusNotFound, "chain %d is not indexed: the owners index covers %s", q.chainID, s.chainList())
	}
	if len(q.ix.contracts) > 0 {
		for _, c := range q.contracts {
			if _, found := slices.BinarySearchFunc(q.ix.contracts, c, func(a, b common.Address) int { return a.Cmp(b) }); !found {
				return nil, proxy.Errorf(http.StatusNotFound, "contract %s is not indexed on chain %d", strings.ToLower(c.Hex()), q.chainID)
			}
		}
	}
	return q, nil
}

// clip shortens a client's value quoted in an error.
func clip(s string) string {
	if len(s) > 66 {
		return s[:66] + "…"
	}
	return s
}

func (s *Service) chainList() string {
	if len(s.indexed) == 0 {
		return "no chain (owners.chains is empty)"
	}
	ids := make([]string, len(s.indexed))
	for i, id := range s.indexed {
		ids[i] = strconv.FormatUint(id, 10)
	}
	return "chains " + strings.Join(ids, ", ")
}

// errNotReady answers a chain whose index holds no block yet (or is being rebuilt).
// It asks the client to retry after a second.
func errNotReady(chainID uint64) error {
	e := proxy.Errorf(http.StatusServiceUnavailable, "chain %d: the owners index has not indexed its first blocks yet; retry shortly", chainID)
	e.RetryAfter = 1
	return e
}

// page reads one page of q in one snapshot: the rows, the last indexed block, and the page
// key of the last row when more rows follow ("" when none).
func (s *Service) page(ctx context.Context, q *query) (rows []store.NFTBalance, indexed uint64, next string, err error) {
	err = s.db.Read(ctx, func(tx *store.DBTx) error {
		p, err := tx.NFTIndexProgress(ctx, q.chainID)
		if errors.Is(err, store.ErrNotFound) {
			return errNotReady(q.chainID)
		}
		if err != nil {
			return err
		}
		if p.Scope != q.ix.scope {
			return errNotReady(q.chainID)
		}
		indexed = p.Block
		rows = make([]store.NFTBalance, 0, min(q.limit+1, 128))
		start := 0
		if q.after != nil {
			start = slices.Index(q.contracts, q.after.Contract)
		}
		for i := start; i < len(q.contracts) && len(rows) <= q.limit; i++ {
			var after *store.NFTBalanceKey
			if q.after != nil && i == start {
				after = q.after
			}
			if rows, err = tx.NFTBalancesPage(ctx, q.chainID, q.contracts[i], q.id, after, q.limit+1-len(rows), rows); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, "", err
	}
	if len(rows) > q.limit {
		rows = rows[:q.limit]
		next = encodePageKey(rows[len(rows)-1].NFTBalanceKey, q.digest())
	}
	return rows, indexed, next, nil
}

// tokenObjects looks up the Token object of every token of rows through the metadata routes'
// cache and fetcher, MetadataConcurrency at a time. A token whose lookup fails gets an object
// of what the index knows, with metadataError saying why (api-objects.md: still 200).
func (s *Service) tokenObjects(ctx context.Context, chainID uint64, rows []store.NFTBalance) map[store.NFTToken][]byte {
	out := map[store.NFTToken][]byte{}
	var tokens []store.NFTToken
	standard := map[store.NFTToken]int{}
	for _, r := range rows {
		t := store.NFTToken{Contract: r.Contract, ID: r.ID}
		if _, ok := standard[t]; !ok {
			standard[t] = r.Standard
			tokens = append(tokens, t)
		}
	}
	bodies := make([][]byte, len(tokens))
	var g errgroup.Group
	g.SetLimit(s.cfg.MetadataConcurrency)
	for i, t := range tokens {
		g.Go(func() error {
			body, err := s.tokens.Token(ctx, chainID, t.Contract, t.ID.ToBig(), false)
			if err != nil {
				body = s.fallbackToken(chainID, t, standard[t], err)
			}
			bodies[i] = body
			return nil
		})
	}
	_ = g.Wait() // the functions report no error
	for i, t := range tokens {
		out[t] = bodies[i]
	}
	return out
}

// fallbackToken is the Token object of a token whose metadata lookup failed.
func (s *Service) fallbackToken(chainID uint64, t store.NFTToken, std int, err error) []byte {
	reason := "upstream failure"
	var he *proxy.HTTPError
	switch {
	case errors.As(err, &he):
		reason = he.Message // the token route's own fixed phrases, e.g. "token does not exist"
	case errors.Is(err, jsonrpc.ErrUpstreamTimeout):
		reason = "upstream timeout"
	}
	var je *jsonrpc.Error
	if he == nil && !errors.As(err, &je) {
		s.log.Warn("owners: token metadata lookup failed", zap.Uint64("chain", chainID),
			zap.String("contract", strings.ToLower(t.Contract.Hex())), zap.String("token", t.ID.Hex()), zap.Error(err))
		reason = "metadata lookup failed"
	}
	tok := metadata.Token{
		CoinType: metadata.CoinTypeEVM, ChainID: chainID, ContractAddress: strings.ToLower(t.Contract.Hex()),
		ID: t.ID.Hex(), TokenType: tokenType(std), Metadata: metadata.EmptyTokenMetadata(),
		MetadataError: &reason, TimeLastUpdated: time.Now().UTC().Format(time.RFC3339),
	}
	body, _ := json.Marshal(tok) // plain fields: cannot fail
	return body
}

func tokenType(std int) string {
	if std == store.StandardERC1155 {
		return metadata.TypeERC1155
	}
	return metadata.TypeERC721
}

// render writes {"balances":[Balance...],"pageKey":…,"error":null}.
func render(chainID uint64, rows []store.NFTBalance, tokens map[store.NFTToken][]byte, next string) []byte {
	per := 230
	if tokens != nil {
		per += 1200
	}
	b := make([]byte, 0, 64+len(rows)*per)
	b = append(b, `{"balances":[`...)
	chain := strconv.AppendUint(nil, chainID, 10)
	for i := range rows {
		r := &rows[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"address":"0x`...)
		b = hex.AppendEncode(b, r.Owner[:])
		b = append(b, `","amount":"`...)
		b = append(b, r.Amount.Dec()...)
		b = append(b, `","coinType":60,"chainId":`...)
		b = append(b, chain...)
		b = append(b, `,"contractAddress":"0x`...)
		b = hex.AppendEncode(b, r.Contract[:])
		b = append(b, `","tokenId":"`...)
		b = append(b, r.ID.Hex()...)
		b = append(b, `","tokenType":"`...)
		b = append(b, tokenType(r.Standard)...)
		b = append(b, '"')
		if tokens != nil {
			b = append(b, `,"token":`...)
			b = append(b, tokens[store.NFTToken{Contract: r.Contract, ID: r.ID}]...)
		}
		b = append(b, '}')
	}
	b = append(b, `],"pageKey":`...)
	if next == "" {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(b, next...)
		b = append(b, '"')
	}
	return append(b, `,"error":null}`...)
}

// Page keys: base64url (no padding) of a version byte, the digest of the query (8 bytes), the
// last row's contract and owner (20 bytes each) and its token id (big-endian, no leading
// zeros; empty for 0).
const (
	pageKeyVersion = 2 // 1: without the digest
	pageKeyDigest  = 8
	pageKeyMin     = 1 + pageKeyDigest + 2*common.AddressLength
	pageKeyMax     = pageKeyMin + 32
)

// queryDigest binds a page key to the query that gave it.
type queryDigest [pageKeyDigest]byte

// digest is the first 8 bytes of the SHA-256 of what selects the rows of q: its chain, its
// contracts (sorted, distinct: one set, one digest however the request spelled it) and its
// tokenId or its absence. The rest may change between pages: limit (keyset pages do not
// depend on it), nfts and fetchNftMetadata (what each row shows). It is no secret: a client
// can forge any key, which only starts a page of the same query elsewhere.
func (q *query) digest() queryDigest {
	var head [8 + 1 + 32]byte
	binary.BigEndian.PutUint64(head[:8], q.chainID)
	if q.id != nil {
		head[8] = 1
		q.id.PutUint256(head[9:])
	}
	h := sha256.New()
	h.Write(head[:])
	for _, c := range q.contracts {
		h.Write(c[:])
	}
	var d queryDigest
	copy(d[:], h.Sum(nil))
	return d
}

var pageKeyEncoding = base64.RawURLEncoding.Strict()

func encodePageKey(k store.NFTBalanceKey, d queryDigest) string {
	b := make([]byte, 0, pageKeyMax)
	b = append(b, pageKeyVersion)
	b = append(b, d[:]...)
	b = append(b, k.Contract[:]...)
	b = append(b, k.Owner[:]...)
	b = append(b, k.ID.Bytes()...)
	return pageKeyEncoding.EncodeToString(b)
}

var errPageKey = errors.New("not a page key of this route (pass pageKey as a previous answer gave it)")

func decodePageKey(s string) (k store.NFTBalanceKey, d queryDigest, err error) {
	if len(s) > pageKeyEncoding.EncodedLen(pageKeyMax) {
		return k, d, errPageKey
	}
	for i := 0; i < len(s); i++ {
		// The decoder skips \r and \n: a key with them would be a second spelling.
		if c := s[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return k, d, errPageKey
		}
	}
	b, err := pageKeyEncoding.DecodeString(s)
	if err != nil || len(b) < pageKeyMin || len(b) > pageKeyMax || b[0] != pageKeyVersion {
		return k, d, errPageKey
	}
	id := b[pageKeyMin:]
	if len(id) > 0 && id[0] == 0 {
		return k, d, errPageKey // not the encoding's own form
	}
	a := 1 + pageKeyDigest
	d = queryDigest(b[1:a])
	k.Contract = common.Address(b[a : a+common.AddressLength])
	k.Owner = common.Address(b[a+common.AddressLength : pageKeyMin])
	k.ID.SetBytes(id)
	return k, d, nil
}
