package filters

import (
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// Answers of eth_uninstallFilter.
var (
	uninstalled = &proxy.Response{Result: []byte("true")}
	notThere    = &proxy.Response{Result: []byte("false")}
)

// uninstallFilter answers eth_uninstallFilter(id): true when it deleted the caller's live
// filter, false when there was none (unknown, another client's or chain's, expired, dropped
// or uninstalled already), as geth answers.
func (s *Stage) uninstallFilter(c *proxy.Call) (*proxy.Response, error) {
	k, ok, err := filterKey(c)
	if err != nil {
		return nil, err
	}
	if !ok {
		return notThere, nil
	}
	ok, err = s.cas(c, func(tx *store.DBTx) (bool, error) { return tx.DeleteFilter(c.Ctx, k, s.now()) })
	if err != nil {
		return nil, err
	}
	if ok {
		return uninstalled, nil
	}
	return notThere, nil
}
