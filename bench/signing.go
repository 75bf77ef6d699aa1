//go:build linux

package main

// The measurements of custodial signing:
//
//	(f) eth_signTransaction: signatures per second, each call taking (and holding) its own
//	    nonce of one dev account. Target ≥ 5,000/s on the machine.
//	(g) eth_sendTransaction, sustained over -send-duration: sends per second from one dev
//	    account, the embedded dev chain mining them, with no nonce gap. Target ≥ 1,000/s.
//	(g') the same with the transaction object a wallet sends, {from, to, value}: web3gate
//	    fills gas (eth_estimateGas), the EIP-1559 fees and data for every send. Reported
//	    against (g) from the same run.
//
// Each round of each runs a fresh web3gate (the shipped config.yaml, embedded dev chain, dev
// credentials) with its own store, keystore and JWT key in a temporary directory, stopped
// after the round: every round starts from an empty store, so rows held or recorded by an
// earlier run weigh on no later one.
//
// (g)'s nonce check: eth_getTransactionCount at "latest" before the load; after it, once
// "latest" equals "pending" and neither nor web3gate's count of sends answered ok has moved
// for settleQuiet, the nonces mined since must equal the sends web3gate answered ok (its
// /metrics: wrk leaves the requests still in flight when its time is up unanswered and
// uncounted, but web3gate serves them), and "pending" must equal "latest". A difference is
// an error that took a nonce or a gap, and fails the run. (f) checks the same way that the
// signatures answered ok took contiguous nonces: the signature after the load carries the
// nonce right after them.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/wallet"
)

// The signing targets: rates of the whole machine.
const (
	targetSignRate = 5000.0 // eth_signTransaction per second
	targetSendRate = 1000.0 // eth_sendTransaction per second from one account, sustained
)

// The accounts and the transaction of the signing measurements: two of the dev chain's
// funded accounts, which the shipped config gives to the dev principal, one for each
// measurement, and a legacy transfer of 1 wei.
const (
	signAccount = "0x6145D132D1CD15C0a8820daE905beAF7b52fd3Da" // (f)
	sendAccount = "0x169E8AF7B0bE789C52Ee116Dc358C5df45b22903" // (g)
	sinkAddress = "0x000000000000000000000000000000000000dEaD"
)

// txBody is a JSON-RPC call of method with the legacy transfer from `from`.
func txBody(method, from string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":[{"from":"` + from + `","to":"` + sinkAddress +
		`","gas":"0x5208","gasPrice":"0x3b9aca00","value":"0x1","data":"0x"}]}`
}

// filledBody is a JSON-RPC call of method with the transfer a wallet sends: from, to and
// value, the rest for web3gate to fill.
func filledBody(method, from string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":[{"from":"` + from + `","to":"` + sinkAddress +
		`","value":"0x1"}]}`
}

// signSpec is one signing measurement.
type signSpec struct {
	t        *target // key, name, body, headers and script; url, admin and servers per round
	method   string
	account  string
	duration time.Duration
	// settings are the wallet.transactions keys set in the config, with their values.
	settings [][2]string
	// postgres: the store is a fresh PostgreSQL database (replicas.go), served by replicas
	// web3gate processes (1 or 2); else one web3gate on a SQLite file.
	postgres bool
	replicas int
	// backend: the signing account's key is made for each round on this backend
	// (wallet.BackendPKCS11: a SoftHSM2 token; wallet.BackendAWSKMS: a local-kms) with the
	// CLI and funded from account; "" for account's own key in the keystore.
	backend string
}

// signSpecs are (f) and (g): (f) loaded for -duration like the proxy targets, (g) for
// -send-duration. The in-flight caps are far above what the load reaches, so that no call
// is refused: every (f) signature holds its nonce for handOutTTL (1h here, far beyond the
// run, so that no slot is released and reused during it: the nonce check relies on that),
// and (g)'s confirmer follows the chain every 100 ms.
func signSpecs(o options) []*signSpec {
	all := []*signSpec{
		{
			t:       &target{key: "f", name: "eth_signTransaction", body: txBody("eth_signTransaction", signAccount), headers: devHeaders},
			method:  "eth_signTransaction",
			account: signAccount, duration: o.duration,
			settings: [][2]string{{"maxInFlight", "10000000"}, {"handOutTTL", "1h"}},
		},
		{
			t:       &target{key: "g", name: "eth_sendTransaction", body: txBody("eth_sendTransaction", sendAccount), headers: devHeaders},
			method:  "eth_sendTransaction",
			account: sendAccount, duration: o.sendDuration,
			settings: [][2]string{{"maxInFlight", "1000000"}, {"pollInterval", "100ms"}},
		},
		{
			t:       &target{key: "g'", name: "eth_sendTransaction filled", body: filledBody("eth_sendTransaction", sendAccount), headers: devHeaders},
			method:  "eth_sendTransaction",
			account: sendAccount, duration: o.sendDuration,
			settings: [][2]string{{"maxInFlight", "1000000"}, {"pollInterval", "100ms"}},
		},
		{
			t:       &target{key: "f2", name: "eth_signTransaction pg", body: txBody("eth_signTransaction", signAccount), headers: devHeaders},
			method:  "eth_signTransaction",
			account: signAccount, duration: o.duration,
			settings: [][2]string{{"maxInFlight", "10000000"}, {"handOutTTL", "1h"}},
			postgres: true, replicas: 1,
		},
		{
			// The headers are the run's own credentials (replicas.go), set per round.
			t:       &target{key: "g2", name: "eth_sendTransaction 2×pg", body: txBody("eth_sendTransaction", sendAccount)},
			method:  "eth_sendTransaction",
			account: sendAccount, duration: o.sendDuration,
			settings: [][2]string{{"maxInFlight", "1000000"}, {"pollInterval", "100ms"}},
			postgres: true, replicas: 2,
		},
		{
			t:       &target{key: "f-pkcs11", name: "eth_signTransaction SoftHSM2", headers: devHeaders},
			method:  "eth_signTransaction",
			account: signAccount, duration: o.duration,
			settings: [][2]string{{"maxInFlight", "10000000"}, {"handOutTTL", "1h"}},
			backend:  wallet.BackendPKCS11,
		},
		{
			t:       &target{key: "f-awskms", name: "eth_signTransaction local-kms", headers: devHeaders},
			method:  "eth_signTransaction",
			account: signAccount, duration: o.duration,
			settings: [][2]string{{"maxInFlight", "10000000"}, {"handOutTTL", "1h"}},
			backend:  wallet.BackendAWSKMS,
		},
	}
	if len(o.signTargets) == 0 {
		return all
	}
	var out []*signSpec
	for _, sp := range all {
		if slices.Contains(o.signTargets, sp.t.key) {
			out = append(out, sp)
		}
	}
	return out
}

// signKeys are the keys of the signing measurements, for -sign-targets.
var signKeys = []string{"f", "g", "g'", "f2", "g2", "f-pkcs11", "f-awskms"}

// sends reports whether sp measures eth_sendTransaction: (g) and (g').
func (sp *signSpec) sends() bool { return sp.method == "eth_sendTransaction" }

// signSample is one round of a signing measurement.
type signSample struct {
	sample
	startup time.Duration // from starting web3gate to /readyz
	// secs are the calls answered ok in each whole second of the measured run (web3gate's
	// count, scraped every second).
	secs []float64
	// okCalls are the calls of the method answered ok during the warm-up and the run, by
	// web3gate's count; responses those wrk received.
	okCalls   float64
	responses int64
	// (f): the nonce of the check's signature, and of the one right after the load.
	firstNonce, nextNonce uint64
	// (g): the account's nonce at "latest" before the load, and at "latest" and "pending"
	// after it, once settled, settle after the end of the load.
	startCount, endCount, endPending uint64
	settled                          time.Duration
	// (g): the chain's height before and after the load (once settled): the blocks that
	// mined the sends.
	startBlock, endBlock uint64
	// nonces says what the nonce check found; issues what went wrong besides the sample's
	// problems.
	nonces string
	issues []string
}

func (s signSample) problems() string {
	parts := slices.Clone(s.issues)
	if p := s.sample.problems(); p != "" {
		parts = append([]string{p}, parts...)
	}
	return strings.Join(parts, "; ")
}

// signRound holds the samples of one round by key.
type signRound map[string]signSample

// signEnv is what every signing measurement starts web3gate with.
type signEnv struct {
	// root is the measured module (-src, or this one): web3gate starts with its shipped
	// config.yaml, which must be the binary's own.
	root, tmp, bin string
	postgres       string // the admin connection string of (f2) and (g2)'s server
}

// measureSigning runs the rounds of the signing measurements, the order reversed every
// other round. web3gate runs on every CPU even with -pin (which keeps wrk on its CPU): the
// targets are rates of the whole machine, not ratios of servers, and wrk's own cost at these
// rates is around 1% of a CPU (the report shows it).
func measureSigning(ctx context.Context, cs *children, cfg runConfig, env signEnv, specs []*signSpec) ([]signRound, error) {
	cfg.serverCPUs, cfg.serverCPUList = "", nil
	var rounds []signRound
	for r := range cfg.rounds {
		rd := signRound{}
		for _, i := range order(len(specs), r) {
			sp := specs[i]
			s, err := measureSign(ctx, cs, cfg, env, sp, r)
			if err != nil {
				return rounds, fmt.Errorf("(%s) %s, round %d: %w", sp.t.key, sp.t.name, r+1, err)
			}
			rd[sp.t.key] = s
			signProgress(r, cfg, sp, s)
		}
		rounds = append(rounds, rd)
	}
	return rounds, nil
}

// measureSign runs round r of sp on a fresh web3gate.
func measureSign(ctx context.Context, cs *children, cfg runConfig, env signEnv, sp *signSpec, r int) (ss signSample, err error) {
	dir, err := os.MkdirTemp(env.tmp, fmt.Sprintf("%s-round%d-", sp.t.key, r+1))
	if err != nil {
		return ss, err
	}
	defer os.RemoveAll(dir)
	started := time.Now()
	t := *sp.t
	spr := *sp // the round's: a hardware account is made for each round
	sp = &spr
	servers, cleanup, err := startSigners(ctx, cs, cfg, env, sp, r, dir, &t)
	defer func() {
		for _, c := range servers {
			if serr := cs.stop(c); serr != nil && err == nil {
				err = serr
			}
		}
		if cerr := cleanup(); cerr != nil && err == nil {
			err = fmt.Errorf("drop the round's database: %w", cerr)
		}
	}()
	if err != nil {
		return ss, err
	}
	ss.startup = time.Since(started)

	// One call before the load, checked: a load of error answers would measure the error path.
	res, err := rpcResult(&t)
	if err != nil {
		return ss, fmt.Errorf("check at %s: %w", t.url, err)
	}
	okKey := sp.method + " ok"
	switch {
	case !sp.sends():
		if ss.firstNonce, err = checkSigned(res, sp.account); err != nil {
			return ss, fmt.Errorf("check: eth_signTransaction answered %s: %w", res, err)
		}
	case sp.sends():
		var h string
		if json.Unmarshal(res, &h) != nil || len(h) != 66 {
			return ss, fmt.Errorf("check: eth_sendTransaction answered %s, want a transaction hash", res)
		}
		if _, err := hexutil.Decode(h); err != nil {
			return ss, fmt.Errorf("check: eth_sendTransaction answered %s, want a transaction hash: %w", res, err)
		}
		n, _, err := settle(ctx, &t, sp.account, okKey)
		if err != nil {
			return ss, fmt.Errorf("before the load: %w", err)
		}
		ss.startCount, ss.startBlock = n.latest, n.block
	}

	before, err := scrapeAll(&t)
	if err != nil {
		return ss, err
	}
	l := load{threads: cfg.load.threads, conns: cfg.load.conns, duration: sp.duration}
	if sp.replicas > 1 {
		l.threads = max(l.threads, sp.replicas) // one thread's connections per replica (splitScript)
	}
	if cfg.warmup > 0 {
		w := l
		w.duration = cfg.warmup
		if ss.warm, err = runWrk(ctx, cs, cfg.wrk, cfg.loadCPUs, &t, w); err != nil {
			return ss, err
		}
	}
	var pg0 map[int]time.Duration
	if t.pgDSN != "" {
		if pg0, err = pgBackendsCPU(ctx, t.pgDSN); err != nil {
			return ss, fmt.Errorf("PostgreSQL backends' CPU: %w", err)
		}
	}
	cpu0, ct0, err := snapshot(&t)
	if err != nil {
		return ss, err
	}
	stopTicks := make(chan struct{})
	ticks := make(chan []tick, 1)
	go func() { ticks <- countTicks(&t, okKey, stopTicks) }()
	ss.wrk, err = runWrk(ctx, cs, cfg.wrk, cfg.loadCPUs, &t, l)
	end := time.Now()
	close(stopTicks)
	ss.secs = perSecond(<-ticks, end)
	if err != nil {
		return ss, err
	}
	cpu1, ct1, err := snapshot(&t)
	if err != nil {
		return ss, err
	}
	ss.addCPU(cfg, cpu0, ct0, cpu1, ct1)
	if t.pgDSN != "" {
		pg1, err := pgBackendsCPU(ctx, t.pgDSN)
		if err != nil {
			return ss, fmt.Errorf("PostgreSQL backends' CPU: %w", err)
		}
		ss.pgCPU = pgCPUBetween(pg0, pg1)
	}

	var after nonceState
	if sp.sends() {
		after, ss.settled, err = settle(ctx, &t, sp.account, okKey)
		if err != nil {
			if ctx.Err() != nil {
				return ss, err
			}
			ss.issues = append(ss.issues, "after the load: "+err.Error())
		}
		ss.endCount, ss.endPending, ss.endBlock = after.latest, after.pending, after.block
	} else {
		// The calls wrk left in flight finish within their latency; wait for them.
		if err := quiet(ctx, &t, okKey); err != nil {
			return ss, err
		}
	}
	last, err := scrapeAll(&t)
	if err != nil {
		return ss, err
	}
	d := last.sub(before)
	ss.calls = &d
	ss.okCalls = d.methods[okKey]
	ss.responses = ss.warm.Requests + ss.wrk.Requests
	// Every response wrk got is a call web3gate answered; the calls in flight when a wrk run
	// ended (at most one per connection) are answered too, but wrk does not count them.
	if extra := ss.okCalls - float64(ss.responses); extra < 0 || extra > float64(2*l.conns) {
		ss.issues = append(ss.issues, fmt.Sprintf("web3gate answered %.0f %s calls ok, wrk got %d responses (expected up to %d more ok: the calls in flight when wrk stopped)",
			ss.okCalls, sp.method, ss.responses, 2*l.conns))
	}

	switch {
	case !sp.sends():
		// err is the function's: checkHandedOut's verdict below must reach the issues.
		var res json.RawMessage
		if res, err = rpcResult(&t); err != nil {
			return ss, fmt.Errorf("signature after the load: %w", err)
		}
		if ss.nextNonce, err = checkSigned(res, sp.account); err != nil {
			return ss, fmt.Errorf("signature after the load: %s: %w", res, err)
		}
		ss.nonces, err = checkHandedOut(ss.firstNonce, ss.nextNonce, ss.okCalls)
	case sp.sends():
		ss.nonces, err = checkMined(ss.startCount, after, ss.okCalls)
		ss.nonces += fmt.Sprintf("; the chain caught up %v after the load", ss.settled.Round(time.Millisecond))
		if blocks := ss.endBlock - ss.startBlock; blocks > 0 && ss.endBlock > ss.startBlock {
			ss.nonces += fmt.Sprintf("; %d blocks, %.1f transactions a block", blocks, float64(ss.endCount-ss.startCount)/float64(blocks))
		}
	}
	if err != nil {
		ss.issues = append(ss.issues, err.Error())
	}
	if extra := ss.okCalls - float64(ss.responses); extra >= 0 {
		ss.nonces += fmt.Sprintf("; wrk got %d responses (warm-up included), %.0f calls more were in flight when a wrk run stopped", ss.responses, extra)
	} else {
		ss.nonces += fmt.Sprintf("; wrk got %d responses (warm-up included), only %.0f answered ok", ss.responses, ss.okCalls)
	}
	return ss, nil
}

// tick is web3gate's count of a method's calls answered ok at a moment.
type tick struct {
	at time.Time
	ok float64
}

// countTicks scrapes okKey from /metrics now and every second until stop is closed.
func countTicks(t *target, okKey string, stop <-chan struct{}) []tick {
	var ticks []tick
	read := func() {
		if c, err := scrapeAll(t); err == nil {
			ticks = append(ticks, tick{time.Now(), c.methods[okKey]})
		}
	}
	read()
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return ticks
		case <-tk.C:
			read()
		}
	}
}

// perSecond turns ticks into rates over each interval between consecutive ticks that ended
// by end.
func perSecond(ticks []tick, end time.Time) []float64 {
	var rates []float64
	for i := 1; i < len(ticks); i++ {
		if ticks[i].at.After(end) {
			break
		}
		rates = append(rates, (ticks[i].ok-ticks[i-1].ok)/ticks[i].at.Sub(ticks[i-1].at).Seconds())
	}
	return rates
}
