package sign

import "github.com/web3gate/web3gate/proxy"

// ethAccounts answers eth_accounts and eth_requestAccounts: the principal's accounts whose
// keys are loaded, checksummed, oldest first.
func (s *Stage) ethAccounts(c *proxy.Call) (*proxy.Response, error) {
	accs, err := s.accounts.List(c.Ctx, c.Principal.ID)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(accs))
	for _, a := range accs {
		if s.keys.Has(a.Address) {
			out = append(out, a.Address.Hex())
		}
	}
	return result(out)
}
