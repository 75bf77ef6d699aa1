//go:build !nodevchain

package devchain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/internal/leaktest"
)

// mineTimeout bounds every wait for a receipt. It is a liveness bound, not a timing
// assertion: a block is normally mined within milliseconds, even under -race.
const mineTimeout = 30 * time.Second

// TestMain fails the binary on goroutines left after the tests. The in-memory goleveldb
// database of the P2P node table (enode.OpenDB("")) keeps its mpoolDrain goroutine for up to
// one second after it is closed: leaktest waits for it.
func TestMain(m *testing.M) { leaktest.MainIgnoring(m, leakOptions()...) }

// leakOptions names the goroutines go-ethereum starts once per process and never ends.
func leakOptions() []goleak.Option {
	return []goleak.Option{
		// core.SenderCacher(): a process-wide pool of runtime.NumCPU() ecrecover workers,
		// created by a sync.OnceValue on the first block insertion and never stopped.
		goleak.IgnoreTopFunction("github.com/ethereum/go-ethereum/core.(*txSenderCacher).cache"),
	}
}

// verifyNoLeaks fails t if goroutines other than the test's own and go-ethereum's global
// ones are still running after leaktest's wait.
func verifyNoLeaks(t *testing.T) {
	t.Helper()
	if leaktest.Settled(leakOptions()...) != nil {
		goleak.VerifyNone(t, leakOptions()...)
	}
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Message) }

type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int    `json:"id"`
	Method  string `json:"method"`
	Params  []any  `json:"params"`
}

// post sends body to h as an HTTP POST and returns the response body.
func post(t *testing.T, h http.Handler, body []byte) []byte {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("POST %s: status %d, body %q", body, rec.Code, rec.Body.Bytes())
	}
	return rec.Body.Bytes()
}

// call makes one JSON-RPC call and returns its result, or the JSON-RPC error.
func call(t *testing.T, h http.Handler, method string, params ...any) (json.RawMessage, error) {
	t.Helper()
	if params == nil {
		params = []any{}
	}
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: 1, Method: method, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	var resp rpcResponse
	if err := json.Unmarshal(post(t, h, body), &resp); err != nil {
		t.Fatalf("%s: decode response: %v", method, err)
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return resp.Result, nil
}

// mustCall makes one JSON-RPC call that must succeed and decodes its result into out.
func mustCall(t *testing.T, h http.Handler, out any, method string, params ...any) {
	t.Helper()
	res, err := call(t, h, method, params...)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if err := json.Unmarshal(res, out); err != nil {
		t.Fatalf("%s: decode result %s: %v", method, res, err)
	}
}

func startChain(t *testing.T, cfg Config) *Chain {
	t.Helper()
	begin := time.Now()
	c, err := Start(cfg, Deps{})
	if err != nil {
		t.Fatalf("Start(%+v): %v", cfg, err)
	}
	t.Logf("chain %d started in %v", c.ChainID(), time.Since(begin))
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// signTransfer signs an EIP-1559 transfer of value wei from a to `to` on chain chainID.
func signTransfer(t *testing.T, chainID uint64, from Account, nonce uint64, to common.Address, value *big.Int) *types.Transaction {
	t.Helper()
	id := new(big.Int).SetUint64(chainID)
	tx, err := types.SignTx(types.NewTx(&types.DynamicFeeTx{
		ChainID:   id,
		Nonce:     nonce,
		GasTipCap: big.NewInt(params.GWei),
		GasFeeCap: big.NewInt(10 * params.GWei),
		Gas:       params.TxGas,
		To:        &to,
		Value:     value,
	}), types.LatestSignerForChainID(id), from.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func sendRaw(t *testing.T, h http.Handler, tx *types.Transaction) (common.Hash, error) {
	t.Helper()
	raw, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	res, err := call(t, h, "eth_sendRawTransaction", hexutil.Encode(raw))
	if err != nil {
		return common.Hash{}, err
	}
	var hash common.Hash
	if err := json.Unmarshal(res, &hash); err != nil {
		t.Fatalf("eth_sendRawTransaction: decode %s: %v", res, err)
	}
	return hash, nil
}

// mustSend is sendRaw, failing the test on an error.
func mustSend(t *testing.T, h http.Handler, tx *types.Transaction) common.Hash {
	t.Helper()
	hash, err := sendRaw(t, h, tx)
	if err != nil {
		t.Fatal(err)
	}
	return hash
}

type receipt struct {
	Status      hexutil.Uint64 `json:"status"`
	BlockNumber hexutil.Uint64 `json:"blockNumber"`
	TxHash      common.Hash    `json:"transactionHash"`
}

// waitReceipt polls eth_getTransactionReceipt until the transaction is mined. Right after a
// block the node may answer -32000 "transaction indexing is in progress": that is retried.
func waitReceipt(t *testing.T, h http.Handler, hash common.Hash) receipt {
	t.Helper()
	deadline := time.Now().Add(mineTimeout)
	for time.Now().Before(deadline) {
		res, err := call(t, h, "eth_getTransactionReceipt", hash)
		var rerr *rpcError
		switch {
		case errors.As(err, &rerr) && rerr.Code == -32000 && rerr.Message == "transaction indexing is in progress":
		case err != nil:
			t.Fatalf("eth_getTransactionReceipt(%s): %v", hash, err)
		case string(res) != "null":
			var r receipt
			if err := json.Unmarshal(res, &r); err != nil {
				t.Fatalf("decode receipt %s: %v", res, err)
			}
			return r
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("transaction %s not mined within %v", hash, mineTimeout)
	return receipt{}
}

func balance(t *testing.T, h http.Handler, a common.Address) *big.Int {
	t.Helper()
	var b hexutil.Big
	mustCall(t, h, &b, "eth_getBalance", a, "latest")
	return b.ToInt()
}

func ether(n uint64) *big.Int {
	return new(big.Int).Mul(new(big.Int).SetUint64(n), big.NewInt(params.Ether))
}

func TestStartServesConfiguredChain(t *testing.T) {
	c := startChain(t, Config{ChainID: 1337})
	h := c.Handler()

	if c.ChainID() != 1337 {
		t.Fatalf("ChainID() = %d, want 1337", c.ChainID())
	}
	var chainID hexutil.Uint64
	mustCall(t, h, &chainID, "eth_chainId")
	if chainID != 1337 {
		t.Fatalf("eth_chainId = %d, want 1337", chainID)
	}
	var netVersion string
	mustCall(t, h, &netVersion, "net_version")
	if netVersion != "1337" {
		t.Fatalf("net_version = %q, want 1337", netVersion)
	}
	var peers hexutil.Uint64
	mustCall(t, h, &peers, "net_peerCount")
	if peers != 0 {
		t.Fatalf("net_peerCount = %d, want 0", peers)
	}
	var client string
	mustCall(t, h, &client, "web3_clientVersion")
	if !strings.Contains(client, "web3gate-devchain") {
		t.Fatalf("web3_clientVersion = %q, want the node name in it", client)
	}
	var head hexutil.Uint64
	mustCall(t, h, &head, "eth_blockNumber")
	if head != 1 {
		t.Fatalf("eth_blockNumber = %d before any transaction, want 1 (sealed at start for the tx indexer)", head)
	}
	// By-hash lookups answer at once: the transaction index is ready when Start returns.
	var receipt json.RawMessage
	mustCall(t, h, &receipt, "eth_getTransactionReceipt", common.Hash{1})
	if string(receipt) != "null" {
		t.Fatalf("receipt of an unknown hash = %s, want null", receipt)
	}
}

func TestHandlerServesBatch(t *testing.T) {
	c := startChain(t, Config{ChainID: 1337})

	body := `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]},` +
		`{"jsonrpc":"2.0","id":2,"method":"web3_sha3","params":["0x"]},` +
		`{"jsonrpc":"2.0","id":3,"method":"no_such_method","params":[]}]`
	var resps []rpcResponse
	if err := json.Unmarshal(post(t, c.Handler(), []byte(body)), &resps); err != nil {
		t.Fatal(err)
	}
	if len(resps) != 3 {
		t.Fatalf("batch of 3 answered with %d responses", len(resps))
	}
	if string(resps[0].Result) != `"0x539"` || resps[0].Error != nil {
		t.Errorf("eth_chainId in batch = %s, %v; want \"0x539\"", resps[0].Result, resps[0].Error)
	}
	if want := `"` + crypto.Keccak256Hash(nil).Hex() + `"`; string(resps[1].Result) != want {
		t.Errorf("web3_sha3 in batch = %s, want %s", resps[1].Result, want)
	}
	if resps[2].Error == nil || resps[2].Error.Code != -32601 {
		t.Errorf("unknown method in batch = %+v, want error -32601", resps[2])
	}
}

func TestAccountsArePrefunded(t *testing.T) {
	c := startChain(t, Config{ChainID: 1337, Accounts: 3, BalanceEther: 42})
	accounts := c.Accounts()
	if len(accounts) != 3 {
		t.Fatalf("len(Accounts()) = %d, want 3", len(accounts))
	}
	for i, a := range accounts {
		if got, want := balance(t, c.Handler(), a.Address), ether(42); got.Cmp(want) != 0 {
			t.Errorf("balance of account %d = %v, want %v", i, got, want)
		}
	}
}

func TestDefaultBalance(t *testing.T) {
	c := startChain(t, Config{ChainID: 1337})
	if got, want := balance(t, c.Handler(), c.Accounts()[0].Address), ether(10000); got.Cmp(want) != 0 {
		t.Fatalf("balance of account 0 = %v, want %v", got, want)
	}
}

func TestTransferIsMined(t *testing.T) {
	c := startChain(t, Config{ChainID: 1337})
	h := c.Handler()
	from := c.Accounts()[0]
	to := common.HexToAddress("0x00000000000000000000000000000000000c0ffe")
	value := big.NewInt(12345)

	begin := time.Now()
	hash, err := sendRaw(t, h, signTransfer(t, c.ChainID(), from, 0, to, value))
	if err != nil {
		t.Fatalf("eth_sendRawTransaction: %v", err)
	}
	r := waitReceipt(t, h, hash)
	t.Logf("receipt after %v", time.Since(begin))

	if uint64(r.Status) != types.ReceiptStatusSuccessful || r.TxHash != hash || r.BlockNumber < 1 {
		t.Fatalf("receipt = %+v, want status 1, hash %s, block >= 1", r, hash)
	}
	// At the receipt's block: geth stores a block (and so its receipts) a moment before it
	// makes it the head, so "latest" may still be the parent when the receipt is found.
	var b hexutil.Big
	mustCall(t, h, &b, "eth_getBalance", to, r.BlockNumber)
	if got := b.ToInt(); got.Cmp(value) != 0 {
		t.Fatalf("balance of recipient at block %v = %v, want %v", r.BlockNumber, got, value)
	}
}

func TestBurstFromOneAccountIsMined(t *testing.T) {
	const n = 20
	c := startChain(t, Config{ChainID: 1337})
	h := c.Handler()
	from := c.Accounts()[1]
	to := c.Accounts()[2].Address

	begin := time.Now()
	hashes := make([]common.Hash, n)
	for i := range hashes {
		hash, err := sendRaw(t, h, signTransfer(t, c.ChainID(), from, uint64(i), to, big.NewInt(1)))
		if err != nil {
			t.Fatalf("eth_sendRawTransaction nonce %d: %v", i, err)
		}
		hashes[i] = hash
	}
	blocks := map[hexutil.Uint64]bool{}
	for i, hash := range hashes {
		r := waitReceipt(t, h, hash)
		if uint64(r.Status) != types.ReceiptStatusSuccessful {
			t.Fatalf("transaction %d: status %d, want 1", i, r.Status)
		}
		blocks[r.BlockNumber] = true
	}
	t.Logf("%d transactions mined in %d blocks within %v", n, len(blocks), time.Since(begin))

	var nonce hexutil.Uint64
	mustCall(t, h, &nonce, "eth_getTransactionCount", from.Address, "latest")
	if nonce != n {
		t.Fatalf("eth_getTransactionCount = %d, want %d", nonce, n)
	}
}

// emitterInit is contract creation code whose constructor emits one log, LOG1 with topic
// emitterTopic and no data, and leaves no code: PUSH32 topic, PUSH1 0, PUSH1 0, LOG1, STOP.
func emitterInit(topic common.Hash) []byte {
	code := append([]byte{0x7f}, topic.Bytes()...)
	return append(code, 0x60, 0x00, 0x60, 0x00, 0xa1, 0x00)
}

// TestGetLogsFindsLogs: eth_getLogs over a range finds the logs of the blocks that hold them
// by address, by topic and by block hash, and nothing for a topic no block has. The dev node
// keeps no log index (ethconfig LogNoHistory): the answers come from the blocks' blooms and
// receipts, and the feeds and the owners indexer rely on them.
func TestGetLogsFindsLogs(t *testing.T) {
	c := startChain(t, Config{ChainID: 1337})
	h := c.Handler()
	from := c.Accounts()[0]
	id := new(big.Int).SetUint64(c.ChainID())
	topic := common.HexToHash("0x5745423347415445")

	// A log in block n, transfers (no logs) in the blocks after it, a second log at the end.
	type emitted struct {
		address common.Address
		block   hexutil.Uint64
		hash    common.Hash
	}
	var logs []emitted
	var nonce uint64
	create := func() {
		tx, err := types.SignTx(types.NewTx(&types.DynamicFeeTx{
			ChainID: id, Nonce: nonce, GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(10 * params.GWei),
			Gas: 100_000, Data: emitterInit(topic),
		}), types.LatestSignerForChainID(id), from.Key)
		if err != nil {
			t.Fatal(err)
		}
		hash := mustSend(t, h, tx)
		r := waitReceipt(t, h, hash)
		if r.Status != 1 {
			t.Fatalf("creation %s failed", hash)
		}
		var block struct {
			Hash common.Hash `json:"hash"`
		}
		mustCall(t, h, &block, "eth_getBlockByNumber", r.BlockNumber, false)
		logs = append(logs, emitted{crypto.CreateAddress(from.Address, nonce), r.BlockNumber, block.Hash})
		nonce++
	}
	create()
	for range 3 {
		waitReceipt(t, h, mustSend(t, h, signTransfer(t, c.ChainID(), from, nonce, c.Accounts()[1].Address, big.NewInt(1))))
		nonce++
	}
	create()

	type found struct {
		Address     common.Address `json:"address"`
		Topics      []common.Hash  `json:"topics"`
		BlockNumber hexutil.Uint64 `json:"blockNumber"`
		BlockHash   common.Hash    `json:"blockHash"`
	}
	for _, tc := range []struct {
		name   string
		filter map[string]any
		want   []int // indexes into logs
	}{
		{"all", map[string]any{"fromBlock": "0x0", "toBlock": "latest"}, []int{0, 1}},
		{"by topic", map[string]any{"fromBlock": "0x0", "toBlock": "latest", "topics": []any{topic}}, []int{0, 1}},
		{"by address", map[string]any{"fromBlock": "0x0", "toBlock": "latest", "address": logs[1].address}, []int{1}},
		{"range without the second", map[string]any{"fromBlock": "0x0", "toBlock": logs[1].block - 1, "topics": []any{topic}}, []int{0}},
		{"by block hash", map[string]any{"blockHash": logs[0].hash}, []int{0}},
		{"unknown topic", map[string]any{"fromBlock": "0x0", "toBlock": "latest", "topics": []any{common.HexToHash("0x01")}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []found
			mustCall(t, h, &got, "eth_getLogs", tc.filter)
			if got == nil {
				got = []found{}
			}
			want := []found{}
			for _, i := range tc.want {
				want = append(want, found{logs[i].address, []common.Hash{topic}, logs[i].block, logs[i].hash})
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("eth_getLogs(%v) = %+v, want %+v", tc.filter, got, want)
			}
		})
	}
}

func TestAccountsAreDeterministic(t *testing.T) {
	first := startChain(t, Config{ChainID: 1337, Accounts: 5})
	second := startChain(t, Config{ChainID: 137, Accounts: 5})
	a, b := first.Accounts(), second.Accounts()

	// Pinned: tests and docs elsewhere may rely on this address.
	if want := common.HexToAddress("0x169E8AF7B0bE789C52Ee116Dc358C5df45b22903"); a[0].Address != want {
		t.Errorf("account 0 = %s, want %s", a[0].Address, want)
	}

	seen := map[common.Address]bool{}
	for i := range a {
		if a[i].Address != b[i].Address {
			t.Errorf("account %d: %s on one start, %s on the other", i, a[i].Address, b[i].Address)
		}
		if seen[a[i].Address] {
			t.Errorf("account %d: address %s repeats", i, a[i].Address)
		}
		seen[a[i].Address] = true
		key, err := crypto.ToECDSA(crypto.Keccak256([]byte(fmt.Sprintf("web3gate dev account %d", i))))
		if err != nil {
			t.Fatal(err)
		}
		if !key.Equal(a[i].Key) || crypto.PubkeyToAddress(key.PublicKey) != a[i].Address {
			t.Errorf("account %d: key is not keccak256(\"web3gate dev account %d\")", i, i)
		}
	}
}

func TestTwoChainsInOneProcess(t *testing.T) {
	ids := []uint64{1337, 137}
	chains := make([]*Chain, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { chains[i], errs[i] = Start(Config{ChainID: id}, Deps{}) })
	}
	wg.Wait()
	for i, c := range chains {
		if errs[i] != nil {
			t.Fatalf("Start chain %d: %v", ids[i], errs[i])
		}
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}

	for i, c := range chains {
		h := c.Handler()
		var chainID hexutil.Uint64
		mustCall(t, h, &chainID, "eth_chainId")
		if uint64(chainID) != ids[i] {
			t.Fatalf("eth_chainId = %d, want %d", chainID, ids[i])
		}
		acc := c.Accounts()
		hash, err := sendRaw(t, h, signTransfer(t, ids[i], acc[0], 0, acc[1].Address, big.NewInt(7)))
		if err != nil {
			t.Fatalf("chain %d: eth_sendRawTransaction: %v", ids[i], err)
		}
		if r := waitReceipt(t, h, hash); uint64(r.Status) != types.ReceiptStatusSuccessful {
			t.Fatalf("chain %d: status %d, want 1", ids[i], r.Status)
		}
	}

	// A transaction signed for one chain is refused by the other.
	other := chains[0].Accounts()
	if _, err := sendRaw(t, chains[1].Handler(), signTransfer(t, ids[0], other[0], 1, other[1].Address, big.NewInt(1))); err == nil {
		t.Fatalf("chain %d accepted a transaction signed for chain %d", ids[1], ids[0])
	}
}

func TestStartLogsAddressesNeverKeys(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	c, err := Start(Config{ChainID: 1337, Accounts: 5}, Deps{Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	// Traffic that could make the node log something.
	if _, err := call(t, c.Handler(), "eth_chainId"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	started := logs.FilterMessage("dev chain started").AllUntimed()
	if len(started) != 1 {
		t.Fatalf("%d start lines, want 1; all logs: %v", len(started), logs.AllUntimed())
	}
	fields := started[0].ContextMap()
	if started[0].Level != zapcore.InfoLevel || fields["chain"] != uint64(1337) || fields["accounts"] != int64(5) {
		t.Fatalf("start line = %v %v, want info with chain 1337 and 5 accounts", started[0].Level, fields)
	}
	want := []any{}
	for _, a := range c.Accounts()[:3] {
		want = append(want, a.Address.Hex())
	}
	if fmt.Sprint(fields["first_addresses"]) != fmt.Sprint(want) {
		t.Fatalf("first_addresses = %v, want %v", fields["first_addresses"], want)
	}

	for _, e := range logs.AllUntimed() {
		line := strings.ToLower(fmt.Sprint(e.Message, e.ContextMap()))
		for i, a := range c.Accounts() {
			key := hexutil.Encode(crypto.FromECDSA(a.Key))[2:]
			if strings.Contains(line, key) {
				t.Fatalf("log line %q contains the key of account %d", e.Message, i)
			}
		}
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	c, err := Start(Config{ChainID: 1337}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	hash, err := sendRaw(t, h, signTransfer(t, c.ChainID(), c.Accounts()[0], 0, c.Accounts()[1].Address, big.NewInt(1)))
	if err != nil {
		t.Fatal(err)
	}
	waitReceipt(t, h, hash)
	if _, err := call(t, h, "eth_getLogs", map[string]any{"fromBlock": "0x0"}); err != nil {
		t.Fatal(err)
	}

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil", err)
	}
	verifyNoLeaks(t)
}

func TestStartRejectsInvalidConfig(t *testing.T) {
	c, err := Start(Config{ChainID: 1337, Accounts: MaxAccounts + 1}, Deps{})
	if err == nil {
		c.Close()
		t.Fatal("Start with 1001 accounts succeeded, want an error")
	}
	if !strings.Contains(err.Error(), "accounts: must be between 1 and 1000") {
		t.Fatalf("Start error = %v, want it to name accounts", err)
	}
	verifyNoLeaks(t)
}

// TestGenesisDiffersPerStart: every start is a new chain, and its block 0 says so: a store
// kept across starts tells the new chain from the previous one by the genesis hash.
func TestGenesisDiffersPerStart(t *testing.T) {
	genesis := func(c *Chain) common.Hash {
		var b struct {
			Hash common.Hash `json:"hash"`
		}
		mustCall(t, c.Handler(), &b, "eth_getBlockByNumber", "0x0", false)
		return b.Hash
	}
	first := startChain(t, Config{ChainID: 1337, Accounts: 2})
	a := genesis(first)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := startChain(t, Config{ChainID: 1337, Accounts: 2})
	b := genesis(second)
	if a == (common.Hash{}) || a == b {
		t.Fatalf("genesis hashes %s and %s: want two different hashes", a.Hex(), b.Hex())
	}
	// The accounts stay the same and funded.
	if got := balance(t, second.Handler(), second.Accounts()[0].Address); got.Cmp(ether(10000)) != 0 {
		t.Fatalf("account 0 holds %s wei on the second start", got)
	}
}
