//go:build linux

// The chain of the owners measurements: a million NFT transfers generated on anvil in JSON-RPC batches.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/contracts"
)

// anvilDev0 is anvil's first dev account, unlocked for eth_sendTransaction.
const anvilDev0 = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"

// rpcClient talks to anvil for the generation (large batches: a longer timeout than probes).
var rpcClient = &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{Proxy: nil}}

// rpcBatch sends calls (method, params) to url as one JSON-RPC batch and returns the results.
func rpcBatch(ctx context.Context, url string, calls [][2]any) ([]json.RawMessage, error) {
	reqs := make([]map[string]any, len(calls))
	for i, c := range calls {
		reqs[i] = map[string]any{"jsonrpc": "2.0", "id": i, "method": c[0], "params": c[1]}
	}
	body, err := json.Marshal(reqs)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rpcClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var answers []struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answers); err != nil {
		return nil, fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	out := make([]json.RawMessage, len(calls))
	for _, a := range answers {
		if len(a.Error) > 0 && string(a.Error) != "null" {
			return nil, fmt.Errorf("%v: %s", calls[a.ID][0], a.Error)
		}
		if a.ID < 0 || a.ID >= len(out) {
			return nil, fmt.Errorf("answer to unknown id %d", a.ID)
		}
		out[a.ID] = a.Result
	}
	return out, nil
}

func blockNumber(ctx context.Context, url string) (uint64, error) {
	res, err := rpcBatch(ctx, url, [][2]any{{"eth_blockNumber", []any{}}})
	if err != nil {
		return 0, err
	}
	var n hexutil.Uint64
	if err := json.Unmarshal(res[0], &n); err != nil {
		return 0, fmt.Errorf("eth_blockNumber: %s", res[0])
	}
	return uint64(n), nil
}

// generateTransfers deploys four TransferEmitters (three ERC721 contracts, one ERC1155) and
// emits the transfers of the measurement, one block per transaction, and checks every
// receipt. It returns the emitters' addresses.
func generateTransfers(ctx context.Context, url string) ([]common.Address, error) {
	em := contracts.MustLoad("TransferEmitter")
	// One transaction per block, mined on request: anvil's automine may leave a transaction
	// that arrives while it mines in the pool until the next one (and serves the calls of a
	// batch concurrently).
	if _, err := rpcBatch(ctx, url, [][2]any{{"evm_setAutomine", []any{false}}}); err != nil {
		return nil, err
	}
	send := func(calls []map[string]string) ([]json.RawMessage, error) {
		var hashes []json.RawMessage
		for _, c := range calls {
			h, err := rpcBatch(ctx, url, [][2]any{{"eth_sendTransaction", []any{c}}})
			if err != nil {
				return nil, err
			}
			if _, err := rpcBatch(ctx, url, [][2]any{{"evm_mine", []any{}}}); err != nil {
				return nil, err
			}
			hashes = append(hashes, h[0])
		}
		var receipts [][2]any
		for _, h := range hashes {
			var hash string
			if err := json.Unmarshal(h, &hash); err != nil {
				return nil, fmt.Errorf("eth_sendTransaction answered %s", h)
			}
			receipts = append(receipts, [2]any{"eth_getTransactionReceipt", []any{hash}})
		}
		// anvil mines each transaction as it comes; its receipt may follow the answer.
		var (
			rs  []json.RawMessage
			err error
		)
		for deadline := time.Now().Add(time.Minute); ; {
			if rs, err = rpcBatch(ctx, url, receipts); err != nil {
				return nil, err
			}
			if !slices.ContainsFunc(rs, func(r json.RawMessage) bool { return string(r) == "null" }) {
				break
			}
			if time.Now().After(deadline) {
				return nil, errors.New("transactions not mined within a minute")
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		for _, r := range rs {
			var rc struct {
				Status string `json:"status"`
			}
			if err := json.Unmarshal(r, &rc); err != nil || rc.Status != "0x1" {
				return nil, fmt.Errorf("a transaction failed: %.300s", r)
			}
		}
		return rs, nil
	}
	deploy := make([]map[string]string, 4)
	for i := range deploy {
		deploy[i] = map[string]string{"from": anvilDev0, "data": hexutil.Encode(em.Bytecode), "gas": "0x1e8480"}
	}
	rs, err := send(deploy)
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	emitters := make([]common.Address, 4)
	for i, r := range rs {
		var rc struct {
			ContractAddress common.Address `json:"contractAddress"`
		}
		if err := json.Unmarshal(r, &rc); err != nil {
			return nil, err
		}
		emitters[i] = rc.ContractAddress
	}
	n := func(v int) *big.Int { return big.NewInt(int64(v)) }
	var txs []map[string]string
	add := func(to common.Address, method string, args ...any) error {
		data, err := em.Calldata(method, args...)
		if err != nil {
			return err
		}
		txs = append(txs, map[string]string{"from": anvilDev0, "to": to.Hex(), "data": hexutil.Encode(data), "gas": "0x1c9c380"})
		return nil
	}
	for k := range 3 {
		for first := 0; first < ownersMints721; first += ownersPerTx {
			if err := add(emitters[k], "mint721", n(first), n(ownersPerTx), n(ownersHolders)); err != nil {
				return nil, err
			}
		}
	}
	for k := range 3 {
		for first := 0; first < ownersMoves721; first += ownersPerTx {
			if err := add(emitters[k], "move721", n(first), n(ownersPerTx), n(ownersHolders), n(0)); err != nil {
				return nil, err
			}
		}
	}
	for first := 0; first < ownersMints1155; first += ownersPerTx {
		if err := add(emitters[3], "mint1155", n(first), n(ownersPerTx), n(ownersHolders), n(5)); err != nil {
			return nil, err
		}
	}
	perTx := ownersPerTx / ownersBatchSize
	for k := 0; k < ownersBatchLogs; k += perTx {
		first := ownersMints1155 + k*ownersBatchSize
		if err := add(emitters[3], "batch1155", n(first), n(perTx), n(ownersBatchSize), n(ownersHolders)); err != nil {
			return nil, err
		}
	}
	for i := 0; i < len(txs); i += 25 {
		if _, err := send(txs[i:min(i+25, len(txs))]); err != nil {
			return nil, err
		}
	}
	return emitters, nil
}
