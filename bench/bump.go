//go:build linux

package main

// The fee-bumping measurement:
//
//	(k) 200 transactions priced out by a base-fee spike: 20 accounts web3gate holds send 10
//	    transfers each with eth_sendTransaction, every fee left to web3gate (it fills a
//	    type 2 transaction at 2 × the next base fee + the node's tip), into an anvil node that
//	    mines nothing yet (--no-mining). Then the spike: a block every second (evm_mine), each
//	    at a base fee ten times the highest fee cap filled (anvil_setNextBlockBaseFeePerGas
//	    before each), for at most 60 s. With bumping on (wallet.transactions.bump at its
//	    defaults: after 3 blocks, +12.5 %, fee cap at least 2 × the next base fee + the tip)
//	    web3gate re-signs and replaces them; with bumping off (bump.enabled: false) the same
//	    run, where none can be mined. The figures: the time from the first spiked block until
//	    all 200 are mined (the block that mined the last one), and how many are mined within
//	    the 60 s, bumping on and off, each round on a new anvil and a new web3gate.
//
// A transfer counts as mined when a block holds a transaction to its recipient (a fresh
// address each): whichever version of the request it is. Other transactions of the accounts
// (zero-value self-transfers web3gate sends to fill the nonce of a request it gave up on) are
// counted apart. Each run checks that anvil's count of the accounts' transactions matches its
// blocks (10 transfers per account with bumping on), reads web3gate's record of every
// returned hash (with bumping on: each mined, or confirmed, with its minedHash), and takes the
// bumps from web3gate_tx_bumps_total.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

const (
	bumpAccounts   = 20
	bumpPerAccount = 10 // sends per account: under maxInFlight (16), so that no send waits
	bumpSends      = bumpAccounts * bumpPerAccount
	bumpBlockEvery = time.Second
	bumpWindow     = 60 * time.Second
	bumpSpike      = 10            // the spiked base fee, times the highest fee cap filled
	bumpBaseFee    = 1_000_000_000 // wei: the head's base fee when the sends are filled
	bumpRecordWait = 15 * time.Second
	bumpPoll       = 50 * time.Millisecond // web3gate's bump counter, read while the blocks come
)

// addressRE finds the address `web3gate accounts new` prints.
var addressRE = regexp.MustCompile(`0x[0-9a-fA-F]{40}`)

// bumpRun is the whole measurement.
type bumpRun struct {
	rounds   []map[string]*bumpSample // "on", "off"
	problems []string
}

// bumpSample is one run: 200 sends, then the spike.
type bumpSample struct {
	feeCap, spike *big.Int      // the highest fee cap web3gate filled; the spiked base fee
	sendTime      time.Duration // the 200 sends, 20 at a time
	allMined      time.Duration // from the first spiked block to the block that mined the last; 0: not within the window
	within        int           // transfers mined within the window (any version of the request)
	blocks        int           // spiked blocks mined
	firstMined    time.Duration // from the first spiked block to the first block with one of them; 0: none
	firstBump     time.Duration // from the first spiked block until web3gate counted its first bump; 0: none
	allBumped     time.Duration // … until it counted bumpSends bumps; 0: not within the window
	bumps         float64       // web3gate_tx_bumps_total
	stuck         float64       // web3gate_tx_stuck_total
	others        int           // other transactions of the accounts mined (nonces web3gate filled)
	records       bumpRecords   // web3gate's records of the 200, after the run
}

// measureBump runs (k) with bumping on and off, in alternating order each round.
func measureBump(ctx context.Context, cs *children, cfg runConfig, env signEnv, anvilBin string) (*bumpRun, error) {
	fmt.Printf("bump: %d sends from %d accounts priced out by a base-fee spike, bumping on and off, a new anvil and web3gate each run...\n", bumpSends, bumpAccounts)
	// The keystore of each run is encrypted with a passphrase of the run's own.
	var pass [16]byte
	if _, err := rand.Read(pass[:]); err != nil {
		return nil, err
	}
	prev, had := os.LookupEnv(benchPassphraseEnv)
	os.Setenv(benchPassphraseEnv, hex.EncodeToString(pass[:]))
	defer func() {
		if had {
			os.Setenv(benchPassphraseEnv, prev)
		} else {
			os.Unsetenv(benchPassphraseEnv)
		}
	}()
	run := &bumpRun{}
	for r := range cfg.rounds {
		order := []string{"on", "off"}
		if r%2 == 1 {
			order = []string{"off", "on"}
		}
		round := map[string]*bumpSample{}
		for _, k := range order {
			s, problems, err := bumpRound(ctx, cs, cfg, env, anvilBin, k == "on")
			if err != nil {
				return run, fmt.Errorf("(k) bumping %s, round %d: %w", k, r+1, err)
			}
			for _, p := range problems {
				run.problems = append(run.problems, fmt.Sprintf("  round %d, bumping %s: %s", r+1, k, p))
			}
			round[k] = s
			fmt.Printf("round %d/%d  (k) bumping %-3s  %d sent in %v; fee cap %s wei, spike %s wei; transfers mined within %v: %d (first after %s, all after %s, %d blocks), other transactions %d; bumps %.0f (first after %s, %d after %s), stuck %.0f; records %s, %d versions\n",
				r+1, cfg.rounds, k, bumpSends, s.sendTime.Round(time.Millisecond), s.feeCap, s.spike, bumpWindow, s.within,
				secsOrNone(s.firstMined), secsOrNone(s.allMined), s.blocks, s.others, s.bumps, secsOrNone(s.firstBump), bumpSends, secsOrNone(s.allBumped), s.stuck, statesText(s.records.states), s.records.versions)
			for _, e := range s.records.errors {
				fmt.Printf("             a failed record's error: %s\n", e)
			}
		}
		run.rounds = append(run.rounds, round)
	}
	return run, nil
}

// bumpRound is one run on a new anvil and a new web3gate.
func bumpRound(ctx context.Context, cs *children, cfg runConfig, env signEnv, anvilBin string, on bool) (s *bumpSample, problems []string, err error) {
	s = &bumpSample{}
	dir, err := os.MkdirTemp(env.tmp, "bump-")
	if err != nil {
		return nil, nil, err
	}
	cred, err := newCredentials()
	if err != nil {
		return nil, nil, err
	}
	anvil, nodeURL, err := startQuietAnvil(ctx, cs, cfg.serverCPUs, anvilBin)
	if err != nil {
		return nil, nil, err
	}
	defer func() { err = errors.Join(err, cs.stop(anvil)) }()
	node := &bumpNode{url: nodeURL, client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8}}}
	// The head at the base fee the sends are priced at.
	if _, err := node.mine(ctx, big.NewInt(bumpBaseFee)); err != nil {
		return nil, nil, err
	}

	write := bumpConfig(dir, nodeURL, cred, on)
	cfgPath, err := write(0, 0)
	if err != nil {
		return nil, nil, err
	}
	accounts := make([]common.Address, bumpAccounts)
	for i := range accounts {
		out, err := exec.CommandContext(ctx, env.bin, "accounts", "new", "--owner", "bench", "--config", cfgPath).CombinedOutput()
		if err != nil {
			return nil, nil, fmt.Errorf("web3gate accounts new: %w\n%s", err, indent(string(out)))
		}
		addr := addressRE.Find(out)
		if addr == nil {
			return nil, nil, fmt.Errorf("web3gate accounts new printed no address: %s", out)
		}
		accounts[i] = common.HexToAddress(string(addr))
		if _, err := node.call(ctx, "anvil_setBalance", accounts[i], "0xd3c21bcecceda1000000"); err != nil {
			return nil, nil, err
		}
	}
	gw, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, "web3gate (k) bumping "+map[bool]string{true: "on", false: "off"}[on], write)
	if err != nil {
		return nil, nil, err
	}
	defer func() { err = errors.Join(err, cs.stop(gw)) }()
	url := api + "/v1/web3/mainnet"

	// The sends: one worker per account, its sends in a row.
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: bumpAccounts}}
	hashes := make([][]string, bumpAccounts)
	recipients := make([][]common.Address, bumpAccounts)
	errs := make([]error, bumpAccounts)
	started := time.Now()
	var wg sync.WaitGroup
	for i, a := range accounts {
		wg.Go(func() {
			for range bumpPerAccount {
				var to common.Address
				_, _ = rand.Read(to[:])
				res, err := jsonRPC(ctx, client, url, cred.headers(), "eth_sendTransaction",
					map[string]any{"from": a.Hex(), "to": to.Hex(), "value": "0x1"})
				var h string
				if err == nil {
					err = json.Unmarshal(res, &h)
				}
				if err != nil {
					errs[i] = err
					return
				}
				hashes[i] = append(hashes[i], h)
				recipients[i] = append(recipients[i], to)
			}
		})
	}
	wg.Wait()
	s.sendTime = time.Since(started)
	if err := errors.Join(errs...); err != nil {
		return nil, nil, fmt.Errorf("sends: %w", err)
	}
	all := slices.Concat(hashes...)
	// A transfer is mined when a transaction to its recipient is (a fresh address each): a
	// version of the request. Other transactions of the accounts (web3gate's zero-value
	// self-transfers filling a nonce it gave up on) are counted apart.
	transfers := map[common.Address]bool{}
	for _, to := range slices.Concat(recipients...) {
		transfers[to] = true
	}

	// The spike: ten times the highest fee cap filled.
	s.feeCap = new(big.Int)
	for _, h := range all {
		res, err := node.call(ctx, "eth_getTransactionByHash", h)
		if err != nil {
			return nil, nil, err
		}
		var tx struct {
			MaxFee *hexutil.Big `json:"maxFeePerGas"`
		}
		if err := json.Unmarshal(res, &tx); err != nil || tx.MaxFee == nil {
			return nil, nil, fmt.Errorf("anvil's pool: %s is not a pending type 2 transaction: %s", h, res)
		}
		if tx.MaxFee.ToInt().Cmp(s.feeCap) > 0 {
			s.feeCap.Set(tx.MaxFee.ToInt())
		}
	}
	s.spike = new(big.Int).Mul(s.feeCap, big.NewInt(bumpSpike))
	spikeAt := time.Now()
	// web3gate's bumps as they happen: its counter, read every bumpPoll.
	pollCtx, stopPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for t := time.NewTicker(bumpPoll); ; {
			if n, err := bumpsCounted(admin); err == nil {
				at := time.Since(spikeAt)
				if n > 0 && s.firstBump == 0 {
					s.firstBump = at
				}
				if n >= bumpSends && s.allBumped == 0 {
					s.allBumped = at
					t.Stop()
					return
				}
			}
			select {
			case <-pollCtx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	defer func() { stopPoll(); <-polled }()
	mined := 0
	for tick := time.NewTicker(bumpBlockEvery); ; {
		to, err := node.mine(ctx, s.spike)
		if err != nil {
			tick.Stop()
			return nil, nil, err
		}
		s.blocks++
		at := time.Since(spikeAt)
		for _, a := range to {
			if !transfers[a] {
				s.others++
				continue
			}
			if mined == 0 {
				s.firstMined = at
			}
			mined++
		}
		if mined >= bumpSends {
			s.allMined = at
		}
		if mined >= bumpSends || at+bumpBlockEvery > bumpWindow {
			tick.Stop()
			break
		}
		select {
		case <-ctx.Done():
			tick.Stop()
			return nil, nil, ctx.Err()
		case <-tick.C:
		}
	}
	s.within = mined
	stopPoll()
	<-polled

	// What anvil and web3gate say of it.
	var count int
	for _, a := range accounts {
		n, err := node.quantity(ctx, "eth_getTransactionCount", a, "latest")
		if err != nil {
			return nil, nil, err
		}
		count += int(n.Int64())
		if on && n.Int64() != bumpPerAccount {
			problems = append(problems, fmt.Sprintf("anvil counts %d transactions of %s, want %d", n.Int64(), a.Hex(), bumpPerAccount))
		}
	}
	if count != mined+s.others {
		problems = append(problems, fmt.Sprintf("anvil counts %d transactions of the accounts, its blocks since the spike hold %d", count, mined+s.others))
	}
	if on && s.others > 0 {
		problems = append(problems, fmt.Sprintf("%d transactions other than the transfers mined with bumping on", s.others))
	}
	rs, p, err := checkBumpRecords(ctx, client, api, cred, all, on)
	if err != nil {
		return nil, nil, err
	}
	s.records, problems = rs, append(problems, p...)
	m, err := metricsWithPrefix(admin, "web3gate_tx_")
	if err != nil {
		return nil, nil, err
	}
	for k, v := range m {
		switch {
		case strings.HasPrefix(k, "web3gate_tx_bumps_total"):
			s.bumps += v
		case strings.HasPrefix(k, "web3gate_tx_stuck_total"):
			s.stuck += v
		}
	}
	if !on && s.bumps != 0 {
		problems = append(problems, fmt.Sprintf("web3gate counts %.0f bumps with bumping off", s.bumps))
	}
	return s, problems, nil
}

// bumpConfig writes dir/web3gate-bump.yaml: the anvil gateway of the other anvil targets, its
// store and keystore in dir, and bumping on (at its defaults) or off.
func bumpConfig(dir, nodeURL string, cred credentials, on bool) func(api, admin int) (string, error) {
	onOff := map[bool]string{true: "on", false: "off"}[on]
	return anvilGatewayConfig(dir, "web3gate-bump.yaml", "(k), bumping "+onOff, nodeURL, cred, "  enabled: true\n", fmt.Sprintf(`store:
  path: %s
wallet:
  keys:
    dir: %s
    lightScrypt: true
  transactions:
    bump:
      enabled: %t
`, filepath.Join(dir, "web3gate.db"), filepath.Join(dir, "keystore"), on))
}
