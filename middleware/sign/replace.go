package sign

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr"
)

// POST /v1/transactions/{hash}/speedup and /cancel: a new version of the caller's request at
// the same nonce, with raised fees (speedup: the same transaction; cancel: a zero-value
// self-transfer). Credentials as for GET /v1/transactions/{hash}; any hash of the request
// finds it.

// Signed is the `signed` member of the answer: the version just signed.
type Signed struct {
	Hash                 common.Hash  `json:"hash"`
	Kind                 string       `json:"kind"`
	MaxFeePerGas         *hexutil.Big `json:"maxFeePerGas,omitempty"`
	MaxPriorityFeePerGas *hexutil.Big `json:"maxPriorityFeePerGas,omitempty"`
	GasPrice             *hexutil.Big `json:"gasPrice,omitempty"`
	State                string       `json:"state"` // signed (stored, no node took it yet), broadcast, mined, replaced
}

// SpeedupHandler serves POST /v1/transactions/{hash}/speedup.
func (s *Stage) SpeedupHandler(verifier proxy.Verifier) proxy.RESTHandler {
	return s.replaceHandler(verifier, store.VersionSpeedup)
}

// CancelHandler serves POST /v1/transactions/{hash}/cancel.
func (s *Stage) CancelHandler(verifier proxy.Verifier) proxy.RESTHandler {
	return s.replaceHandler(verifier, store.VersionCancel)
}

func (s *Stage) replaceHandler(verifier proxy.Verifier, kind string) proxy.RESTHandler {
	return proxy.RESTHandlerFunc(func(r *proxy.RESTRequest) (*proxy.RESTResponse, error) {
		principal, hash, err := s.transactionRequest(r, verifier)
		if err != nil {
			return nil, err
		}
		fees, err := replaceFees(r.Body)
		if err != nil {
			return nil, err
		}
		rec, v, err := s.txs.Replace(r.Ctx, principal, hash, kind, fees)
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
		sv := versionOf(rec, v)
		body, err := json.Marshal(struct {
			Transaction Transaction `json:"transaction"`
			Signed      Signed      `json:"signed"`
			Error       any         `json:"error"`
		}{transactionOf(rec, vs), Signed{Hash: sv.Hash, Kind: sv.Kind, MaxFeePerGas: sv.MaxFeePerGas,
			MaxPriorityFeePerGas: sv.MaxPriorityFeePerGas, GasPrice: sv.GasPrice, State: sv.State}, nil})
		if err != nil {
			return nil, err
		}
		return &proxy.RESTResponse{Body: body}, nil
	})
}

// replaceFees reads the optional body: {"maxFeePerGas", "maxPriorityFeePerGas"} or
// {"gasPrice"}, 0x-hex quantities; empty (or {}) is nil: fees by the bump rules.
func replaceFees(body []byte) (*txmgr.ReplaceFees, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	var f struct {
		MaxFeePerGas         *hexutil.Big `json:"maxFeePerGas"`
		MaxPriorityFeePerGas *hexutil.Big `json:"maxPriorityFeePerGas"`
		GasPrice             *hexutil.Big `json:"gasPrice"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, proxy.Errorf(http.StatusBadRequest,
			`the body must be empty or a JSON object {"maxFeePerGas": "0x..", "maxPriorityFeePerGas": "0x.."} or {"gasPrice": "0x.."} (0x-hex quantities)`)
	}
	for _, v := range []*hexutil.Big{f.MaxFeePerGas, f.MaxPriorityFeePerGas, f.GasPrice} {
		if v != nil && v.ToInt().BitLen() > 256 {
			return nil, proxy.Errorf(http.StatusBadRequest, "fees must fit 256 bits")
		}
	}
	return &txmgr.ReplaceFees{MaxFeePerGas: f.MaxFeePerGas.ToInt(), MaxPriorityFeePerGas: f.MaxPriorityFeePerGas.ToInt(),
		GasPrice: f.GasPrice.ToInt()}, nil
}
