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
	"io"
	"maps"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
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

// statesText is a count of records by state, in a fixed order.
func statesText(states map[string]int) string {
	keys := slices.Sorted(maps.Keys(states))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, states[k])
	}
	return strings.Join(parts, ", ")
}

func secsOrNone(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

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

// bumpRecords is what web3gate's records of a run's requests say.
type bumpRecords struct {
	versions int            // versions listed
	states   map[string]int // records by state
	errors   []string       // the first few distinct errors of failed records
}

// bumpsCounted is web3gate_tx_bumps_total over every label set.
func bumpsCounted(admin string) (float64, error) {
	m, err := metricsWithPrefix(admin, "web3gate_tx_bumps_total")
	var n float64
	for _, v := range m {
		n += v
	}
	return n, err
}

// checkBumpRecords reads web3gate's record of every hash and returns what they say. With all, it waits until every record
// is mined (or confirmed) with its minedHash, and reports those that never got there.
func checkBumpRecords(ctx context.Context, client *http.Client, api string, cred credentials, hashes []string, all bool) (bumpRecords, []string, error) {
	deadline := time.Now().Add(bumpRecordWait)
	for {
		rs := bumpRecords{states: map[string]int{}}
		var open []string
		for _, h := range hashes {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/v1/transactions/"+h, nil)
			if err != nil {
				return rs, nil, err
			}
			for _, hd := range cred.headers() {
				req.Header.Set(hd[0], hd[1])
			}
			resp, err := client.Do(req)
			if err != nil {
				return rs, nil, err
			}
			raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if err != nil {
				return rs, nil, err
			}
			var body struct {
				Transaction struct {
					State     string            `json:"state"`
					Error     *string           `json:"error"`
					MinedHash string            `json:"minedHash"`
					Versions  []json.RawMessage `json:"versions"`
				} `json:"transaction"`
			}
			if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &body) != nil {
				return rs, nil, fmt.Errorf("GET /v1/transactions/%s: HTTP %d %s", h, resp.StatusCode, raw)
			}
			tx := body.Transaction
			rs.versions += len(tx.Versions)
			rs.states[tx.State]++
			if tx.Error != nil && *tx.Error != "" && !slices.Contains(rs.errors, *tx.Error) && len(rs.errors) < 3 {
				rs.errors = append(rs.errors, *tx.Error)
			}
			if (tx.State != "mined" && tx.State != "confirmed") || tx.MinedHash == "" {
				open = append(open, fmt.Sprintf("%s: state %s, minedHash %q", h, tx.State, tx.MinedHash))
			}
		}
		if !all || len(open) == 0 {
			return rs, nil, nil
		}
		if time.Now().After(deadline) {
			return rs, []string{fmt.Sprintf("%d of web3gate's records not mined %v after the last block, e.g. %s", len(open), bumpRecordWait, open[0])}, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
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

// report prints the runs and the medians.
func (br *bumpRun) report(w io.Writer, cfg runConfig) {
	if br == nil || len(br.rounds) == 0 {
		return
	}
	first := br.rounds[0]["on"]
	fmt.Fprintf(w, "\n===== fee bumping: (k) %d transactions priced out by a base-fee spike, bumping on against off =====\n", bumpSends)
	fmt.Fprintf(w, "%d accounts × %d eth_sendTransaction, fees filled by web3gate at a head base fee of %d wei (highest fee cap %s wei);\n", bumpAccounts, bumpPerAccount, bumpBaseFee, first.feeCap)
	fmt.Fprintf(w, "then a block every %v at %d × that fee cap (%s wei) for at most %v; bumping at its defaults (after 3 blocks, +12.5 %%); a new anvil and web3gate each run\n", bumpBlockEvery, bumpSpike, first.spike, bumpWindow)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\ton: mined\ton: first mined\ton: all mined\ton: blocks\ton: bumps\ton: first bump\ton: all bumped\ton: versions\toff: mined in 60 s\toff: nonces filled\toff: records\t")
	var all, within, off, spread []float64
	allDone := true
	for i, rd := range br.rounds {
		on, of := rd["on"], rd["off"]
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\t%.0f\t%s\t%s\t%d\t%d\t%d\t%s\t\n", i+1, on.within, secsOrNone(on.firstMined), secsOrNone(on.allMined), on.blocks, on.bumps,
			secsOrNone(on.firstBump), secsOrNone(on.allBumped), on.records.versions, of.within, of.others, statesText(of.records.states))
		if on.allBumped > 0 && on.firstBump > 0 {
			spread = append(spread, (on.allBumped - on.firstBump).Seconds())
		}
		if on.allMined == 0 {
			allDone = false
		} else {
			all = append(all, on.allMined.Seconds())
		}
		within = append(within, float64(on.within))
		off = append(off, float64(of.within))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmedian\trange over rounds\tresult\t")
	if len(all) > 0 {
		fmt.Fprintf(tw, "(k) bumping on: all %d mined after the spike's first block\t%.1f s\t%.1f–%.1f s\t%s\t\n", bumpSends, median(all), slices.Min(all), slices.Max(all), verdict(allDone))
	}
	if len(spread) > 0 {
		fmt.Fprintf(tw, "(k) bumping on: first to %dth bump\t%.2f s\t%.2f–%.2f s\t\t\n", bumpSends, median(spread), slices.Min(spread), slices.Max(spread))
	}
	fmt.Fprintf(tw, "(k) bumping on: mined within %v\t%.0f of %d\t%.0f–%.0f\t\t\n", bumpWindow, median(within), bumpSends, slices.Min(within), slices.Max(within))
	fmt.Fprintf(tw, "(k) bumping off: mined within %v\t%.0f of %d\t%.0f–%.0f\t\t\n", bumpWindow, median(off), bumpSends, slices.Min(off), slices.Max(off))
	tw.Flush()
	if bad := br.failures(); bad != "" {
		fmt.Fprintf(w, "\n!!!!! (k) GOT ERRORS: these figures are not valid !!!!!\n%s\n", bad)
	}
}

// failures lists what went wrong in the runs, "" when nothing did.
func (br *bumpRun) failures() string {
	if br == nil {
		return ""
	}
	return strings.Join(br.problems, "\n")
}
