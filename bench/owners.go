package main

// The NFT owners measurements (issue 5):
//
//	(i) ingest: a fresh web3gate (fresh store) indexing an anvil chain that holds 1,000,000
//	    NFT transfers: 720,000 ERC721 mints and 180,000 ERC721 transfers over three contracts,
//	    50,000 ERC1155 TransferSingle mints and 5,000 TransferBatch mints of 10 ids, in 500
//	    blocks of 2,000 transfers (955,000 logs). Logs per second of the whole pipeline
//	    (eth_getLogs through the upstream pool, parse, store), from the indexer's own "backfill
//	    caught up" line, and of the store writes alone and the fetches alone, from its
//	    duration histograms. Target ≥ 50,000 logs/s on the machine.
//	(o) GET /v1/owners over that index at concurrency 1: one ERC721 token, one ERC1155 token,
//	    the first page of a contract, a page deep in a contract (pageKey), a page of the four
//	    contracts, and a page of 1,000; then a mix of the first five at concurrency 1 (its p99
//	    is the target, ≤ 5 ms) and at the throughput load.
//
// The chain is generated once (TransferEmitter, contracts/src: logs without token state, so
// that a million transfers take seconds), the same every run. web3gate indexes it with the
// settings of a real deployment but for confirmations 0 and maxBlockRange 10 (20,000 logs,
// about 12 MB, per eth_getLogs). During (i) anvil and web3gate share every CPU (the target is
// a rate of the machine); each round is a new web3gate on a new store. (o) then runs on a
// web3gate started on the last round's store, pinned like the other servers; every URL is
// checked before the load, and any answer other than 200 during it fails the run.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/contracts"
)

// The generated chain.
const (
	ownersMints721   = 240_000 // per ERC721 contract (three)
	ownersMoves721   = 60_000  // per ERC721 contract: ids 0 .. 59,999 move once
	ownersMints1155  = 50_000  // TransferSingle mints
	ownersBatchLogs  = 5_000   // TransferBatch mints
	ownersBatchSize  = 10      // ids per TransferBatch
	ownersPerTx      = 2_000   // transfers per transaction (one block each)
	ownersHolders    = 5_000
	ownersTransfers  = 3*(ownersMints721+ownersMoves721) + ownersMints1155 + ownersBatchLogs*ownersBatchSize
	ownersLogs       = 3*(ownersMints721+ownersMoves721) + ownersMints1155 + ownersBatchLogs
	ownersBlockRange = 10
	targetIngestRate = 50_000.0 // logs/s
	targetOwnersP99  = 5 * time.Millisecond
	ownersChainName  = "anvil"
)

// anvilDev0 is anvil's first dev account, unlocked for eth_sendTransaction.
const anvilDev0 = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"

// ingestSample is one round of (i).
type ingestSample struct {
	logs                float64       // logs ingested (web3gate's counter, every kind)
	backfillLogs        float64       // the logs of the backfill's own line (after its first range)
	took                time.Duration // from the first range written to caught up (the indexer's own line)
	wall                time.Duration // from the start of the process to caught up
	writeSum, fetchSum  float64       // seconds in store writes and in fetches
	ranges              float64       // ranges written
	web3gateCPU, anvilC time.Duration // CPU time of each during the round
}

func (s ingestSample) rate() float64      { return s.backfillLogs / s.took.Seconds() }
func (s ingestSample) wallRate() float64  { return s.logs / s.wall.Seconds() }
func (s ingestSample) writeRate() float64 { return s.logs / s.writeSum }
func (s ingestSample) fetchRate() float64 { return s.logs / s.fetchSum }

// ownersRun is the whole measurement.
type ownersRun struct {
	genTime   time.Duration
	blocks    uint64
	ingest    []ingestSample
	get       getSuite // (o)
	emitters  []common.Address
	anvilHead uint64
}

// measureOwners generates the chain, measures (i) for every round, then (o).
func measureOwners(ctx context.Context, cs *children, cfg runConfig, env signEnv, anvilBin string) (*ownersRun, error) {
	dir, err := os.MkdirTemp(env.tmp, "owners-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	or := &ownersRun{get: getSuite{label: "owners"}}

	node := &target{key: "anvil-owners", headers: [][2]string{{"Content-Type", "application/json"}}}
	if err := startAnvil(ctx, cs, "", anvilBin, node); err != nil {
		return nil, err
	}
	anvil := node.servers[0]
	defer func() { _ = cs.stop(anvil) }()
	fmt.Printf("owners: generating %d NFT transfers (%d logs) on anvil...\n", ownersTransfers, ownersLogs)
	started := time.Now()
	if or.emitters, err = generateTransfers(ctx, node.url); err != nil {
		return nil, fmt.Errorf("owners: generate: %w", err)
	}
	or.genTime = time.Since(started)
	if or.anvilHead, err = blockNumber(ctx, node.url); err != nil {
		return nil, err
	}
	or.blocks = or.anvilHead

	cred, err := newCredentials()
	if err != nil {
		return nil, err
	}
	var storeDir string
	for r := range cfg.rounds {
		storeDir = filepath.Join(dir, fmt.Sprintf("round%d", r+1))
		if err := os.Mkdir(storeDir, 0o700); err != nil {
			return nil, err
		}
		s, err := ingestRound(ctx, cs, storeDir, env.bin, node.url, anvil, cred, or.anvilHead)
		if err != nil {
			return or, err
		}
		or.ingest = append(or.ingest, s)
		fmt.Printf("round %d/%d  (i) ingest: %.0f logs in %v: %.0f logs/s (%.0f from the process start); store writes alone %.0f logs/s, fetches alone %.0f logs/s; web3gate %.1f µs CPU/log, anvil %.1f\n",
			r+1, cfg.rounds, s.logs, s.took.Round(time.Millisecond), s.rate(), s.wallRate(), s.writeRate(), s.fetchRate(),
			us(s.web3gateCPU)/s.logs, us(s.anvilC)/s.logs)
		if r+1 < cfg.rounds {
			if err := os.RemoveAll(storeDir); err != nil {
				return or, err
			}
		}
	}

	// (o): the last round's index, served by a web3gate pinned like the other servers.
	c, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, "web3gate (owners)", ownersConfig(storeDir, node.url, cred, "warn"))
	if err != nil {
		return or, err
	}
	defer func() { _ = cs.stop(c) }()
	if err := waitOwnersIndexed(ctx, admin, or.anvilHead, time.Minute); err != nil {
		return or, err
	}
	if or.get.cases, err = ownersCases(api, or.emitters); err != nil {
		return or, err
	}
	return or, or.get.measure(ctx, cs, cfg, dir, api, admin, c, checkOwners)
}

// ownersConfig is web3gate on the anvil chain alone, indexing it from block 0, its state in
// dir.
func ownersConfig(dir, anvilURL string, cred credentials, level string) func(api, admin int) (string, error) {
	return func(api, admin int) (string, error) {
		sum := sha256.Sum256([]byte(cred.token))
		cfg := fmt.Sprintf(`# generated by go run ./bench: web3gate indexing the NFT transfers of one anvil node
server:
  listen: 127.0.0.1:%d
admin:
  listen: 127.0.0.1:%d
log:
  level: %s
auth:
  clients:
    - id: %s
  tokens:
    - sha256: %s
      principal: bench
  oauth:
    signingKeyFile: %s
upstreams:
  mainnet: %d
  chains:
    - chainId: %d
      name: %s
      urls: [%s]
devchain:
  enabled: false
store:
  path: %s
wallet:
  keys:
    dir: %s
owners:
  chains:
    - chainId: %d
      startBlock: 0
      confirmations: 0
      maxBlockRange: %d
      pollInterval: 200ms
      progressLogInterval: 5s
rateLimit: {enabled: false, rest: {enabled: false}}
`, api, admin, level, cred.clientID, hex.EncodeToString(sum[:]), filepath.Join(dir, "jwt-signing-key.pem"),
			anvilChainID, anvilChainID, ownersChainName, anvilURL, filepath.Join(dir, "web3gate.db"), filepath.Join(dir, "keystore"),
			anvilChainID, ownersBlockRange)
		path := filepath.Join(dir, "web3gate-owners.yaml")
		return path, os.WriteFile(path, []byte(cfg), 0o600)
	}
}

// ingestRound starts a web3gate on a fresh store in dir with every CPU and waits for it to
// index up to head.
func ingestRound(ctx context.Context, cs *children, dir, bin, anvilURL string, anvil *child, cred credentials, head uint64) (ingestSample, error) {
	var s ingestSample
	anvil0, err := cpuTime(anvil.cmd.Process.Pid)
	if err != nil {
		return s, err
	}
	started := time.Now()
	c, _, admin, err := startWeb3gate(ctx, cs, "", bin, "web3gate (owners ingest)", ownersConfig(dir, anvilURL, cred, "info"))
	if err != nil {
		return s, err
	}
	defer func() { _ = cs.stop(c) }()
	if err := waitOwnersIndexed(ctx, admin, head, 10*time.Minute); err != nil {
		return s, fmt.Errorf("%w\n%s", err, indent(c.out.String()))
	}
	s.wall = time.Since(started)
	if s.web3gateCPU, err = cpuTime(c.cmd.Process.Pid); err != nil {
		return s, err
	}
	anvil1, err := cpuTime(anvil.cmd.Process.Pid)
	if err != nil {
		return s, err
	}
	s.anvilC = anvil1 - anvil0
	m, err := ownersMetrics(admin)
	if err != nil {
		return s, err
	}
	for _, kind := range []string{"erc721", "erc1155_single", "erc1155_batch", "malformed"} {
		s.logs += m[`web3gate_owners_logs_total{chain="`+ownersChainName+`",kind="`+kind+`"}`]
	}
	if s.logs != ownersLogs || m[`web3gate_owners_logs_total{chain="anvil",kind="malformed"}`] != 0 {
		return s, fmt.Errorf("web3gate ingested %.0f logs (%.0f malformed), want the %d generated", s.logs,
			m[`web3gate_owners_logs_total{chain="anvil",kind="malformed"}`], ownersLogs)
	}
	s.writeSum = m[`web3gate_owners_write_duration_seconds_sum{chain="anvil"}`]
	s.ranges = m[`web3gate_owners_write_duration_seconds_count{chain="anvil"}`]
	s.fetchSum = m[`web3gate_owners_fetch_duration_seconds_sum{chain="anvil"}`]
	// The indexer's own line: logs and time from the first range written to caught up.
	for _, line := range strings.Split(c.out.String(), "\n") {
		var l struct {
			Msg  string  `json:"msg"`
			Logs float64 `json:"logs"`
			Took float64 `json:"took"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "owners index: backfill caught up" {
			s.took, s.backfillLogs = time.Duration(l.Took*float64(time.Second)), l.Logs
		}
	}
	if s.took == 0 {
		return s, fmt.Errorf("no \"backfill caught up\" line in web3gate's log:\n%s", indent(c.out.String()))
	}
	return s, nil
}

// ownersMetrics reads web3gate's owners series: "name{labels}" → value.
func ownersMetrics(admin string) (map[string]float64, error) {
	return metricsWithPrefix(admin, "web3gate_owners_")
}

// waitOwnersIndexed polls /metrics until the index holds block head.
func waitOwnersIndexed(ctx context.Context, admin string, head uint64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		m, err := ownersMetrics(admin)
		if err != nil {
			return err
		}
		got := m[`web3gate_owners_indexed_block{chain="`+ownersChainName+`"}`]
		if got >= float64(head) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("owners: indexed block %.0f, head %d, after %v", got, head, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

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

// ownersCases are the kinds of GET /v1/owners of (o), each over several URLs; a case's want
// is the balances each URL must answer (0: at least one). The deep page
// keys are found by walking the first contract in pages of 1,000.
func ownersCases(api string, em []common.Address) ([]getCase, error) {
	rng := rand.New(rand.NewPCG(5, 1_000_000))
	base := fmt.Sprintf("/v1/owners?chainId=%d&", anvilChainID)
	lower := func(a common.Address) string { return strings.ToLower(a.Hex()) }
	var one721, one1155, firstPages, deep []string
	for range 50 {
		one721 = append(one721, fmt.Sprintf("%scontractAddress=%s&tokenId=%d", base, lower(em[rng.IntN(3)]), rng.IntN(ownersMints721)))
		one1155 = append(one1155, fmt.Sprintf("%scontractAddress=%s&tokenId=%d", base, lower(em[3]), rng.IntN(ownersMints1155+ownersBatchLogs*ownersBatchSize)))
	}
	for _, e := range em {
		firstPages = append(firstPages, base+"contractAddress="+lower(e))
	}
	// Walk em[0] and keep the page keys at a tenth, a quarter, half, three quarters, nine tenths.
	marks := map[int]bool{24: true, 60: true, 120: true, 180: true, 216: true}
	pageKey := ""
	for page := 1; page <= 216; page++ {
		u := api + base + "limit=1000&contractAddress=" + lower(em[0])
		if pageKey != "" {
			u += "&pageKey=" + url.QueryEscape(pageKey)
		}
		resp, err := probeClient.Get(u)
		if err != nil {
			return nil, err
		}
		var a struct {
			PageKey *string `json:"pageKey"`
		}
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || a.PageKey == nil {
			return nil, fmt.Errorf("walking %s: page %d: HTTP %d, %v", lower(em[0]), page, resp.StatusCode, err)
		}
		pageKey = *a.PageKey
		if marks[page] {
			deep = append(deep, base+"contractAddress="+lower(em[0])+"&pageKey="+url.QueryEscape(pageKey))
		}
	}
	all := make([]string, len(em))
	for i, e := range em {
		all[i] = lower(e)
	}
	return []getCase{
		{key: "o1", name: "one ERC721 token", paths: one721, want: 1},
		{key: "o2", name: "one ERC1155 token", paths: one1155, want: 0},
		{key: "o3", name: "a contract, first page", paths: firstPages, want: 100},
		{key: "o4", name: "a contract, deep pageKey", paths: deep, want: 100},
		{key: "o5", name: "four contracts, a page", paths: []string{base + "contractAddresses=" + strings.Join(all, ","),
			base + "contractAddresses[]=" + all[1] + "&contractAddresses[]=" + all[3]}, want: 100},
		// A page ten times the default: shown, not a target.
		{key: "o6", name: "a page of 1,000", paths: []string{base + "limit=1000&contractAddress=" + all[1], base + "limit=1000&contractAddress=" + all[3]}, want: 1000, aside: true},
	}, nil
}

// checkOwners GETs url and checks the answer: 200, X-Indexed-Block, want balances (0: at
// least one).
func checkOwners(url string, want int) error {
	resp, body, err := probeGet(url, 4<<20)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Indexed-Block") == "" {
		return fmt.Errorf("GET %s: HTTP %d (X-Indexed-Block %q) %.300s", url, resp.StatusCode, resp.Header.Get("X-Indexed-Block"), body)
	}
	var v struct {
		Balances []json.RawMessage `json:"balances"`
		Error    json.RawMessage   `json:"error"`
	}
	if err := json.Unmarshal(body, &v); err != nil || string(v.Error) != "null" {
		return fmt.Errorf("GET %s: not an owners answer: %.300s", url, body)
	}
	if (want == 0 && len(v.Balances) == 0) || (want > 0 && len(v.Balances) != want) {
		return fmt.Errorf("GET %s: %d balances, want %d", url, len(v.Balances), want)
	}
	return nil
}

// reportOwners prints (i) and (o) against their targets.
func reportOwners(w io.Writer, cfg runConfig, or *ownersRun) {
	if or == nil || len(or.ingest) == 0 {
		return
	}
	fmt.Fprintf(w, "\nowners (i): a fresh web3gate indexing %d NFT transfers (%d logs) in %d anvil blocks (generated in %v), eth_getLogs over %d blocks; web3gate and anvil on every CPU; %d rounds\n",
		ownersTransfers, ownersLogs, or.blocks, or.genTime.Round(100*time.Millisecond), ownersBlockRange, len(or.ingest))
	series := map[string][]float64{}
	add := func(k string, v float64) { series[k] = append(series[k], v) }
	for _, s := range or.ingest {
		add("rate", s.rate())
		add("wall", s.wallRate())
		add("write", s.writeRate())
		add("fetch", s.fetchRate())
		add("cpu", us(s.web3gateCPU)/s.logs)
		add("anvil", us(s.anvilC)/s.logs)
	}
	med := func(k string) float64 { return median(series[k]) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ingest (median of the rounds)\tlogs/s\trange\t")
	fmt.Fprintf(tw, "whole pipeline (first range written to caught up)\t%.0f\t%.0f–%.0f\t\n", med("rate"), slices.Min(series["rate"]), slices.Max(series["rate"]))
	fmt.Fprintf(tw, "whole pipeline, from the process start\t%.0f\t%.0f–%.0f\t\n", med("wall"), slices.Min(series["wall"]), slices.Max(series["wall"]))
	fmt.Fprintf(tw, "store writes alone (sum of write_duration)\t%.0f\t%.0f–%.0f\t\n", med("write"), slices.Min(series["write"]), slices.Max(series["write"]))
	fmt.Fprintf(tw, "fetches alone (eth_getLogs + headers + parse; anvil's time included)\t%.0f\t%.0f–%.0f\t\n", med("fetch"), slices.Min(series["fetch"]), slices.Max(series["fetch"]))
	tw.Flush()
	fmt.Fprintf(w, "CPU per log: web3gate %.1f µs, anvil %.1f µs\n", med("cpu"), med("anvil"))

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmedian\ttarget\tresult\t")
	fmt.Fprintf(tw, "owners ingest, whole pipeline\t%.0f logs/s\t≥ %.0f logs/s\t%s\t\n", med("rate"), targetIngestRate, verdict(med("rate") >= targetIngestRate))
	tw.Flush()
	if len(or.get.rounds) > 0 {
		fmt.Fprintf(w, "\nowners (o): GET /v1/owners over that index (%d transfers); latency load %s, throughput load %s, each after a %v warm-up; %d rounds\n",
			ownersTransfers, cfg.latency, cfg.load, cfg.warmup, len(or.get.rounds))
		or.get.report(w, cfg, "query", targetOwnersP99)
	}
	if bad := ownersFailures(or); bad != "" {
		fmt.Fprintf(w, "\n!!!!! THE LOAD GOT ERRORS: these figures count failed requests and are not valid !!!!!\n%s\n", bad)
	}
}

// ownersFailures lists the runs of (o) that got errors, "" when none did.
func ownersFailures(or *ownersRun) string {
	if or == nil {
		return ""
	}
	return or.get.failures()
}
