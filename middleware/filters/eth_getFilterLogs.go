package filters

import (
	"errors"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// getFilterLogs answers eth_getFilterLogs(id): every log matching the logs filter's
// criteria, as eth_getLogs with those criteria answers, whatever the filter's polls
// reported. It is that eth_getLogs call, passed on down the stage chain (the response cache,
// the upstream pool and their metrics see an eth_getLogs). The filter's cursor and expiry do
// not move (as geth). A block filter's id is "filter not found", as geth answers.
//
// It is charged as that eth_getLogs: its range (the criteria's fromBlock..toBlock, tags
// resolved against the chain's head) is priced by the rate-limit stage, which charges what
// the exchange did not pay for, before the call goes on.
func (s *Stage) getFilterLogs(c *proxy.Call, next proxy.Handler) (*proxy.Response, error) {
	k, ok, err := filterKey(c)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errNotFound
	}
	f, err := s.filter(c, k)
	if errors.Is(err, store.ErrNotFound) || err == nil && f.Kind != store.FilterLogs {
		return nil, errNotFound
	}
	if err != nil {
		return nil, err
	}
	sub := *c
	sub.Request.Method = "eth_getLogs"
	sub.Request.Params = append(append([]byte{'['}, f.Criteria...), ']')
	if s.charge != nil {
		if err := s.charge.ChargeAs(c, &sub.Request); err != nil {
			return nil, err
		}
	}
	return next.Serve(&sub)
}
