package upstreams

import (
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

var _ proxy.Handler = (*Set)(nil)

// Serve is the terminal stage: it forwards the call to the pool of its chain.
func (s *Set) Serve(c *proxy.Call) (*proxy.Response, error) {
	p, ok := s.Pool(c.ChainID)
	if !ok {
		return nil, jsonrpc.ErrUnknownChain.Withf("chain %d is not served here", c.ChainID)
	}
	res, err := p.Forward(c.Ctx, c.Request.Method, c.Request.Params)
	if err != nil {
		return nil, err
	}
	return &proxy.Response{Result: res}, nil
}
