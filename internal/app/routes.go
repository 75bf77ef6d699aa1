package app

import (
	"context"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/middleware/auth"
	"github.com/web3gate/web3gate/middleware/cache"
	"github.com/web3gate/web3gate/middleware/ratelimit"
	"github.com/web3gate/web3gate/middleware/route"
	"github.com/web3gate/web3gate/middleware/sign"
	"github.com/web3gate/web3gate/middleware/subscribe"
	"github.com/web3gate/web3gate/openapi"
	"github.com/web3gate/web3gate/proxy"
)

// routes is the route table of the public listener, matched in order: the JSON-RPC routes
// share one compiled chain of stages (startStages); each REST route has its handler, the
// public lookups behind the REST rate limit (rateLimit.rest).
func (a *App) routes() []*proxy.Route {
	const post, get = http.MethodPost, http.MethodGet
	mainnet, rest := a.cfg.Upstreams.Mainnet, a.limiter.REST
	return []*proxy.Route{
		{Name: "mainnet", Method: post, Pattern: "/v1/web3/mainnet", ChainID: mainnet, Handler: a.rpc},
		{Name: "chains", Method: post, Pattern: "/v1/web3/chains/{chain_id}", Handler: a.rpc},
		// The same with the client id in the path, for wallets that take only a URL.
		{Name: "mainnet", Method: post, Pattern: "/v1/web3/mainnet/{" + proxy.ClientIDParam + "}", ChainID: mainnet, Handler: a.rpc},
		{Name: "chains", Method: post, Pattern: "/v1/web3/chains/{chain_id}/{" + proxy.ClientIDParam + "}", Handler: a.rpc},

		{Name: "oauth2_token", Method: post, Pattern: "/v1/oauth2/token", REST: a.oauth.TokenHandler()},
		{Name: "oauth2_jwks", Method: get, Pattern: "/v1/oauth2/jwks", REST: a.oauth.JWKSHandler()},

		{Name: "transaction", Method: get, Pattern: "/v1/transactions/{hash}", REST: a.signer.TransactionHandler(a.auth)},
		{Name: "transaction_speedup", Method: post, Pattern: "/v1/transactions/{hash}/speedup", REST: a.signer.SpeedupHandler(a.auth)},
		{Name: "transaction_cancel", Method: post, Pattern: "/v1/transactions/{hash}/cancel", REST: a.signer.CancelHandler(a.auth)},

		{Name: "token", Method: get, Pattern: "/v1/tokens/{coinType}/{chainId}/{contractAddress}/{tokenId}", REST: rest(a.metadata.TokenHandler())},
		{Name: "contract", Method: get, Pattern: "/v1/tokens/{coinType}/{chainId}/{contractAddress}", REST: rest(a.metadata.ContractHandler())},
		{Name: "owners", Method: get, Pattern: "/v1/owners", REST: rest(a.owners.Handler())},
		{Name: "products", Method: get, Pattern: "/v1/products", REST: rest(a.catalog.ListHandler())},

		{Name: "openapi", Method: get, Pattern: "/openapi.json", REST: openapiHandler(sync.OnceValue(openapi.Public))},
	}
}

// openapiHandler answers GET /openapi.json on the public listener: the OpenAPI document of
// its routes.
func openapiHandler(doc func() []byte) proxy.RESTHandler {
	return proxy.RESTHandlerFunc(func(*proxy.RESTRequest) (*proxy.RESTResponse, error) {
		return &proxy.RESTResponse{Body: doc()}, nil
	})
}

// stages are the stages of the JSON-RPC routes, in the order a call meets them; the last
// passes the call to the upstream pool of its chain.
func (a *App) stages(routeStage *route.Stage, subscribeStage *subscribe.Stage) []proxy.Stage {
	stages := []proxy.Stage{a.auth}
	if a.cfg.RateLimit.Enabled {
		stages = append(stages, a.limiter)
	}
	return append(stages, routeStage, subscribeStage, a.filters, a.cache, a.signer)
}

// startLimiter builds the rate-limit stage of the JSON-RPC and REST routes, its budgets
// shared through Redis when configured; the exchanges it allows are charged to the quotas
// (quotas.enabled).
func (a *App) startLimiter(context.Context) (err error) {
	clients := map[string]bool{}
	for _, c := range a.cfg.Auth.Clients {
		clients[c.ID] = true
	}
	var q ratelimit.Quotas
	if a.cfg.Quotas.Enabled {
		q = a.quotas
	}
	a.limiter, err = ratelimit.New(a.cfg.RateLimit, ratelimit.Deps{
		Registry: a.reg, Logger: a.log.Named("ratelimit"), Redis: a.redis,
		Head:        a.head,
		KnownClient: func(id string) bool { return clients[id] },
		Quotas:      q,
	})
	return err
}

// startStages builds the stages of the JSON-RPC routes and compiles their chain, once.
// The response cache forgets the answers of the chains that started over.
func (a *App) startStages(ctx context.Context) (err error) {
	if err := a.startAuth(ctx); err != nil {
		return err
	}
	chains := make([]uint64, 0, len(a.cfg.Upstreams.Chains))
	for _, ch := range a.cfg.Upstreams.Chains {
		chains = append(chains, ch.ChainID)
	}
	routeStage, err := route.New(a.cfg.Routing, route.Deps{ClientVersion: "web3gate/" + a.opts.Version, Chains: chains, Signing: true})
	if err != nil {
		return err
	}
	lc := a.cfg.Server.WebSocket.LogsCriteria
	subscribeStage, err := subscribe.New(subscribe.Config{Criteria: feeds.Bounds{
		Addresses: lc.MaxAddresses, TopicsPerPosition: lc.MaxTopicsPerPosition, Product: lc.MaxProduct, Bytes: lc.MaxBytes,
	}}, subscribe.Deps{Feeds: a.feeds})
	if err != nil {
		return err
	}
	a.signer, err = sign.New(sign.Deps{Accounts: a.accounts, Keys: a.signers, Transactions: a.txs})
	if err != nil {
		return err
	}
	a.cache, err = cache.New(a.cfg.Cache, cache.Deps{Redis: a.redis, Shared: sharedChains(a.cfg), Registry: a.reg,
		Head: a.head, Finality: a.finality})
	if err != nil {
		return err
	}
	a.rpc = proxy.Compile(a.ups, a.traceStages(a.stages(routeStage, subscribeStage))...)
	a.forgetCached(ctx)
	return nil
}

// startAuth builds the auth stage: the static tokens of auth.tokens, then the OAuth2
// access tokens (this server's own and an identity provider's).
func (a *App) startAuth(ctx context.Context) (err error) {
	tokens, err := auth.NewStaticTokens(a.cfg.Auth.Tokens)
	if err != nil {
		return err
	}
	a.oauth, err = auth.NewOAuth(ctx, a.cfg.Auth.OAuth, auth.OAuthDeps{Clients: a.db, Logger: a.log.Named("oauth"), Registry: a.reg, Flood: a.flood})
	if err != nil {
		return err
	}
	a.auth, err = auth.New(a.cfg.Auth, auth.Deps{Verifier: a.oauth.Chain(tokens)})
	return err
}

// forgetCached drops the answers of the chains that started over from the shared cache;
// those it could not drop expire after redis.maxTtl.
func (a *App) forgetCached(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for id := range a.renewed {
		if n, err := a.cache.ForgetChain(ctx, id); err != nil {
			a.log.Warn("the chain's cached answers in Redis were not all dropped; they expire after redis.maxTtl",
				zap.Uint64("chain", id), zap.Int("dropped", n), zap.String("error", err.Error()))
		}
	}
}

// head is the head block number of a chain's upstream pool (0: unknown chain).
func (a *App) head(id uint64) uint64 {
	if p, ok := a.ups.Pool(id); ok {
		return p.Head()
	}
	return 0
}

// finality is what the response cache knows of a chain's finalized block.
func (a *App) finality(id uint64) cache.Finality {
	p, ok := a.ups.Pool(id)
	if !ok {
		return cache.Finality{}
	}
	f := p.Finality()
	return cache.Finality{Known: f.Known, Head: f.Head, HeadHash: f.HeadHash, Finalized: f.Finalized}
}
