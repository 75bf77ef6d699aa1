package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	gethrpc "github.com/ethereum/go-ethereum/rpc"

	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/devchain"
	"github.com/web3gate/web3gate/e2e/anvil"
)

// Drop-in sending: the clients people run (ethers, viem, cast, go-ethereum) send
// eth_sendTransaction the way they always do — no gas, no fees, no data, no `to` for a
// deployment, a nonce of their own — and web3gate fills what they left out the way geth does
// (wallet.transactions.fill, on by default). With fill off (strict) the same calls get the
// specific errors of the complete form. Most tests run web3gate in front of anvil mining a
// block a second, so that heads move under the sends as on a real chain.

const (
	// dropinChainID is anvil's default chain id, served as mainnet.
	dropinChainID = 31337
	// strictTransactions is the wallet.transactions setting of strict mode.
	strictTransactions = "{fill: false}"
	// missingFees is strict mode's answer to an object without fees.
	missingFees = "missing field: gasPrice (or maxFeePerGas and maxPriorityFeePerGas)"
	// nonceRefused is strict mode's answer to an object with a nonce.
	nonceRefused = "nonce must be omitted: the service supplies it"
)

// credentials are what a client sends: X-API-Key and the bearer token.
type credentials struct{ clientID, token string }

var (
	e2eCreds = credentials{"e2e", "e2e-token"}                 // gatewayConfig's
	devCreds = credentials{"web3gate-dev", "dev-access-token"} // the shipped config's
)

// dropinEnv is web3gate in front of one anvil node, with funded accounts of principal e2e.
type dropinEnv struct {
	node  *anvil.Node
	g     *gateway
	url   string           // web3gate's JSON-RPC URL of the chain (mainnet)
	accts []common.Address // funded on anvil, held by principal e2e
	anvil *ethclient.Client
	gw    *gethrpc.Client // web3gate, with the e2e credentials
}

// startDropin starts anvil (chain 31337, with anvilArgs) and web3gate in front of it with
// wallet.transactions set to transactions and n funded accounts of principal e2e, and waits
// until web3gate is ready.
func startDropin(t *testing.T, transactions string, n int, anvilArgs ...string) *dropinEnv {
	t.Helper()
	node := anvil.Start(t, dropinChainID, anvilArgs...)
	t.Setenv("WEB3GATE_KEYSTORE_PASSPHRASE", signingPassphrase)
	dir := t.TempDir()
	cfg := signingConfig(dir, dropinChainID, transactions, node.URL)
	cfgPath := writeConfig(t, dir, cfg)
	d := &dropinEnv{node: node}
	for range n {
		a := newAccount(t, cfgPath)
		fund(t, node, a)
		d.accts = append(d.accts, a)
	}
	d.g = startGateway(t, cfg)
	waitReady(t, d.g)
	d.url = d.g.API + "/v1/web3/mainnet"
	d.gw = dialGateway(t, d.url, e2eCreds)
	ac, err := ethclient.Dial(node.URL)
	if err != nil {
		t.Fatalf("dial anvil: %v", err)
	}
	t.Cleanup(ac.Close)
	d.anvil = ac
	return d
}

// dialGateway is a go-ethereum RPC client of url sending creds, the way a Go program talks
// to a provider that wants headers.
func dialGateway(t *testing.T, url string, creds credentials) *gethrpc.Client {
	t.Helper()
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}
	c, err := gethrpc.DialOptions(context.Background(), url,
		gethrpc.WithHTTPClient(hc),
		gethrpc.WithHeader("X-API-Key", creds.clientID),
		gethrpc.WithHeader("Authorization", "Bearer "+creds.token))
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(c.Close)
	return c
}

// rpcCall is c.Call bounded by 60 s.
func rpcCall(c *gethrpc.Client, result any, method string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return c.CallContext(ctx, result, method, args...)
}

// sendTx sends eth_sendTransaction(obj) through c and returns the hash.
func sendTx(c *gethrpc.Client, obj map[string]any) (common.Hash, error) {
	var h common.Hash
	err := rpcCall(c, &h, "eth_sendTransaction", obj)
	return h, err
}

// mustSend is sendTx failing the test on an error.
func mustSend(t *testing.T, c *gethrpc.Client, name string, obj map[string]any) common.Hash {
	t.Helper()
	h, err := sendTx(c, obj)
	if err != nil {
		t.Fatalf("%s: eth_sendTransaction %s: %s", name, brief(obj), describeErr(err))
	}
	return h
}

// brief is obj as JSON with long values shortened, for messages.
func brief(obj map[string]any) string {
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Sprint(obj)
	}
	return longHexRE.ReplaceAllStringFunc(string(b), func(h string) string { return h[:18] + "…" })
}

var longHexRE = regexp.MustCompile(`0x[0-9a-fA-F]{80,}`)

// describeErr shows an RPC error with its code and data.
func describeErr(err error) string {
	code, msg, data := rpcErr(err)
	if code == 0 {
		return err.Error()
	}
	return fmt.Sprintf("error %d %q (data %v)", code, msg, data)
}

// rpcErr is the JSON-RPC code, message and data of err (0 and err's text when it is not a
// JSON-RPC error).
func rpcErr(err error) (int, string, any) {
	var re gethrpc.Error
	if !errors.As(err, &re) {
		return 0, err.Error(), nil
	}
	var data any
	var de gethrpc.DataError
	if errors.As(err, &de) {
		data = de.ErrorData()
	}
	return re.ErrorCode(), re.Error(), data
}

// hexBig is n as a JSON-RPC quantity.
func hexBig(n int64) *hexutil.Big { return (*hexutil.Big)(big.NewInt(n)) }

// freshAddress is a random address nobody has used.
func freshAddress() common.Address {
	k, err := crypto.GenerateKey()
	if err != nil {
		panic(err)
	}
	return crypto.PubkeyToAddress(k.PublicKey)
}

// minedOK waits up to 30 s for hash's receipt on ec and fails the test unless its status is 1.
func minedOK(t *testing.T, ec *ethclient.Client, name string, hash common.Hash) *types.Receipt {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rc, err := ec.TransactionReceipt(ctx, hash)
		cancel()
		if err == nil {
			if rc.Status != types.ReceiptStatusSuccessful {
				t.Fatalf("%s: %s mined in block %v with status %d", name, hash.Hex(), rc.BlockNumber, rc.Status)
			}
			return rc
		}
		if !errors.Is(err, ethereum.NotFound) {
			t.Fatalf("%s: receipt of %s: %v", name, hash.Hex(), err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not mined within 30s", name, hash.Hex())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// txByHash is the transaction hash as ec's node has it.
func txByHash(t *testing.T, ec *ethclient.Client, hash common.Hash) *types.Transaction {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, _, err := ec.TransactionByHash(ctx, hash)
	if err != nil {
		t.Fatalf("eth_getTransactionByHash %s: %v", hash.Hex(), err)
	}
	return tx
}

// quantity is the hex quantity c answers to method(args...).
func quantity(t *testing.T, c *gethrpc.Client, method string, args ...any) uint64 {
	t.Helper()
	var n hexutil.Uint64
	if err := rpcCall(c, &n, method, args...); err != nil {
		t.Fatalf("%s %v: %s", method, args, describeErr(err))
	}
	return uint64(n)
}

// bigQuantity is the hex quantity c answers to method(args...), any size.
func bigQuantity(t *testing.T, c *gethrpc.Client, method string, args ...any) *big.Int {
	t.Helper()
	var n hexutil.Big
	if err := rpcCall(c, &n, method, args...); err != nil {
		t.Fatalf("%s %v: %s", method, args, describeErr(err))
	}
	return n.ToInt()
}

// pendingCount is eth_getTransactionCount(addr, "pending") as c answers it.
func pendingCount(t *testing.T, c *gethrpc.Client, addr common.Address) uint64 {
	t.Helper()
	return quantity(t, c, "eth_getTransactionCount", addr, "pending")
}

// record is web3gate's record of a transaction, GET /v1/transactions/{hash}.
type record struct {
	State           string          `json:"state"`
	Nonce           uint64          `json:"nonce"`
	ContractAddress *common.Address `json:"contractAddress"`
	Filled          *[]string       `json:"filled"`
}

// txRecord reads web3gate's record of hash with creds.
func txRecord(t *testing.T, g *gateway, creds credentials, hash common.Hash) record {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, g.API+"/v1/transactions/"+hash.Hex(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", creds.clientID)
	req.Header.Set("Authorization", "Bearer "+creds.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Transaction record `json:"transaction"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &body) != nil {
		t.Fatalf("GET /v1/transactions/%s: HTTP %d %s", hash.Hex(), resp.StatusCode, b)
	}
	return body.Transaction
}

// checkFilled fails unless web3gate's record of hash lists every field of filled as filled
// and none of others: fields the client gave (never changed), or fields the transaction does
// not have (the fees of the other type).
func checkFilled(t *testing.T, g *gateway, creds credentials, name string, hash common.Hash, filled, others []string) {
	t.Helper()
	rec := txRecord(t, g, creds, hash)
	if rec.Filled == nil {
		t.Errorf("%s: GET /v1/transactions/%s has no filled member, want one listing %v", name, hash.Hex(), filled)
		return
	}
	for _, f := range filled {
		if !slices.Contains(*rec.Filled, f) {
			t.Errorf("%s: filled %v lacks %s", name, *rec.Filled, f)
		}
	}
	for _, f := range others {
		if slices.Contains(*rec.Filled, f) {
			t.Errorf("%s: filled %v names %s, which the client gave or the transaction does not have", name, *rec.Filled, f)
		}
	}
}

// checkNothingFilled fails if web3gate's record of hash lists any field as filled.
func checkNothingFilled(t *testing.T, g *gateway, creds credentials, name string, hash common.Hash) {
	t.Helper()
	if rec := txRecord(t, g, creds, hash); rec.Filled != nil && len(*rec.Filled) > 0 {
		t.Errorf("%s: filled %v for a complete object, want none", name, *rec.Filled)
	}
}

// checkDynamicFill checks tx, sent through web3gate with no fee fields while anvil's head
// was headBefore and mined in block mined: type 2, the tip the node suggests (eth_maxPriorityFeePerGas
// read from anvil before the send, tipBefore, or now), and a fee cap of 2 × the base fee of the block after web3gate's head + tip. That
// head may lag anvil's by a block (web3gate follows heads by polling) and may have moved
// before the fill, so the block after it is one of headBefore..mined.
func checkDynamicFill(t *testing.T, d *dropinEnv, name string, tx *types.Transaction, tipBefore *big.Int, headBefore, mined uint64) {
	t.Helper()
	if tx.Type() != types.DynamicFeeTxType {
		t.Errorf("%s: type %d, want 2 on a London chain", name, tx.Type())
		return
	}
	tipAfter := bigQuantity(t, rpcOf(d.anvil), "eth_maxPriorityFeePerGas")
	if tx.GasTipCap().Cmp(tipBefore) != 0 && tx.GasTipCap().Cmp(tipAfter) != 0 {
		t.Errorf("%s: maxPriorityFeePerGas %v, want the node's eth_maxPriorityFeePerGas (%v before the send, %v after)", name, tx.GasTipCap(), tipBefore, tipAfter)
	}
	tip := tx.GasTipCap()
	base := new(big.Int).Sub(tx.GasFeeCap(), tx.GasTipCap())
	var seen []string
	for b := headBefore; b <= mined; b++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		h, err := d.anvil.HeaderByNumber(ctx, new(big.Int).SetUint64(b))
		cancel()
		if err != nil {
			t.Fatalf("%s: header %d: %v", name, b, err)
		}
		if new(big.Int).Mul(h.BaseFee, big.NewInt(2)).Cmp(base) == 0 {
			t.Logf("%s: maxFeePerGas %v = 2 × base fee %v of block %d + tip %v", name, tx.GasFeeCap(), h.BaseFee, b, tip)
			return
		}
		seen = append(seen, fmt.Sprintf("%d:%v", b, h.BaseFee))
	}
	t.Errorf("%s: maxFeePerGas %v − tip %v is not 2 × the base fee of a block from %d (anvil's head at the send) to %d (mined); base fees %v",
		name, tx.GasFeeCap(), tx.GasTipCap(), headBefore, mined, seen)
}

// erc20 is the TestERC20 contract (constructor name, symbol, decimals; anyone may mint).
var erc20 = contracts.MustLoad("TestERC20")

// erc20Initcode is TestERC20's creation code with its constructor arguments.
func erc20Initcode(t *testing.T, name, symbol string) []byte {
	t.Helper()
	args, err := erc20.ABI.Pack("", name, symbol, uint8(18))
	if err != nil {
		t.Fatal(err)
	}
	return append(slices.Clone(erc20.Bytecode), args...)
}

// revertingInitcode is creation code that reverts with Error(reason), as require(false,
// reason) does; it also returns the revert data.
func revertingInitcode(t *testing.T, reason string) (code, revertData []byte) {
	t.Helper()
	str, err := abi.NewType("string", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := abi.Arguments{{Type: str}}.Pack(reason)
	if err != nil {
		t.Fatal(err)
	}
	revertData = append(crypto.Keccak256([]byte("Error(string)"))[:4], enc...)
	if len(revertData) > 255 {
		t.Fatalf("reason %q too long for a PUSH1 length", reason)
	}
	n := byte(len(revertData))
	// CODECOPY(0, 12, n); REVERT(0, n); the revert data follows the 12 bytes of code.
	code = append([]byte{0x60, n, 0x60, 0x0c, 0x60, 0x00, 0x39, 0x60, n, 0x60, 0x00, 0xfd}, revertData...)
	return code, revertData
}

// ---------------------------------------------------------------------------------------
// The clients, each as it sends by default.

// TestDropinClients drives web3gate (fill on, the default) in front of anvil mining a block
// a second with ethers, viem, cast and go-ethereum, each sending the way it does by default,
// and requires every send to succeed and be mined with status 1.
func TestDropinClients(t *testing.T) {
	d := startDropin(t, "{}", 4, "--block-time", "1")
	t.Run("ethers", func(t *testing.T) {
		t.Parallel()
		runDropinScript(t, d, "ethers", "js/dropin-ethers.mjs", d.accts[0], "fill")
	})
	t.Run("viem", func(t *testing.T) {
		t.Parallel()
		runDropinScript(t, d, "viem", "js/dropin-viem.mjs", d.accts[1], "fill")
	})
	t.Run("cast", func(t *testing.T) {
		t.Parallel()
		castFill(t, d, d.accts[2])
	})
	t.Run("go-ethereum", func(t *testing.T) {
		t.Parallel()
		gethFill(t, d, d.accts[3])
	})
}

// TestDropinStrict drives web3gate with wallet.transactions.fill false (strict) with the same
// client calls as TestDropinClients and requires each to be refused with the specific error
// of the complete form (the behaviour before filling existed).
func TestDropinStrict(t *testing.T) {
	d := startDropin(t, strictTransactions, 1, "--block-time", "1")
	acct := d.accts[0] // refusals reserve nothing: the clients can share it
	t.Run("ethers", func(t *testing.T) {
		t.Parallel()
		runDropinScript(t, d, "ethers", "js/dropin-ethers.mjs", acct, "strict")
	})
	t.Run("viem", func(t *testing.T) {
		t.Parallel()
		runDropinScript(t, d, "viem", "js/dropin-viem.mjs", acct, "strict")
	})
	t.Run("cast", func(t *testing.T) {
		t.Parallel()
		castStrict(t, d, acct)
	})
	t.Run("go-ethereum", func(t *testing.T) {
		t.Parallel()
		gethStrict(t, d, acct)
	})
}

// runDropinScript runs a node script against d's web3gate as account in mode (fill or
// strict), failing unless every check passed.
func runDropinScript(t *testing.T, d *dropinEnv, pkg, script string, account common.Address, mode string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is required for the %s test: install Node.js 20+ (.ci/run does)", pkg)
	}
	if _, err := os.Stat("node_modules/" + pkg + "/package.json"); err != nil {
		t.Fatalf("%s is not installed: run `npm ci --prefix e2e` (make test does)", pkg)
	}
	artifact, err := filepath.Abs("../contracts/artifacts/TestERC20.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(),
		"WEB3GATE_URL="+d.url,
		"WEB3GATE_CLIENT_ID="+e2eCreds.clientID,
		"WEB3GATE_TOKEN="+e2eCreds.token,
		fmt.Sprintf("WEB3GATE_CHAIN_ID=%d", dropinChainID),
		"WEB3GATE_ACCOUNT="+account.Hex(),
		"WEB3GATE_ERC20_ARTIFACT="+artifact,
		"WEB3GATE_MODE="+mode,
	)
	out, err := cmd.CombinedOutput()
	t.Logf("%s (%s):\n%s", script, mode, out)
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within 120s", script)
	}
	if err != nil {
		t.Fatalf("%s checks failed: %v", pkg, err)
	}
	if strings.Contains(string(out), "FAIL") || !strings.Contains(string(out), "all checks passed") {
		t.Fatalf("%s: a check failed or the script did not finish", script)
	}
}

// castBinary is cast from the pinned npm package.
func castBinary(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("node_modules/@foundry-rs/cast-linux-amd64/bin/cast")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("cast is not installed at %s: run `npm ci --prefix e2e` (make test does)", bin)
	}
	return bin
}

// castSend runs `cast send --unlocked --from from` against d's web3gate with the e2e
// credentials as headers, waiting for the receipt (--json), and returns its stdout and
// stderr.
func castSend(t *testing.T, d *dropinEnv, from common.Address, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	full := append([]string{"send", "--unlocked", "--from", from.Hex(), "--rpc-url", d.url,
		"--rpc-headers", "X-API-Key: " + e2eCreds.clientID,
		"--rpc-headers", "Authorization: Bearer " + e2eCreds.token,
		"--rpc-timeout", "30", "--timeout", "60", "--json"}, args...)
	cmd := exec.CommandContext(ctx, castBinary(t), full...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "FOUNDRY_DISABLE_NIGHTLY_WARNING=1", "NO_COLOR=1")
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("cast %v did not finish within 90s\nstdout: %s\nstderr: %s", args, o.String(), e.String())
	}
	return o.String(), e.String(), err
}

// castTransfers are cast's transfers of 1000 wei to a fresh address, and the type each sends.
var castTransfers = []struct {
	name     string
	args     []string
	wantType uint8
}{
	{"legacy", []string{"--legacy"}, types.LegacyTxType},
	{"1559", nil, types.DynamicFeeTxType},
}

// castCreate is the argument list of `cast send --create` deploying TestERC20.
func castCreate() []string {
	return []string{"--create", hexutil.Encode(erc20.Bytecode), "constructor(string,string,uint8)", "Cast", "CST", "18"}
}

// castReceipt is the receipt cast prints with --json.
type castReceipt struct {
	TransactionHash common.Hash `json:"transactionHash"`
}

// castMined runs castSend, requires success, and returns the mined transaction and receipt.
func castMined(t *testing.T, d *dropinEnv, name string, from common.Address, args ...string) (*types.Transaction, *types.Receipt) {
	t.Helper()
	stdout, stderr, err := castSend(t, d, from, args...)
	if err != nil {
		t.Fatalf("cast %s: %v\nstdout: %s\nstderr: %s", name, err, stdout, stderr)
	}
	var out castReceipt
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &out); err != nil || out.TransactionHash == (common.Hash{}) {
		t.Fatalf("cast %s: output is not a receipt (%v): %s\nstderr: %s", name, err, stdout, stderr)
	}
	rc := minedOK(t, d.anvil, "cast "+name, out.TransactionHash)
	tx := txByHash(t, d.anvil, out.TransactionHash)
	t.Logf("cast %s: nonce %d, type %d, mined in block %v", name, tx.Nonce(), tx.Type(), rc.BlockNumber)
	return tx, rc
}

// castFill sends cast's transfers and a deployment through web3gate (fill on) and checks
// each mined with status 1. cast sends every field but value with --create, a nonce included
// (read with eth_getTransactionCount "latest", so it waits for each receipt before the next
// send).
func castFill(t *testing.T, d *dropinEnv, from common.Address) {
	for _, row := range castTransfers {
		to := freshAddress()
		tx, _ := castMined(t, d, row.name, from, append(slices.Clone(row.args), to.Hex(), "--value", "1000")...)
		checkNothingFilled(t, d.g, e2eCreds, "cast "+row.name, tx.Hash())
		if tx.Type() != row.wantType {
			t.Errorf("cast %s: type %d, want %d", row.name, tx.Type(), row.wantType)
		}
		if bal := balanceAt(t, d, to); bal.Cmp(big.NewInt(1000)) != 0 {
			t.Errorf("cast %s: recipient balance %v, want 1000", row.name, bal)
		}
	}
	// cast sends no value with --create: web3gate fills 0.
	tx, rc := castMined(t, d, "create", from, castCreate()...)
	checkFilled(t, d.g, e2eCreds, "cast create", tx.Hash(), []string{"value"}, []string{"gas", "gasPrice", "maxFeePerGas", "maxPriorityFeePerGas", "data", "to"})
	checkCreated(t, d, "cast create", from, tx, rc)
}

// castErrorRE finds the JSON-RPC error cast prints.
var castErrorRE = regexp.MustCompile(`error code (-?[0-9]+): ([^\n]*)`)

// castStrict sends cast's transfers and deployment through web3gate in strict mode: cast
// always sends a nonce, which strict mode refuses.
func castStrict(t *testing.T, d *dropinEnv, from common.Address) {
	rows := map[string][]string{"create": castCreate()}
	for _, row := range castTransfers {
		rows[row.name] = append(slices.Clone(row.args), freshAddress().Hex(), "--value", "1000")
	}
	for name, args := range rows {
		stdout, stderr, err := castSend(t, d, from, args...)
		if err == nil {
			t.Errorf("cast %s: accepted in strict mode: %s", name, stdout)
			continue
		}
		m := castErrorRE.FindStringSubmatch(stderr)
		if m == nil || m[1] != "-32602" || m[2] != nonceRefused {
			t.Errorf("cast %s: %v\nstderr: %s\nwant error code -32602: %s", name, err, stderr, nonceRefused)
		}
	}
	if n := pendingCount(t, d.gw, from); n != 0 {
		t.Errorf("after the refusals the account's pending count is %d, want 0", n)
	}
}

// balanceAt is addr's balance on anvil.
func balanceAt(t *testing.T, d *dropinEnv, addr common.Address) *big.Int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := d.anvil.BalanceAt(ctx, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkCreated checks that tx, a contract creation by from mined with receipt rc, created a
// contract at the address of (from, nonce) that the receipt names, with code.
func checkCreated(t *testing.T, d *dropinEnv, name string, from common.Address, tx *types.Transaction, rc *types.Receipt) {
	t.Helper()
	if tx.To() != nil {
		t.Errorf("%s: the transaction has to %s, want a contract creation", name, tx.To().Hex())
	}
	want := crypto.CreateAddress(from, tx.Nonce())
	if rc.ContractAddress != want {
		t.Errorf("%s: receipt contractAddress %s, want %s (sender, nonce %d)", name, rc.ContractAddress.Hex(), want.Hex(), tx.Nonce())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code, err := d.anvil.CodeAt(ctx, want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(code) == 0 {
		t.Errorf("%s: no code at %s", name, want.Hex())
	}
}

// gethFill sends {from, to, value} with go-ethereum's rpc.Client (headers set with
// gethrpc.WithHeader), no gas and no fees, and checks what web3gate filled.
func gethFill(t *testing.T, d *dropinEnv, from common.Address) {
	to := freshAddress()
	head := quantity(t, rpcOf(d.anvil), "eth_blockNumber")
	tip := bigQuantity(t, rpcOf(d.anvil), "eth_maxPriorityFeePerGas")
	hash := mustSend(t, d.gw, "go-ethereum", map[string]any{"from": from, "to": to, "value": hexBig(1000)})
	rc := minedOK(t, d.anvil, "go-ethereum", hash)
	tx := txByHash(t, d.anvil, hash)
	if tx.Gas() != 21000 || tx.Value().Cmp(big.NewInt(1000)) != 0 || len(tx.Data()) != 0 || tx.To() == nil || *tx.To() != to {
		t.Errorf("go-ethereum: gas %d value %v data %x to %v; want 21000 (the estimate), 1000, empty, %s", tx.Gas(), tx.Value(), tx.Data(), tx.To(), to.Hex())
	}
	checkDynamicFill(t, d, "go-ethereum", tx, tip, head, rc.BlockNumber.Uint64())
	checkFilled(t, d.g, e2eCreds, "go-ethereum", hash, []string{"gas", "maxFeePerGas", "maxPriorityFeePerGas"}, []string{"from", "to", "value", "gasPrice"})
}

// gethStrict sends the same object in strict mode.
func gethStrict(t *testing.T, d *dropinEnv, from common.Address) {
	_, err := sendTx(d.gw, map[string]any{"from": from, "to": freshAddress(), "value": hexBig(1000)})
	if err == nil {
		t.Fatal("go-ethereum: {from, to, value} accepted in strict mode")
	}
	if code, msg, _ := rpcErr(err); code != -32602 || msg != "missing field: gas" {
		t.Errorf("go-ethereum: %s, want -32602 %q", describeErr(err), "missing field: gas")
	}
}

// rpcOf is the RPC client under ec.
func rpcOf(ec *ethclient.Client) *gethrpc.Client { return ec.Client() }

// ---------------------------------------------------------------------------------------
// Filling, nonces and contract creation, one behaviour at a time with go-ethereum.

// TestDropinFill covers the rest of the drop-in behaviour with go-ethereum's rpc.Client
// against web3gate (fill on) in front of anvil mining a block a second: eth_signTransaction
// filled, fields the client gave kept as given, the nonce a client sends, the pending count answered from web3gate's state,
// contract creation, and an estimate that reverts.
func TestDropinFill(t *testing.T) {
	d := startDropin(t, "{}", 1, "--block-time", "1")
	acct := d.accts[0] // one account, the subtests in turn: an account costs more than the waits
	t.Run("eth_signTransaction", func(t *testing.T) { fillSignTransaction(t, d, acct) })
	t.Run("given fields kept", func(t *testing.T) { givenFieldsKept(t, d, acct) })
	t.Run("client nonce", func(t *testing.T) { clientNonces(t, d, acct) })
	t.Run("pending count", func(t *testing.T) { pendingCountFromState(t, d, acct) })
	t.Run("contract creation", func(t *testing.T) { contractCreation(t, d, acct) })
	t.Run("estimate reverts", func(t *testing.T) { estimateReverts(t, d, acct) })
}

// signTx signs obj with eth_signTransaction through c and decodes the result.
func signTx(t *testing.T, c *gethrpc.Client, name string, obj map[string]any) (*types.Transaction, hexutil.Bytes) {
	t.Helper()
	var raw hexutil.Bytes
	if err := rpcCall(c, &raw, "eth_signTransaction", obj); err != nil {
		t.Fatalf("%s: eth_signTransaction %s: %s", name, brief(obj), describeErr(err))
	}
	tx := new(types.Transaction)
	if err := tx.UnmarshalBinary(raw); err != nil {
		t.Fatalf("%s: decode the signed transaction: %v", name, err)
	}
	return tx, raw
}

// sendRaw sends raw through web3gate and waits for its receipt.
func sendRaw(t *testing.T, d *dropinEnv, name string, raw hexutil.Bytes) *types.Receipt {
	t.Helper()
	var h common.Hash
	if err := rpcCall(d.gw, &h, "eth_sendRawTransaction", raw); err != nil {
		t.Fatalf("%s: eth_sendRawTransaction: %s", name, describeErr(err))
	}
	return minedOK(t, d.anvil, name, h)
}

func fillSignTransaction(t *testing.T, d *dropinEnv, from common.Address) {
	to := freshAddress()
	head := quantity(t, rpcOf(d.anvil), "eth_blockNumber")
	tip := bigQuantity(t, rpcOf(d.anvil), "eth_maxPriorityFeePerGas")
	n := pendingCount(t, d.gw, from)
	tx, raw := signTx(t, d.gw, "sign {from, to, value}", map[string]any{"from": from, "to": to, "value": hexBig(7)})
	if tx.Nonce() != n || tx.Gas() != 21000 || tx.To() == nil || *tx.To() != to || tx.Value().Cmp(big.NewInt(7)) != 0 || len(tx.Data()) != 0 {
		t.Errorf("signed: nonce %d gas %d to %v value %v data %x; want %d, 21000, %s, 7, empty", tx.Nonce(), tx.Gas(), tx.To(), tx.Value(), tx.Data(), n, to.Hex())
	}
	sender, err := types.Sender(types.LatestSignerForChainID(big.NewInt(dropinChainID)), tx)
	if err != nil || sender != from {
		t.Errorf("signed by %s (%v), want %s", sender.Hex(), err, from.Hex())
	}
	rc := sendRaw(t, d, "sign {from, to, value}", raw)
	checkDynamicFill(t, d, "sign {from, to, value}", tx, tip, head, rc.BlockNumber.Uint64())
	checkFilled(t, d.g, e2eCreds, "sign {from, to, value}", tx.Hash(), []string{"gas", "maxFeePerGas", "maxPriorityFeePerGas"}, []string{"from", "to", "value", "gasPrice"})
}

// givenFieldsKept: what the client gave is never changed, whatever is filled around it; a
// fee cap alone gets a tip no higher than itself.
func givenFieldsKept(t *testing.T, d *dropinEnv, from common.Address) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	head, err := d.anvil.HeaderByNumber(ctx, nil)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	base := head.BaseFee
	times := func(k int64) *hexutil.Big { return (*hexutil.Big)(new(big.Int).Mul(base, big.NewInt(k))) }
	obj := func(extra map[string]any) map[string]any {
		o := map[string]any{"from": from, "to": freshAddress(), "value": hexBig(5)}
		for k, v := range extra {
			o[k] = v
		}
		return o
	}
	for _, row := range []struct {
		name  string
		obj   map[string]any
		check func(tx *types.Transaction) string
	}{
		{"gas", obj(map[string]any{"gas": hexutil.Uint64(30000)}), func(tx *types.Transaction) string {
			return want(tx.Gas() == 30000 && tx.Type() == types.DynamicFeeTxType, "gas %d type %d, want 30000, 2", tx.Gas(), tx.Type())
		}},
		{"maxFeePerGas alone", obj(map[string]any{"maxFeePerGas": times(2)}), func(tx *types.Transaction) string {
			return want(tx.GasFeeCap().Cmp(times(2).ToInt()) == 0 && tx.GasTipCap().Cmp(tx.GasFeeCap()) <= 0,
				"maxFeePerGas %v maxPriorityFeePerGas %v, want %v and a tip no higher", tx.GasFeeCap(), tx.GasTipCap(), times(2))
		}},
		{"maxPriorityFeePerGas alone", obj(map[string]any{"maxPriorityFeePerGas": "0x2"}), func(tx *types.Transaction) string {
			return want(tx.GasTipCap().Cmp(big.NewInt(2)) == 0 && tx.GasFeeCap().Cmp(base) >= 0,
				"maxPriorityFeePerGas %v maxFeePerGas %v, want 2 and at least the base fee %v", tx.GasTipCap(), tx.GasFeeCap(), base)
		}},
		{"gasPrice on a London chain", obj(map[string]any{"gasPrice": times(3)}), func(tx *types.Transaction) string {
			return want(tx.Type() == types.LegacyTxType && tx.GasPrice().Cmp(times(3).ToInt()) == 0,
				"type %d gasPrice %v, want 0 and %v", tx.Type(), tx.GasPrice(), times(3))
		}},
		{"value absent", map[string]any{"from": from, "to": freshAddress()}, func(tx *types.Transaction) string {
			return want(tx.Value().Sign() == 0, "value %v, want 0", tx.Value())
		}},
	} {
		h := mustSend(t, d.gw, row.name, row.obj)
		minedOK(t, d.anvil, row.name, h)
		if msg := row.check(txByHash(t, d.anvil, h)); msg != "" {
			t.Errorf("%s: %s", row.name, msg)
		}
	}
}

// want is "" when ok, else the formatted complaint.
func want(ok bool, format string, args ...any) string {
	if ok {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

// clientNonces: a nonce given by the client is accepted when it is the next one web3gate
// would hand out, and refused with the next nonce named otherwise; a refusal reserves nothing.
func clientNonces(t *testing.T, d *dropinEnv, from common.Address) {
	obj := func(nonce uint64) map[string]any {
		return map[string]any{"from": from, "to": freshAddress(), "value": hexBig(1), "nonce": hexutil.Uint64(nonce)}
	}
	refused := func(name string, nonce uint64, want string, next uint64) {
		t.Helper()
		want = fmt.Sprintf("nonce too %s: next nonce is %d", want, next)
		_, err := sendTx(d.gw, obj(nonce))
		if err == nil {
			t.Fatalf("%s: nonce %d accepted", name, nonce)
		}
		if code, msg, _ := rpcErr(err); code != -32000 || !strings.HasPrefix(msg, want) {
			t.Errorf("%s: nonce %d: %s, want -32000 %q", name, nonce, describeErr(err), want)
		}
	}
	n := pendingCount(t, d.gw, from)
	refused("above the next", n+1, "high", n)
	refused("far above the next", n+1000, "high", n)
	if got := pendingCount(t, d.gw, from); got != n {
		t.Fatalf("pending count %d after refusals, want %d: a refusal reserved a nonce", got, n)
	}
	h0 := mustSend(t, d.gw, "the next nonce", obj(n))
	refused("the same nonce again", n, "low", n+1)
	refused("two above", n+3, "high", n+1)
	signed, raw := signTx(t, d.gw, "eth_signTransaction with the next nonce", obj(n+1))
	if signed.Nonce() != n+1 {
		t.Errorf("eth_signTransaction with nonce %d signed nonce %d", n+1, signed.Nonce())
	}
	h2 := mustSend(t, d.gw, "no nonce after the refusals", map[string]any{"from": from, "to": freshAddress(), "value": hexBig(1)})
	minedOK(t, d.anvil, "the next nonce", h0)
	sendRaw(t, d, "the signed next nonce", raw)
	minedOK(t, d.anvil, "no nonce after the refusals", h2)
	if tx := txByHash(t, d.anvil, h0); tx.Nonce() != n {
		t.Errorf("the send with nonce %d has nonce %d", n, tx.Nonce())
	}
	if tx := txByHash(t, d.anvil, h2); tx.Nonce() != n+2 {
		t.Errorf("the send without nonce after the hand-out of %d has nonce %d, want %d", n+1, tx.Nonce(), n+2)
	}
}

// pendingCountFromState: eth_getTransactionCount(held account, "pending") counts web3gate's
// reservations (a nonce handed out by eth_signTransaction and not yet sent), so a client that
// reads it and sends it is accepted.
func pendingCountFromState(t *testing.T, d *dropinEnv, from common.Address) {
	n0 := pendingCount(t, d.gw, from)
	_, raw := signTx(t, d.gw, "hand out a nonce", map[string]any{"from": from, "to": freshAddress(), "value": hexBig(1)})
	if n := pendingCount(t, d.gw, from); n != n0+1 {
		t.Errorf("web3gate's pending count %d after handing out nonce %d, want %d", n, n0, n0+1)
	}
	if n := pendingCount(t, rpcOf(d.anvil), from); n != n0 {
		t.Fatalf("anvil's pending count %d, want %d: the hand-out was not sent", n, n0)
	}
	n := pendingCount(t, d.gw, from)
	h := mustSend(t, d.gw, "the nonce read from the pending count", map[string]any{"from": from, "to": freshAddress(), "value": hexBig(1), "nonce": hexutil.Uint64(n)})
	sendRaw(t, d, "the handed-out transaction", raw)
	minedOK(t, d.anvil, "the nonce read from the pending count", h)
	if tx := txByHash(t, d.anvil, h); tx.Nonce() != n {
		t.Errorf("sent with nonce %d, mined with %d", n, tx.Nonce())
	}
}

// contractCreation: `to` absent or null with data creates a contract; `to` null (or absent)
// with no data is refused, reserving nothing.
func contractCreation(t *testing.T, d *dropinEnv, from common.Address) {
	for _, row := range []struct {
		name string
		obj  map[string]any
	}{
		{"to absent", map[string]any{"from": from, "data": hexutil.Bytes(erc20Initcode(t, "Absent", "ABS"))}},
		{"to null", map[string]any{"from": from, "to": nil, "data": hexutil.Bytes(erc20Initcode(t, "Null", "NUL"))}},
		{"to null, input", map[string]any{"from": from, "to": nil, "input": hexutil.Bytes(erc20Initcode(t, "Input", "INP"))}},
	} {
		h := mustSend(t, d.gw, row.name, row.obj)
		rc := minedOK(t, d.anvil, row.name, h)
		checkCreated(t, d, row.name, from, txByHash(t, d.anvil, h), rc)
		if rec := txRecord(t, d.g, e2eCreds, h); rec.ContractAddress == nil || *rec.ContractAddress != rc.ContractAddress {
			t.Errorf("%s: GET /v1/transactions contractAddress %v, want the receipt's %s", row.name, rec.ContractAddress, rc.ContractAddress.Hex())
		}
	}
	tx, raw := signTx(t, d.gw, "eth_signTransaction, to absent", map[string]any{"from": from, "data": hexutil.Bytes(erc20Initcode(t, "Signed", "SGN"))})
	checkCreated(t, d, "eth_signTransaction, to absent", from, tx, sendRaw(t, d, "eth_signTransaction, to absent", raw))

	next := pendingCount(t, d.gw, from)
	for _, row := range []struct {
		name string
		obj  map[string]any
	}{
		{"to null, data 0x", map[string]any{"from": from, "to": nil, "data": "0x"}},
		{"to null, no data", map[string]any{"from": from, "to": nil, "value": hexBig(1)}},
		{"to absent, no data", map[string]any{"from": from, "value": hexBig(1)}},
	} {
		_, err := sendTx(d.gw, row.obj)
		if err == nil {
			t.Errorf("%s: accepted", row.name)
			continue
		}
		code, msg, _ := rpcErr(err)
		if code != -32602 || !strings.Contains(msg, "data") {
			t.Errorf("%s: %s, want -32602 saying a contract creation needs data", row.name, describeErr(err))
		}
		t.Logf("%s: %s", row.name, describeErr(err))
	}
	if n := pendingCount(t, d.gw, from); n != next {
		t.Errorf("pending count %d after the refusals, want %d", n, next)
	}
}

// estimateReverts: an object without gas whose estimate reverts is answered as geth does:
// code 3, the reason in the message, the revert data in data; nothing is reserved.
func estimateReverts(t *testing.T, d *dropinEnv, from common.Address) {
	const reason = "refused by test"
	code, revertData := revertingInitcode(t, reason)
	_, err := sendTx(d.gw, map[string]any{"from": from, "data": hexutil.Bytes(code)})
	c, msg, data := rpcErr(err)
	if err == nil || c != 3 || !strings.Contains(msg, reason) || data != hexutil.Encode(revertData) {
		t.Errorf("creation reverting with %q: %v, want code 3, the reason in the message, data %s", reason, describeErrOrNil(err), hexutil.Encode(revertData))
	}

	// A call that reverts with a custom error: ERC20InsufficientBalance, the data the node gives.
	h := mustSend(t, d.gw, "deploy", map[string]any{"from": from, "data": hexutil.Bytes(erc20Initcode(t, "Revert", "REV"))})
	token := minedOK(t, d.anvil, "deploy", h).ContractAddress
	call, err := erc20.ABI.Pack("transfer", recipient, big.NewInt(1))
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{"from": from, "to": token, "data": hexutil.Bytes(call)}
	_, nodeErr := d.node.Call("eth_estimateGas", obj)
	var ne *anvil.RPCError
	if !errors.As(nodeErr, &ne) {
		t.Fatalf("anvil's estimate of a transfer without balance: %v, want a revert", nodeErr)
	}
	var nodeData string
	if err := json.Unmarshal(ne.Data, &nodeData); err != nil {
		t.Fatalf("anvil's revert data %s: %v", ne.Data, err)
	}
	next := pendingCount(t, d.gw, from)
	_, err = sendTx(d.gw, obj)
	c, _, data = rpcErr(err)
	if err == nil || c != 3 || data != nodeData {
		t.Errorf("transfer without balance: %v, want code 3 with the node's data %s", describeErrOrNil(err), nodeData)
	}
	if n := pendingCount(t, d.gw, from); n != next {
		t.Errorf("pending count %d after the reverted estimates, want %d", n, next)
	}
}

func describeErrOrNil(err error) string {
	if err == nil {
		return "accepted"
	}
	return describeErr(err)
}

// TestDropinFillBeforeLondon: on a chain without EIP-1559 (anvil --hardfork berlin) an object
// without fees is filled with gasPrice = eth_gasPrice, a legacy transaction.
func TestDropinFillBeforeLondon(t *testing.T) {
	d := startDropin(t, "{}", 1, "--block-time", "1", "--hardfork", "berlin")
	from := d.accts[0]
	before := bigQuantity(t, rpcOf(d.anvil), "eth_gasPrice")
	hash := mustSend(t, d.gw, "{from, to, value}", map[string]any{"from": from, "to": freshAddress(), "value": hexBig(1)})
	after := bigQuantity(t, rpcOf(d.anvil), "eth_gasPrice")
	minedOK(t, d.anvil, "{from, to, value}", hash)
	tx := txByHash(t, d.anvil, hash)
	if tx.Type() != types.LegacyTxType {
		t.Fatalf("type %d, want 0 (legacy) before London", tx.Type())
	}
	if tx.GasPrice().Cmp(before) != 0 && tx.GasPrice().Cmp(after) != 0 {
		t.Errorf("gasPrice %v, want the node's eth_gasPrice (%v before the send, %v after)", tx.GasPrice(), before, after)
	}
	if tx.Gas() != 21000 {
		t.Errorf("gas %d, want 21000", tx.Gas())
	}
	checkFilled(t, d.g, e2eCreds, "{from, to, value}", hash, []string{"gas", "gasPrice"}, []string{"from", "to", "value", "maxFeePerGas", "maxPriorityFeePerGas"})
}

// ---------------------------------------------------------------------------------------
// The fee check: never a stale head.

// TestDropinBaseFeeJustRead sends 40 complete type 2 transactions, each priced at the base fee
// of the latest block read through web3gate right after anvil (one block a second) sealed it,
// with no tip: the next block's base fee is never higher (the blocks are nearly empty), so
// none may be refused. Two accounts send two each per head, and the first also sends a
// transaction (priced with room) 700 ms into each block, as a client sending steadily does,
// so that web3gate has just read the chain when the next head comes. A fee cap below 7/8 of
// the base fee, which no next block can accept, is still refused up front, reserving nothing.
func TestDropinBaseFeeJustRead(t *testing.T) {
	const heads, senders, perHead = 10, 2, 2
	d := startDropin(t, "{}", senders, "--block-time", "1")
	primer := d.accts[0]
	var (
		mu      sync.Mutex
		hashes  []common.Hash
		refused []string
	)
	latest := func() (uint64, *big.Int, error) {
		var blk struct {
			Number  hexutil.Uint64 `json:"number"`
			BaseFee *hexutil.Big   `json:"baseFeePerGas"`
		}
		if err := rpcCall(d.gw, &blk, "eth_getBlockByNumber", "latest", false); err != nil {
			return 0, nil, err
		}
		if blk.BaseFee == nil {
			return 0, nil, fmt.Errorf("block %d has no base fee", blk.Number)
		}
		return uint64(blk.Number), blk.BaseFee.ToInt(), nil
	}
	last := quantity(t, rpcOf(d.anvil), "eth_blockNumber")
	for round := 0; round <= heads; round++ {
		last = waitNewHead(t, d, last)
		seen := time.Now()
		if round > 0 {
			var wg sync.WaitGroup
			for _, from := range d.accts {
				wg.Go(func() {
					for range perHead {
						n, fee, err := latest()
						var h common.Hash
						if err == nil {
							h, err = sendTx(d.gw, map[string]any{"from": from, "to": recipient, "gas": "0x5208", "value": "0x1", "data": "0x",
								"maxFeePerGas": (*hexutil.Big)(fee), "maxPriorityFeePerGas": "0x0"})
						}
						mu.Lock()
						if err != nil {
							refused = append(refused, fmt.Sprintf("priced at the base fee %v of block %d: %s", fee, n, describeErr(err)))
						} else {
							hashes = append(hashes, h)
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
		}
		time.Sleep(time.Until(seen.Add(700 * time.Millisecond)))
		_, fee, err := latest()
		if err != nil {
			t.Fatalf("primer: latest block: %s", describeErr(err))
		}
		h := mustSend(t, d.gw, "primer", map[string]any{"from": primer, "to": recipient, "gas": "0x5208", "value": "0x1", "data": "0x",
			"maxFeePerGas": (*hexutil.Big)(new(big.Int).Mul(fee, big.NewInt(3))), "maxPriorityFeePerGas": "0x1"})
		hashes = append(hashes, h)
	}
	if len(refused) > 0 {
		t.Errorf("%d of %d sends priced at the base fee just read were refused:\n%s", len(refused), heads*senders*perHead, strings.Join(refused, "\n"))
	}
	for _, h := range hashes {
		minedOK(t, d.anvil, "priced at the base fee", h)
	}

	// Below what any next block can take.
	from := d.accts[0]
	next := pendingCount(t, d.gw, from)
	_, fee, err := latest()
	if err != nil {
		t.Fatalf("latest block: %s", describeErr(err))
	}
	half := new(big.Int).Div(fee, big.NewInt(2))
	_, err = sendTx(d.gw, map[string]any{"from": from, "to": recipient, "gas": "0x5208", "value": "0x1", "data": "0x",
		"maxFeePerGas": (*hexutil.Big)(half), "maxPriorityFeePerGas": "0x0"})
	if code, msg, _ := rpcErr(errOrAccepted(err)); code != -32000 || !strings.Contains(msg, "underpriced") {
		t.Errorf("fee cap %v, half the base fee %v: %s, want -32000 transaction underpriced", half, fee, describeErrOrNil(err))
	}
	if n := pendingCount(t, d.gw, from); n != next {
		t.Errorf("pending count %d after the underpriced refusal, want %d", n, next)
	}
}

// errOrAccepted is err, or an error saying the call was accepted.
func errOrAccepted(err error) error {
	if err == nil {
		return errors.New("accepted")
	}
	return err
}

// waitNewHead waits (up to 10 s) until anvil's head is above last and returns it.
func waitNewHead(t *testing.T, d *dropinEnv, last uint64) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n := quantity(t, rpcOf(d.anvil), "eth_blockNumber"); n > last {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("anvil sealed no block after %d within 10s", last)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startShipped starts web3gate with the shipped config (embedded dev chain) and returns it
// with a go-ethereum client of its mainnet route (dev credentials).
func startShipped(t *testing.T) (*gateway, *gethrpc.Client, *ethclient.Client) {
	t.Helper()
	g := startGateway(t, shippedConfig(t, t.TempDir()))
	waitReady(t, g)
	c := dialGateway(t, g.API+"/v1/web3/mainnet", devCreds)
	return g, c, ethclient.NewClient(c)
}

// devAccounts are the first n dev accounts of the embedded dev chain, held by principal dev.
func devAccounts(t *testing.T, n int) []common.Address {
	t.Helper()
	accts, err := devchain.DevAccounts(n)
	if err != nil {
		t.Fatal(err)
	}
	var out []common.Address
	for _, a := range accts {
		out = append(out, a.Address)
	}
	return out
}

// TestDropinGasPriceJustRead sends, with the shipped config on the embedded dev chain (a block
// per send), 40 transactions each priced at an eth_gasPrice read through web3gate just before,
// from four accounts at once: none may be refused. They are type 2 with maxFeePerGas =
// eth_gasPrice and a tip of 1 wei, the least the dev chain takes, which keeps the chain's tip
// suggestion at its floor: eth_gasPrice is then the head's base fee + 1 wei, as on a quiet
// chain, and a check against an older head (a higher base fee) would refuse it.
func TestDropinGasPriceJustRead(t *testing.T) {
	const perAccount = 10
	_, c, ec := startShipped(t)
	var (
		mu      sync.Mutex
		hashes  []common.Hash
		refused []string
		wg      sync.WaitGroup
	)
	for _, from := range devAccounts(t, 4) {
		wg.Go(func() {
			for range perAccount {
				var price hexutil.Big
				err := rpcCall(c, &price, "eth_gasPrice")
				var h common.Hash
				if err == nil {
					h, err = sendTx(c, map[string]any{"from": from, "to": recipient, "gas": "0x5208", "value": "0x1", "data": "0x",
						"maxFeePerGas": &price, "maxPriorityFeePerGas": "0x1"})
				}
				mu.Lock()
				if err != nil {
					refused = append(refused, fmt.Sprintf("priced at eth_gasPrice %v: %s", &price, describeErr(err)))
				} else {
					hashes = append(hashes, h)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(refused) > 0 {
		t.Errorf("%d of %d sends priced at a fresh eth_gasPrice were refused:\n%s", len(refused), 4*perAccount, strings.Join(refused, "\n"))
	}
	for _, h := range hashes {
		minedOK(t, ec, "priced at eth_gasPrice", h)
	}
}

// ---------------------------------------------------------------------------------------
// Bursts and concurrency from one account.

// TestDropinBurstShipped sends 100 complete transactions from one account at once with the
// shipped config: sends beyond maxInFlight wait their turn, so all 100 get a hash and are
// mined, with nonces 0..99.
func TestDropinBurstShipped(t *testing.T) {
	const total = 100
	_, c, ec := startShipped(t)
	from := devAccounts(t, 4)[3]
	price := new(big.Int).Mul(bigQuantity(t, c, "eth_gasPrice"), big.NewInt(2))
	start := pendingCount(t, c, from)
	var (
		mu     sync.Mutex
		hashes []common.Hash
		errs   []string
		wg     sync.WaitGroup
	)
	for range total {
		wg.Go(func() {
			h, err := sendTx(c, map[string]any{"from": from, "to": recipient, "gas": "0x5208", "value": "0x1", "data": "0x", "gasPrice": (*hexutil.Big)(price)})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, describeErr(err))
				return
			}
			hashes = append(hashes, h)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Errorf("%d of %d concurrent sends refused, e.g. %s", len(errs), total, errs[0])
	}
	var nonces []uint64
	for _, h := range hashes {
		minedOK(t, ec, "burst", h)
		nonces = append(nonces, txByHash(t, ec, h).Nonce())
	}
	checkContiguous(t, nonces, start, len(hashes))
	if n := quantity(t, c, "eth_getTransactionCount", from, "latest"); n != start+uint64(len(hashes)) {
		t.Errorf("the account's nonce is %d, want %d + %d sends", n, start, len(hashes))
	}
}

// checkContiguous fails unless nonces are start, start+1, … start+n-1, each once.
func checkContiguous(t *testing.T, nonces []uint64, start uint64, n int) {
	t.Helper()
	got := slices.Sorted(slices.Values(nonces))
	if len(got) != n {
		t.Fatalf("%d nonces for %d hashes", len(got), n)
	}
	for i, v := range got {
		if v != start+uint64(i) {
			t.Fatalf("mined nonces %v: want %d..%d, each once", got, start, start+uint64(n)-1)
		}
	}
}

// TestDropinMixedNonces sends 200 transactions from one account at once with the shipped
// config, mixing the three forms a client may use: filled ({from, to, value}), complete, and
// complete with the nonce read from eth_getTransactionCount pending just before. Filled and
// complete sends must all succeed; a client nonce may lose the race and be refused as too
// low, and nothing else. The mined nonces are contiguous from the start, each once, and
// refusals took none: the account's nonce rises by the accepted sends exactly.
func TestDropinMixedNonces(t *testing.T) {
	const total, workers = 200, 32
	_, c, ec := startShipped(t)
	from := devAccounts(t, 4)[2]
	price := new(big.Int).Mul(bigQuantity(t, c, "eth_gasPrice"), big.NewInt(2))
	start := pendingCount(t, c, from)
	complete := func() map[string]any {
		return map[string]any{"from": from, "to": recipient, "gas": "0x5208", "value": "0x1", "data": "0x", "gasPrice": (*hexutil.Big)(price)}
	}
	type sent struct {
		hash  common.Hash
		kind  string
		nonce *uint64 // the client's
	}
	var (
		next                atomic.Int64
		mu                  sync.Mutex
		accepted            []sent
		tooLow              int
		failures            []string
		wg                  sync.WaitGroup
		kinds               = []string{"filled", "complete", "client nonce"}
		tooLowRE            = regexp.MustCompile(`^nonce too low: next nonce is [0-9]+`)
		acceptedByKind      = map[string]int{}
		clientNonceAttempts atomic.Int64
	)
	for range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < total; i = next.Add(1) - 1 {
				kind := kinds[i%3]
				var obj map[string]any
				var nonce *uint64
				switch kind {
				case "filled":
					obj = map[string]any{"from": from, "to": recipient, "value": "0x1"}
				case "complete":
					obj = complete()
				case "client nonce":
					clientNonceAttempts.Add(1)
					var n hexutil.Uint64
					if err := rpcCall(c, &n, "eth_getTransactionCount", from, "pending"); err != nil {
						mu.Lock()
						failures = append(failures, "pending count: "+describeErr(err))
						mu.Unlock()
						continue
					}
					v := uint64(n)
					nonce = &v
					obj = complete()
					obj["nonce"] = n
				}
				h, err := sendTx(c, obj)
				mu.Lock()
				switch code, msg, _ := rpcErrOf(err); {
				case err == nil:
					accepted = append(accepted, sent{h, kind, nonce})
					acceptedByKind[kind]++
				case kind == "client nonce" && code == -32000 && tooLowRE.MatchString(msg):
					tooLow++
				default:
					failures = append(failures, fmt.Sprintf("%s: %s", kind, describeErr(err)))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("accepted %v; %d of %d client nonces refused as too low", acceptedByKind, tooLow, clientNonceAttempts.Load())
	if len(failures) > 0 {
		t.Errorf("%d sends failed otherwise than a client nonce too low:\n%s", len(failures), strings.Join(failures[:min(len(failures), 10)], "\n"))
	}
	var nonces []uint64
	for _, s := range accepted {
		minedOK(t, ec, s.kind, s.hash)
		tx := txByHash(t, ec, s.hash)
		if s.nonce != nil && tx.Nonce() != *s.nonce {
			t.Errorf("client nonce %d accepted but mined with nonce %d", *s.nonce, tx.Nonce())
		}
		nonces = append(nonces, tx.Nonce())
	}
	checkContiguous(t, nonces, start, len(accepted))
	if n := quantity(t, c, "eth_getTransactionCount", from, "latest"); n != start+uint64(len(accepted)) {
		t.Errorf("the account's nonce is %d, want %d + %d accepted sends: refused requests took nonces", n, start, len(accepted))
	}
	if n := pendingCount(t, c, from); n != start+uint64(len(accepted)) {
		t.Errorf("web3gate's pending count is %d, want %d", n, start+uint64(len(accepted)))
	}
}

// rpcErrOf is rpcErr for a possibly nil error.
func rpcErrOf(err error) (int, string, any) {
	if err == nil {
		return 0, "", nil
	}
	return rpcErr(err)
}
