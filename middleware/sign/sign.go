// Package sign is the signing stage: the methods that use the keys web3gate holds for its
// principals. Each method with special handling has its own file.
package sign

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/txmgr"
	"github.com/web3gate/web3gate/wallet"
)

// ScopeSign is the access-token scope every signing method requires.
const ScopeSign = "eth_sign"

// Deps are the stage's collaborators.
type Deps struct {
	Accounts *wallet.Accounts
	Keys     *wallet.Signers
	// Transactions, the nonce manager, serves eth_sendTransaction and eth_signTransaction;
	// nil: they are -32601.
	Transactions *txmgr.Manager
}

// Stage answers the signing methods and passes every other call on.
type Stage struct {
	accounts *wallet.Accounts
	keys     *wallet.Signers
	txs      *txmgr.Manager
	methods  map[string]func(s *Stage, c *proxy.Call) (*proxy.Response, error)
}

var _ proxy.Stage = (*Stage)(nil)

// New builds the stage.
func New(deps Deps) (*Stage, error) {
	if deps.Accounts == nil || deps.Keys == nil {
		return nil, errors.New("sign: accounts and keys are required")
	}
	st := &Stage{accounts: deps.Accounts, keys: deps.Keys, txs: deps.Transactions, methods: map[string]func(*Stage, *proxy.Call) (*proxy.Response, error){
		"eth_accounts":         (*Stage).ethAccounts,
		"eth_requestAccounts":  (*Stage).ethAccounts,
		"personal_sign":        (*Stage).personalSign,
		"eth_sign":             (*Stage).ethSign,
		"eth_signTypedData_v4": (*Stage).signTypedData,
		"eth_signTypedData_v3": (*Stage).signTypedData,
		"eth_signTypedData":    (*Stage).signTypedData,
	}}
	if deps.Transactions != nil {
		st.methods["eth_sendTransaction"] = (*Stage).ethSendTransaction
		st.methods["eth_signTransaction"] = (*Stage).ethSignTransaction
	}
	return st, nil
}

// Serve implements proxy.Stage.
func (s *Stage) Serve(c *proxy.Call, next proxy.Handler) (*proxy.Response, error) {
	m := c.Method()
	if !jsonrpc.IsSigningMethod(m) {
		if m == "eth_getTransactionCount" && s.txs != nil {
			return s.ethGetTransactionCount(c, next)
		}
		return next.Serve(c)
	}
	if !c.Principal.Authenticated() {
		return nil, jsonrpc.ErrUnauthorized.With("Not Authorized: signing needs a bearer access token")
	}
	if !slices.Contains(c.Principal.Scopes, ScopeSign) {
		return nil, jsonrpc.ErrUnauthorized.With("Not Authorized: the access token lacks the eth_sign scope")
	}
	h := s.methods[m]
	if h == nil {
		return nil, jsonrpc.ErrMethodNotFound.Withf("the method %q does not exist/is not available", m)
	}
	return h(s, c)
}

// params decodes the call's params array into between min and max raw elements.
func params(c *proxy.Call, min, max int) ([]json.RawMessage, error) {
	var ps []json.RawMessage
	if len(c.Request.Params) > 0 {
		if err := json.Unmarshal(c.Request.Params, &ps); err != nil {
			return nil, jsonrpc.ErrInvalidParams.With("params must be an array")
		}
	}
	if len(ps) < min || len(ps) > max {
		if min == max {
			return nil, jsonrpc.ErrInvalidParams.Withf("expected %d params, got %d", min, len(ps))
		}
		return nil, jsonrpc.ErrInvalidParams.Withf("expected %d to %d params, got %d", min, max, len(ps))
	}
	return ps, nil
}

// address decodes a 0x-prefixed 20-byte address; mixed case must pass the EIP-55 checksum.
func address(raw json.RawMessage, what string) (common.Address, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || !common.IsHexAddress(s) || len(s) != 42 || s[:2] != "0x" && s[:2] != "0X" {
		return common.Address{}, jsonrpc.ErrInvalidParams.Withf("%s must be a 0x-prefixed 20-byte hex address", what)
	}
	a := common.HexToAddress(s)
	if hasMixedCase(s[2:]) && a.Hex() != s {
		return common.Address{}, jsonrpc.ErrInvalidParams.Withf("%s fails its EIP-55 checksum", what)
	}
	return a, nil
}

func hasMixedCase(s string) bool {
	var lower, upper bool
	for _, r := range s {
		lower = lower || r >= 'a' && r <= 'f'
		upper = upper || r >= 'A' && r <= 'F'
	}
	return lower && upper
}

// held checks that addr is held for the call's principal: 4100 otherwise, the same answer
// whether the account exists for someone else or not at all.
func (s *Stage) held(ctx context.Context, c *proxy.Call, addr common.Address) error {
	err := s.accounts.Holds(ctx, c.Principal.ID, addr)
	if errors.Is(err, wallet.ErrNotHeld) {
		return jsonrpc.ErrUnauthorized.Withf("Not Authorized: account %s is not held for this principal", addr.Hex())
	}
	return err
}

func result(v any) (*proxy.Response, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &proxy.Response{Result: b}, nil
}
