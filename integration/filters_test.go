package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/internal/wait"
)

// TestFiltersThroughServer: a dApp's filters as viem makes them (createEventFilter →
// eth_newFilter, createBlockFilter → eth_newBlockFilter, then eth_getFilterChanges and
// eth_getFilterLogs), POSTed to the whole server on the embedded dev chain, with the client
// id in the URL as a wallet does: answered by web3gate, the filter methods never reach the
// upstream (its request metrics by method), eth_getFilterLogs reaches it as eth_getLogs.
func TestFiltersThroughServer(t *testing.T) {
	ts := startServer(t, deploymentConfig(t))
	url := ts.API + "/v1/web3/mainnet/" + config.DevClientID
	rpc := func(method, params string) json.RawMessage {
		t.Helper()
		code, _, body := post(t, url, fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":%q,"params":%s}`, method, params),
			"X-API-Key", "", "Authorization", "Bearer "+config.DevToken)
		var resp struct {
			Result json.RawMessage
			Error  *struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal(body, &resp); err != nil || code != 200 {
			t.Fatalf("%s: HTTP %d %s", method, code, body)
		}
		if resp.Error != nil {
			t.Fatalf("%s: error %d %s", method, resp.Error.Code, resp.Error.Message)
		}
		return resp.Result
	}

	s := gatewaySession(t, ts.API, 5)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	erc20 := contracts.MustLoad("TestERC20")
	token, err := s.Deploy(ctx, erc20, "Filtered", "F", uint8(6))
	if err != nil {
		t.Fatal(err)
	}
	from, err := s.Client.BlockNumber(ctx)
	if err != nil {
		t.Fatal(err)
	}
	transfer := crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))
	// viem's createEventFilter({address, event, fromBlock}): address, topic 0, fromBlock.
	logsID := rpc("eth_newFilter", fmt.Sprintf(`[{"address":%q,"topics":[%q],"fromBlock":"0x%x"}]`, strings.ToLower(token.Hex()), transfer.Hex(), from))
	blocksID := rpc("eth_newBlockFilter", `[]`)
	if got := rpc("eth_getFilterChanges", "["+string(logsID)+"]"); string(got) != "[]" {
		t.Fatalf("first poll = %s, want []", got)
	}
	to := common.HexToAddress("0x000000000000000000000000000000000000bEEF")
	receipt, err := s.Transact(ctx, token, erc20, "mint", to, big.NewInt(42))
	if err != nil {
		t.Fatal(err)
	}

	// Polled as viem does (every pollingInterval) until the feed has seen the mint's block.
	var logs []struct {
		Address         common.Address
		Topics          []common.Hash
		TransactionHash common.Hash
		Removed         bool
	}
	wait.For(t, "eth_getFilterChanges reports the mint", func() bool {
		if err := json.Unmarshal(rpc("eth_getFilterChanges", "["+string(logsID)+"]"), &logs); err != nil {
			t.Fatal(err)
		}
		return len(logs) > 0
	})
	if len(logs) != 1 || logs[0].Address != token || logs[0].TransactionHash != receipt.TxHash || logs[0].Removed ||
		logs[0].Topics[2] != common.BytesToHash(to.Bytes()) {
		t.Fatalf("eth_getFilterChanges = %+v, want the mint to %s in %s", logs, to, receipt.TxHash)
	}
	// The block filter: every block since its creation, the mint's among them.
	var hashes []common.Hash
	wait.For(t, "the block filter reports the mint's block", func() bool {
		var hs []common.Hash
		if err := json.Unmarshal(rpc("eth_getFilterChanges", "["+string(blocksID)+"]"), &hs); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, hs...)
		return slices.Contains(hashes, receipt.BlockHash)
	})
	// eth_getFilterLogs: the matching logs from fromBlock on, the mint's.
	getLogs := func() float64 {
		return metric(t, ts.Admin, `web3gate_upstream_requests_total{chain="dev",method="eth_getLogs",node="embedded",outcome="ok"}`)
	}
	before := getLogs()
	var all []struct{ TransactionHash common.Hash }
	if err := json.Unmarshal(rpc("eth_getFilterLogs", "["+string(logsID)+"]"), &all); err != nil {
		t.Fatal(err)
	}
	if getLogs() <= before {
		t.Fatal("eth_getFilterLogs did not reach the upstream as eth_getLogs")
	}
	if len(all) != 1 || all[0].TransactionHash != receipt.TxHash {
		t.Fatalf("eth_getFilterLogs = %+v, want the mint", all)
	}
	if got := rpc("eth_uninstallFilter", "["+string(logsID)+"]"); string(got) != "true" {
		t.Fatalf("eth_uninstallFilter = %s", got)
	}
	_, _, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"eth_getFilterChanges","params":[`+string(logsID)+`]}`,
		"X-API-Key", "", "Authorization", "Bearer "+config.DevToken)
	if !strings.Contains(string(body), `"code":-32000`) || !strings.Contains(string(body), "filter not found") {
		t.Fatalf("poll after uninstall = %s, want -32000 filter not found", body)
	}

	for _, m := range []string{"eth_newFilter", "eth_newBlockFilter", "eth_getFilterChanges", "eth_getFilterLogs", "eth_uninstallFilter"} {
		for _, outcome := range []string{"ok", "rpc_error"} {
			if v := metric(t, ts.Admin, `web3gate_upstream_requests_total{chain="dev",method="`+m+`",node="embedded",outcome="`+outcome+`"}`); v != 0 {
				t.Fatalf("%s reached the upstream %v times (%s)", m, v, outcome)
			}
		}
	}
	if v := metric(t, ts.Admin, `web3gate_filter_polls_total{outcome="changes"}`); v < 2 {
		t.Fatalf(`web3gate_filter_polls_total{outcome="changes"} = %v, want at least 2`, v)
	}
	if v := metric(t, ts.Admin, `web3gate_filter_polls_total{outcome="not_found"}`); v != 1 {
		t.Fatalf(`web3gate_filter_polls_total{outcome="not_found"} = %v, want 1`, v)
	}
}
