// Package route is the method-policy stage: it answers some methods locally, refuses the
// namespaces not allowed, and passes the signing methods (to the sign stage) and the
// forwardable rest on.
package route

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Config is the `routing:` section.
type Config struct {
	// ExtraNamespaces are forwarded besides eth, net and web3 (e.g. "debug", "txpool").
	ExtraNamespaces []string `yaml:"extraNamespaces"`
}

// SetDefaults fills unset fields with their defaults (none).
func (c *Config) SetDefaults() {}

var namespaceRE = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

// Validate checks c; each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	for i, ns := range c.ExtraNamespaces {
		switch {
		case !namespaceRE.MatchString(ns):
			errs = append(errs, fmt.Errorf("extraNamespaces[%d]: %q is not a namespace (lowercase letters and digits, no trailing _)", i, ns))
		case ns == "personal":
			errs = append(errs, fmt.Errorf("extraNamespaces[%d]: personal holds signing methods and is never forwarded", i))
		}
	}
	return errors.Join(errs...)
}

// Deps are the stage's collaborators.
type Deps struct {
	// ClientVersion is the answer to web3_clientVersion, e.g. "web3gate/v0.1.0".
	ClientVersion string
	// Signing passes the signing methods on to the sign stage; when false they are refused
	// with -32601. They are never forwarded to an upstream either way.
	Signing bool
	// Chains are the configured chain ids, whose eth_chainId and net_version answers are
	// built once.
	Chains []uint64
}

// Stage is the method-policy stage.
type Stage struct {
	forward       map[string]bool // namespace → forwarded
	clientVersion *proxy.Response
	chainID       map[uint64]*proxy.Response // shared, read-only answers
	netVersion    map[uint64]*proxy.Response
	signing       bool
}

var _ proxy.Stage = (*Stage)(nil)

// New builds the stage.
func New(cfg Config, deps Deps) (*Stage, error) {
	s := &Stage{
		forward:       map[string]bool{"eth": true, "net": true, "web3": true},
		clientVersion: &proxy.Response{Result: strconv.AppendQuote(nil, deps.ClientVersion)},
		chainID:       map[uint64]*proxy.Response{},
		netVersion:    map[uint64]*proxy.Response{},
		signing:       deps.Signing,
	}
	for _, id := range deps.Chains {
		s.chainID[id] = &proxy.Response{Result: strconv.AppendQuote(nil, "0x"+strconv.FormatUint(id, 16))}
		s.netVersion[id] = &proxy.Response{Result: strconv.AppendQuote(nil, strconv.FormatUint(id, 10))}
	}
	for _, ns := range cfg.ExtraNamespaces {
		s.forward[ns] = true
	}
	return s, nil
}

// Serve implements proxy.Stage.
func (s *Stage) Serve(c *proxy.Call, next proxy.Handler) (*proxy.Response, error) {
	m := c.Method()
	switch m {
	case "eth_chainId":
		if r, ok := s.chainID[c.ChainID]; ok {
			return r, nil
		}
		return &proxy.Response{Result: strconv.AppendQuote(nil, "0x"+strconv.FormatUint(c.ChainID, 16))}, nil
	case "net_version":
		if r, ok := s.netVersion[c.ChainID]; ok {
			return r, nil
		}
		return &proxy.Response{Result: strconv.AppendQuote(nil, strconv.FormatUint(c.ChainID, 10))}, nil
	case "web3_clientVersion":
		return s.clientVersion, nil
	}
	if jsonrpc.IsSigningMethod(m) {
		if !s.signing {
			return nil, jsonrpc.ErrMethodNotFound.Withf("the method %s does not exist/is not available", quoteMethod(m))
		}
		return next.Serve(c)
	}
	ns, _, ok := strings.Cut(m, "_")
	if !ok || !s.forward[ns] {
		return nil, jsonrpc.ErrMethodNotFound.Withf("the method %s does not exist/is not available", quoteMethod(m))
	}
	return next.Serve(c)
}

// quoteMethod bounds a client's method name before it goes into a message.
func quoteMethod(m string) string {
	if len(m) > 64 {
		m = m[:64] + "…"
	}
	return strconv.Quote(m)
}
