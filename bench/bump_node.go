//go:build linux

// (k)'s anvil: started without mining, its JSON-RPC client, and blocks mined at a set base fee.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

// bumpNode is the JSON-RPC client of the run's anvil.
type bumpNode struct {
	url    string
	client *http.Client
}

func (n *bumpNode) call(ctx context.Context, method string, params ...any) (json.RawMessage, error) {
	return jsonRPC(ctx, n.client, n.url, nil, method, params...)
}

// jsonRPC sends one JSON-RPC call to url with headers and returns its result.
func jsonRPC(ctx context.Context, client *http.Client, url string, headers [][2]string, method string, params ...any) (json.RawMessage, error) {
	if params == nil {
		params = []any{}
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for _, h := range headers {
		req.Header.Set(h[0], h[1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || resp.StatusCode != http.StatusOK || len(r.Error) > 0 || r.Result == nil {
		return nil, fmt.Errorf("%s: HTTP %d %s", method, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	return r.Result, nil
}

func (n *bumpNode) quantity(ctx context.Context, method string, params ...any) (*big.Int, error) {
	res, err := n.call(ctx, method, params...)
	if err != nil {
		return nil, err
	}
	var q hexutil.Big
	if err := json.Unmarshal(res, &q); err != nil {
		return nil, fmt.Errorf("%s: %s is not a quantity", method, res)
	}
	return q.ToInt(), nil
}

// mine mines one block at baseFee and returns the recipients of its transactions.
func (n *bumpNode) mine(ctx context.Context, baseFee *big.Int) ([]common.Address, error) {
	if _, err := n.call(ctx, "anvil_setNextBlockBaseFeePerGas", (*hexutil.Big)(baseFee)); err != nil {
		return nil, err
	}
	if _, err := n.call(ctx, "evm_mine"); err != nil {
		return nil, err
	}
	res, err := n.call(ctx, "eth_getBlockByNumber", "latest", true)
	if err != nil {
		return nil, err
	}
	var b struct {
		BaseFee      hexutil.Big `json:"baseFeePerGas"`
		Transactions []struct {
			To *common.Address `json:"to"`
		} `json:"transactions"`
	}
	if err := json.Unmarshal(res, &b); err != nil {
		return nil, fmt.Errorf("latest block: %w", err)
	}
	if b.BaseFee.ToInt().Cmp(baseFee) != 0 {
		return nil, fmt.Errorf("anvil mined a block at base fee %s, want %s", b.BaseFee.ToInt(), baseFee)
	}
	to := make([]common.Address, 0, len(b.Transactions))
	for _, tx := range b.Transactions {
		if tx.To != nil {
			to = append(to, *tx.To)
		}
	}
	return to, nil
}

// startQuietAnvil starts anvil on a free port without mining (--no-mining): blocks come
// only from evm_mine.
func startQuietAnvil(ctx context.Context, cs *children, cpus, bin string) (*child, string, error) {
	want := `"0x` + strconv.FormatUint(anvilChainID, 16) + `"`
	var url string
	c, _, err := startServer(ctx, cs, "anvil (k)", cpus, bin, 1,
		func(p []int) ([]string, error) {
			url = fmt.Sprintf("http://127.0.0.1:%d", p[0])
			return []string{"--host", "127.0.0.1", "--port", strconv.Itoa(p[0]),
				"--chain-id", strconv.Itoa(anvilChainID), "--quiet", "--no-mining"}, nil
		},
		func([]int) error {
			res, err := rpcResult(&target{url: url, body: chainIDBody, headers: [][2]string{{"Content-Type", "application/json"}}})
			if err == nil && string(res) != want {
				err = fmt.Errorf("eth_chainId answered %s, want %s: another server has the port", res, want)
			}
			return err
		})
	return c, url, err
}
