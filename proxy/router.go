package proxy

import (
	"fmt"
	"strings"
)

// Route is one public endpoint: an HTTP method and a path pattern whose segments are
// literals or {params}. RPC routes serve JSON-RPC through the compiled chain of stages.
//
// An RPC route with a {client_id} param (ClientIDParam) takes the client id from the path,
// for wallets that take only a URL. A path may thus carry a credential: log or label a
// route by its Name or Pattern, never by the request's path or URI.
type Route struct {
	Name    string // bounded metric label, e.g. "mainnet", "chains"
	Method  string // HTTP method
	Pattern string // e.g. "/v1/web3/chains/{chain_id}"

	// ChainID is the fixed chain of an RPC route without a {chain_id} param (mainnet).
	ChainID uint64
	// Handler is the compiled chain of stages that serves each JSON-RPC call of the route.
	Handler Handler
	// REST, when set, makes this a REST route: it answers the request, and Handler is unused.
	REST RESTHandler

	segs   []segment
	prefix string // the pattern up to its first {param}: a quick refusal of most paths
	static bool   // no {param}: a path matches when it equals Pattern
	idx    int    // position in the router, for metric tables
}

// ClientIDParam is the path param of an RPC route that carries the client id, as the
// X-API-Key header does: "/v1/web3/mainnet/{client_id}".
const ClientIDParam = "client_id"

type segment struct {
	lit   string
	param string // set for a {param} segment
}

// Params are the path parameters of a matched route.
type Params struct {
	names, values []string
}

// Get returns the value of the named parameter, "" when absent.
func (p Params) Get(name string) string {
	for i, n := range p.names {
		if n == name {
			return p.values[i]
		}
	}
	return ""
}

// router matches request paths to routes, compiled once at start-up.
type router struct {
	routes []*Route
}

func newRouter(routes []*Route) (*router, error) {
	for i, r := range routes {
		r.idx = i
		if !strings.HasPrefix(r.Pattern, "/") {
			return nil, fmt.Errorf("route %s: pattern %q must start with /", r.Name, r.Pattern)
		}
		var param bool
		r.prefix, _, param = strings.Cut(r.Pattern, "{")
		r.static = !param
		for _, s := range strings.Split(r.Pattern[1:], "/") {
			if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
				r.segs = append(r.segs, segment{param: s[1 : len(s)-1]})
				continue
			}
			r.segs = append(r.segs, segment{lit: s})
		}
	}
	return &router{routes: routes}, nil
}

// match returns the route for method and path. When the path matches but not the method,
// route is nil and allowed lists the methods that would match.
func (rt *router) match(method, path string) (route *Route, params Params, allowed []string) {
	for _, r := range rt.routes {
		p, ok := r.matchPath(path)
		if !ok {
			continue
		}
		if r.Method != method {
			allowed = append(allowed, r.Method)
			continue
		}
		return r, p, nil
	}
	return nil, Params{}, allowed
}

// matchRPC returns the RPC route that serves path, whatever the request's method (a GET with
// Upgrade: websocket, a request whose head could not be read).
func (rt *router) matchRPC(path string) (*Route, Params, bool) {
	for _, r := range rt.routes {
		if r.REST != nil {
			continue
		}
		if p, ok := r.matchPath(path); ok {
			return r, p, true
		}
	}
	return nil, Params{}, false
}

func (r *Route) matchPath(path string) (Params, bool) {
	if r.static {
		// Literal segments, none empty: matching them one by one is equality.
		return Params{}, path == r.Pattern
	}
	if len(path) == 0 || path[0] != '/' || !strings.HasPrefix(path, r.prefix) {
		return Params{}, false
	}
	rest := path[1:]
	var p Params
	for i, s := range r.segs {
		var part string
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			part, rest = rest[:j], rest[j+1:]
			if i == len(r.segs)-1 {
				return Params{}, false // more segments than the pattern has
			}
		} else {
			part, rest = rest, ""
			if i != len(r.segs)-1 {
				return Params{}, false
			}
		}
		if s.param != "" {
			if part == "" {
				return Params{}, false
			}
			p.names = append(p.names, s.param)
			p.values = append(p.values, part)
			continue
		}
		if part != s.lit {
			return Params{}, false
		}
	}
	return p, true
}

// rpcPath reports whether a JSON-RPC route serves path, or, when path is only the start of a
// request's path (complete false), could serve a path that starts so. It tells the shape of
// the answer to a request whose head could not be read.
func (rt *router) rpcPath(path string, complete bool) bool {
	if complete {
		_, _, ok := rt.matchRPC(path)
		return ok
	}
	for _, r := range rt.routes {
		if r.REST != nil {
			continue
		}
		if n := min(len(path), len(r.prefix)); path[:n] == r.prefix[:n] {
			return true
		}
	}
	return false
}
