package sign

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// Transaction is the `transaction` member of GET /v1/transactions/{hash}.
type Transaction struct {
	Hash    common.Hash     `json:"hash"`
	State   string          `json:"state"`
	Kind    string          `json:"kind"` // send, sign or filler
	ChainID uint64          `json:"chainId"`
	Nonce   uint64          `json:"nonce"`
	From    common.Address  `json:"from"`
	To      *common.Address `json:"to"`
	// ContractAddress is the address a contract creation (to null) deploys to.
	ContractAddress *common.Address `json:"contractAddress,omitempty"`
	Value           *hexutil.Big    `json:"value"`
	// Filled names the fields web3gate filled in because the client left them out.
	Filled      []string     `json:"filled"`
	BlockNumber *uint64      `json:"blockNumber"`
	BlockHash   *common.Hash `json:"blockHash"`
	Error       *string      `json:"error"`
	CreatedAt   time.Time    `json:"createdAt"`
	UpdatedAt   time.Time    `json:"updatedAt"`
	// MinedHash is the hash of the version in the block (Hash, or a bump's, speed-up's or
	// cancel's); null until mined.
	MinedHash *common.Hash `json:"minedHash"`
	// Versions are every signed transaction of the request, oldest (the original) first.
	Versions []Version `json:"versions"`
}

// Version is one signed transaction of a request: its original, or a later one at the same
// nonce (bump, speedup, cancel).
type Version struct {
	Hash                 common.Hash  `json:"hash"`
	Kind                 string       `json:"kind"` // original, bump, speedup or cancel
	MaxFeePerGas         *hexutil.Big `json:"maxFeePerGas,omitempty"`
	MaxPriorityFeePerGas *hexutil.Big `json:"maxPriorityFeePerGas,omitempty"`
	GasPrice             *hexutil.Big `json:"gasPrice,omitempty"`
	State                string       `json:"state"` // signed, broadcast, mined or replaced
	CreatedAt            time.Time    `json:"createdAt"`
}

// TransactionHandler serves GET /v1/transactions/{hash}: the caller's own transaction with
// that hash (404 for an unknown hash and for another principal's transaction alike). The
// credentials are those of the JSON-RPC routes, checked by verifier; a bearer access token
// is required.
func (s *Stage) TransactionHandler(verifier proxy.Verifier) proxy.RESTHandler {
	return proxy.RESTHandlerFunc(func(r *proxy.RESTRequest) (*proxy.RESTResponse, error) {
		principal, hash, err := s.transactionRequest(r, verifier)
		if err != nil {
			return nil, err
		}
		rec, err := s.txs.Transaction(r.Ctx, principal, hash)
		if errors.Is(err, store.ErrNotFound) {
			return nil, noTransaction(r)
		}
		if err != nil {
			return nil, err
		}
		vs, err := s.txs.Versions(r.Ctx, rec)
		if err != nil {
			return nil, err
		}
		body, err := json.Marshal(transactionOf(rec, vs))
		if err != nil {
			return nil, err
		}
		return &proxy.RESTResponse{Member: "transaction", Body: body}, nil
	})
}

// transactionRequest reads what every /v1/transactions/{hash} route needs: the caller's
// principal (a bearer access token is required; the credentials are checked by verifier) and
// the hash. With no nonce manager every hash is unknown (404).
func (s *Stage) transactionRequest(r *proxy.RESTRequest, verifier proxy.Verifier) (string, common.Hash, error) {
	p, err := r.Exchange().Authenticate(verifier)
	if err != nil {
		return "", common.Hash{}, err
	}
	if !p.Authenticated() {
		return "", common.Hash{}, jsonrpc.ErrUnauthorized.With("Not Authorized: a bearer access token is required")
	}
	raw := r.Params.Get("hash")
	b, err := hexutil.Decode(raw)
	if len(raw) != 66 || !strings.HasPrefix(raw, "0x") || err != nil {
		return "", common.Hash{}, proxy.Errorf(http.StatusBadRequest, "hash must be a 0x-prefixed 32-byte hex transaction hash")
	}
	if s.txs == nil {
		return "", common.Hash{}, noTransaction(r)
	}
	return p.ID, common.BytesToHash(b), nil
}

// noTransaction is the 404 of a hash the caller has no transaction of (another principal's
// included).
func noTransaction(r *proxy.RESTRequest) error {
	return proxy.Errorf(http.StatusNotFound, "no transaction %s", r.Params.Get("hash"))
}

// fees are the fee fields of a stored transaction object.
type fees struct {
	MaxFeePerGas         *hexutil.Big `json:"maxFeePerGas"`
	MaxPriorityFeePerGas *hexutil.Big `json:"maxPriorityFeePerGas"`
	GasPrice             *hexutil.Big `json:"gasPrice"`
}

// versionOf is version v of rec (v nil: the original).
func versionOf(rec *store.TxRecord, v *store.TxVersion) Version {
	out := Version{Hash: rec.Hash, Kind: store.VersionOriginal, CreatedAt: rec.CreatedAt.UTC()}
	fields, stored := rec.Fields, store.VersionBroadcast
	switch {
	case v != nil:
		out.Hash, out.Kind, out.CreatedAt = v.Hash, v.Kind, v.CreatedAt.UTC()
		fields, stored = v.Fields, v.State
	case rec.State == store.StateSigned || rec.State == store.StateHandedOut || rec.State == store.StateReleased:
		stored = store.VersionSigned
	}
	var f fees
	if json.Unmarshal(fields, &f) == nil {
		out.MaxFeePerGas, out.MaxPriorityFeePerGas, out.GasPrice = f.MaxFeePerGas, f.MaxPriorityFeePerGas, f.GasPrice
	}
	out.State = store.VersionState(rec, out.Hash, stored)
	return out
}

func transactionOf(rec *store.TxRecord, vs []*store.TxVersion) Transaction {
	t := Transaction{
		Hash: rec.Hash, State: rec.State, Kind: rec.Kind, ChainID: rec.ChainID, Nonce: rec.Nonce,
		From: rec.Address, CreatedAt: rec.CreatedAt.UTC(), UpdatedAt: rec.UpdatedAt.UTC(),
	}
	var f struct {
		To    *common.Address `json:"to"`
		Value *hexutil.Big    `json:"value"`
	}
	if json.Unmarshal(rec.Fields, &f) == nil {
		t.To, t.Value = f.To, f.Value
		if f.To == nil {
			a := crypto.CreateAddress(rec.Address, rec.Nonce)
			t.ContractAddress = &a
		}
	}
	t.Filled = rec.Filled
	if t.Filled == nil {
		t.Filled = []string{}
	}
	if rec.BlockNumber != 0 {
		n, h := rec.BlockNumber, rec.BlockHash
		t.BlockNumber, t.BlockHash = &n, &h
	}
	if rec.Error != "" {
		e := rec.Error
		t.Error = &e
	}
	if rec.MinedHash != (common.Hash{}) {
		h := rec.MinedHash
		t.MinedHash = &h
	}
	t.Versions = []Version{}
	if rec.HasHash() {
		t.Versions = append(t.Versions, versionOf(rec, nil))
	}
	for _, v := range vs {
		t.Versions = append(t.Versions, versionOf(rec, v))
	}
	return t
}
