//go:build linux

package main

// The NFT owners measurements:
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
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
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
